"""jit, export and savedmodel sharing one trace of the case (``paths/staging.py``), side by side with
each path tracing and lowering on its own, in one process per measurement.

For each model: the three paths run one after the other, as a ``compare`` worker runs them. "shared"
is the tool as it is; "each its own" clears the shared staging and JAX's caches before each path, which
is what every path paid before they shared. Counted: calls of the user's function (each is a trace),
StableHLO lowerings (``jax._src.interpreters.mlir.lower_jaxpr_to_module``, JAX's internal; the export
path's second lowering is of the deserialized artifact's call, which nothing can share), and seconds.

Usage: python benchmarks/bench_trace.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE = r"""
import json, sys, time
sys.path.insert(0, %(examples)r)
import importlib
mod, factory, mode = %(mod)r, %(factory)r, %(mode)r
fn0, args = getattr(importlib.import_module(mod), factory)()
calls = [0]
def fn(*a):
    calls[0] += 1
    return fn0(*a)
import jax
import jax._src.interpreters.mlir as mlir
original = mlir.lower_jaxpr_to_module
lowerings = [0]
def counted(*a, **k):
    lowerings[0] += 1
    return original(*a, **k)
mlir.lower_jaxpr_to_module = counted
import tensorflow  # imported before timing: both modes need it, and it is not what is measured
from jaxparity.execution.inprocess import run_in_process
from jaxparity.paths import make_path
from jaxparity.paths import staging
rows = {}
for spec in ("jit", "export", "savedmodel"):
    if mode == "each":
        staging._STAGED.clear()
        jax.clear_caches()
    c, l, t = calls[0], lowerings[0], time.perf_counter()
    run = run_in_process(make_path(spec), fn, args)
    assert run.status == "ok", run.message
    rows[spec] = (time.perf_counter() - t, calls[0] - c, lowerings[0] - l)
print(json.dumps(rows))
"""


def measure(mod: str, factory: str, mode: str) -> dict:
    code = ONE % {"examples": str(ROOT / "examples"), "mod": mod, "factory": factory, "mode": mode}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        raise SystemExit(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for mod, factory in (("transformer_bf16", "make"), ("transformer_bf16", "make_deep")):
        runs: dict[str, list[dict]] = {"shared": [], "each": []}
        for _ in range(args.repeat):  # interleaved
            for mode in runs:
                runs[mode].append(measure(mod, factory, mode))
        print(f"{mod}.py:{factory}")
        for mode, label in (("each", "each its own"), ("shared", "shared")):
            total = statistics.median(sum(r[s][0] for s in r) for r in runs[mode])
            traces = sum(v[1] for v in runs[mode][0].values())
            lowerings = sum(v[2] for v in runs[mode][0].values())
            per = ", ".join(f"{s} {statistics.median(r[s][0] for r in runs[mode]):.2f} s" for s in runs[mode][0])
            print(f"  {label:13s}: {total:6.2f} s ({per}); traces {traces}, lowerings {lowerings}")
        each = statistics.median(sum(r[s][0] for s in r) for r in runs["each"])
        shared = statistics.median(sum(r[s][0] for s in r) for r in runs["shared"])
        print(f"  shared / each its own: {shared / each:.2f}")


if __name__ == "__main__":
    main()
