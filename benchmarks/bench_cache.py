"""Re-runs that do not start from scratch: a second identical `compare` and `explain` of
examples/transformer_bf16.py against the first, each pair from an empty cache (target: the second
<= 0.4x the first), measured side by side in one run; and the same second run with --no-cache,
which must cost what the first did.

Each round: an empty cache directory, the command (cold), the same command again (warm), and the
command with --no-cache (off). Rounds alternate compare and explain; the medians are reported.

Usage: python benchmarks/bench_cache.py [--repeat 3] [--case examples/transformer_bf16.py]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _seconds(command: list[str], cache: Path) -> float:
    env = dict(os.environ, JAXPARITY_CACHE=str(cache))
    env.pop("JAXPARITY_NO_CACHE", None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "jaxparity", *command], env=env, cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--case", default="examples/transformer_bf16.py")
    a = ap.parse_args()
    shared = Path(os.environ.get("JAXPARITY_CACHE") or Path.home() / ".cache" / "jaxparity")
    runs: dict[str, dict[str, list[float]]] = {c: {"cold": [], "warm": [], "off": []} for c in ("compare", "explain")}
    for _ in range(a.repeat):
        for command in ("compare", "explain"):
            cache = Path(tempfile.mkdtemp(prefix="bench-cache-"))
            (cache / "envs").symlink_to(shared / "envs") if (shared / "envs").exists() else None
            try:
                argv = [command, a.case]
                runs[command]["cold"].append(_seconds(argv, cache))
                runs[command]["warm"].append(_seconds(argv, cache))
                runs[command]["off"].append(_seconds([*argv, "--no-cache"], cache))
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    print(f"{a.case}, {a.repeat} rounds, medians (seconds):")
    for command, r in runs.items():
        cold, warm, off = (statistics.median(r[k]) for k in ("cold", "warm", "off"))
        print(f"  {command:8s} first {cold:6.2f}   second {warm:6.2f} ({warm / cold:.2f}x)   "
              f"second with --no-cache {off:6.2f} ({off / cold:.2f}x)")


if __name__ == "__main__":
    main()
