"""Wall-time benchmarks for `jaxparity compare`, each measured side by side in one run.

1. Seed case, default paths: `jaxparity compare examples/conv_bf16.py` against `benchmarks/by_hand.py`
   (the same paths computed by a plain script), interleaved, REPEAT times each. Target ratio <= 0.6 (issue 13).
2. Transformer block: the tool's own overhead beyond the paths' compile+run, i.e. wall time minus the
   paths' own seconds minus the floor any script pays (start Python, import JAX, build the case).
   Target <= 20% of wall time.
3. Transformer block, in one process: `declared` against `eager` once both are warm. Target <= 3x.

Usage: python benchmarks/bench_compare.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return elapsed


def seed_vs_by_hand(repeat: int) -> dict:
    tool = [PY, "-m", "jaxparity", "compare", "examples/conv_bf16.py", "-q"]
    hand = [PY, "benchmarks/by_hand.py"]
    wall(hand)  # warm the page cache for both (first imports of TensorFlow are slow)
    t_tool, t_hand = [], []
    for _ in range(repeat):
        t_hand.append(wall(hand))
        t_tool.append(wall(tool))
    return {"tool_s": statistics.median(t_tool), "by_hand_s": statistics.median(t_hand),
            "ratio": statistics.median(t_tool) / statistics.median(t_hand), "samples": repeat}


FLOOR = """
import sys, time
sys.path.insert(0, 'examples')
import jax, transformer_bf16
fn, args = transformer_bf16.make()
"""


def transformer_overhead(repeat: int) -> dict:
    rows = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            total = wall([PY, "-m", "jaxparity", "compare", "examples/transformer_bf16.py", "-q", "--json", out])
            paths = sum(p["seconds"] for p in json.load(open(out))["paths"])
        floor = wall([PY, "-c", FLOOR])
        rows.append((total, paths, floor))
    total, paths, floor = (statistics.median(c) for c in zip(*rows))
    overhead = max(total - paths - floor, 0.0)
    return {"wall_s": total, "paths_s": paths, "floor_s": floor, "overhead_s": overhead,
            "overhead_fraction": overhead / total, "samples": repeat}


WARM = """
import sys, time, json
sys.path.insert(0, 'examples')
import transformer_bf16
from jaxparity.paths import make_path
fn, args = transformer_bf16.make()
eager, declared = make_path('eager'), make_path('declared')
times = {'eager': [], 'declared': []}
for i in range(6):
    for name, p in (('eager', eager), ('declared', declared)):
        t = time.perf_counter(); p.run(fn, args); times[name].append(time.perf_counter() - t)
print(json.dumps(times))
"""


def declared_vs_eager_warm() -> dict:
    r = subprocess.run([PY, "-c", WARM], cwd=ROOT, capture_output=True, text=True, check=True)
    times = json.loads(r.stdout.strip().splitlines()[-1])
    eager, declared = (statistics.median(times[k][1:]) for k in ("eager", "declared"))
    return {"eager_warm_s": eager, "declared_warm_s": declared, "ratio": declared / eager,
            "eager_cold_s": times["eager"][0], "declared_cold_s": times["declared"][0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = {
        "seed_vs_by_hand": seed_vs_by_hand(args.repeat),
        "transformer_overhead": transformer_overhead(args.repeat),
        "declared_vs_eager_warm": declared_vs_eager_warm(),
    }
    s, t, d = results["seed_vs_by_hand"], results["transformer_overhead"], results["declared_vs_eager_warm"]
    print(f"seed case, default paths: jaxparity {s['tool_s']:.2f} s, by hand {s['by_hand_s']:.2f} s, "
          f"ratio {s['ratio']:.2f} (target <= 0.6)")
    print(f"transformer: wall {t['wall_s']:.2f} s = paths {t['paths_s']:.2f} s + python/jax/case floor "
          f"{t['floor_s']:.2f} s + jaxparity overhead {t['overhead_s']:.2f} s "
          f"({100 * t['overhead_fraction']:.0f}% of wall; target <= 20%)")
    print(f"transformer, warm: declared {1000 * d['declared_warm_s']:.1f} ms, eager {1000 * d['eager_warm_s']:.1f} ms, "
          f"ratio {d['ratio']:.2f} (target <= 3); cold: declared {d['declared_cold_s']:.2f} s, "
          f"eager {d['eager_cold_s']:.2f} s")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
