"""`jaxparity explain` of savedmodel (with a serving flag) against jit on the bf16 ResNet of over 1,500
equations (examples/resnet_bf16.py), as the command line runs it, three ways side by side in one run,
each a fresh command:

- before: no cache and no warm serving process (``--no-cache``, ``JAXPARITY_WARM=0``): every
  experiment's re-run a fresh TensorFlow serving process, started when it is needed, as before issue 23;
- first: the default, from an empty cache: the serving processes the flag re-runs need started at once,
  in parallel, and kept warm for the re-runs of the same serving environment;
- second: the same command again: the SavedModels, JAX's compiled programs and the compiler evidence
  read from the cache, the serving processes the first left waiting, their models still loaded.

Target (issue 23): the explanation at most 0.6x of its time before. The verdicts of all three must be
the same (checked: from the "who" line on, the output is compared).

Usage: python benchmarks/bench_resnet_explain.py [--repeat 1]
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
PATH = "savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false"
COMMAND = ["explain", "examples/resnet_bf16.py", "--paths", f"jit,{PATH}", "--baseline", "jit"]


def _run(cache: Path, *extra: str, **env: str) -> tuple[float, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("JAXPARITY_")}
    environ.update(JAXPARITY_CACHE=str(cache), COLUMNS="120", **env)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "jaxparity", *COMMAND, *extra], env=environ, cwd=ROOT,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(COMMAND)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    # the explanation's verdict: who is wrong, the cause, what to do and the fixes (its "where" may say less
    # when blame's time budget runs out first, as on a cold machine)
    lines = done.stdout.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("who ")), None)
    if start is None:
        raise SystemExit(f"no explanation in the output:\n{done.stdout[-3000:]}")
    return seconds, "\n".join(ln.rstrip() for ln in lines[start:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    shared = Path(os.environ.get("JAXPARITY_CACHE") or Path.home() / ".cache" / "jaxparity")
    times: dict[str, list[float]] = {"before": [], "first": [], "second": []}
    for _ in range(a.repeat):
        cache = Path(tempfile.mkdtemp(prefix="jp-bench-"))
        (cache / "envs").symlink_to(shared / "envs") if (shared / "envs").exists() else None
        try:
            before, said_before = _run(cache, "--no-cache", JAXPARITY_WARM="0")
            first, said_first = _run(cache)
            second, said_second = _run(cache)
        finally:
            from jaxparity.execution.warm import stop_daemons

            stop_daemons(cache / "serve")
            shutil.rmtree(cache, ignore_errors=True)
        for k, v in (("before", before), ("first", first), ("second", second)):
            times[k].append(v)
        print(f"round: before {before:.1f} s, first {first:.1f} s, second {second:.1f} s", flush=True)
        if not (said_before == said_first == said_second):
            raise SystemExit(f"the verdicts differ:\n{said_before}\n---\n{said_first}\n---\n{said_second}")
    b, f, s = (statistics.median(times[k]) for k in ("before", "first", "second"))
    print(f"resnet_bf16.py, explain {PATH} vs jit, {a.repeat} round(s), medians: before {b:.1f} s, "
          f"first {f:.1f} s ({f / b:.2f}x), second {s:.1f} s ({s / b:.2f}x)")
    print(said_first)


if __name__ == "__main__":
    main()
