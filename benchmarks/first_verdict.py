"""Speed as the user feels it (issue 54): for each model, `jaxparity compare`'s whole time against `jaxparity
explain`'s time to the table (the comparison printed on stderr), to the first verdict (the first line a verdict
streams: paths that agree or could not run are decided with the table), to the first divergence's verdict and to
its end, cold (a fresh cache) then warm (the same commands again), every path.

    python benchmarks/first_verdict.py [--keep DIR] [FILE.py ...]   (default: the real models of benchmarks/models)

``--keep DIR`` writes each explain's report (stdout) and JSON there, to read.

One line per model and state: compare's seconds, then explain's table / first verdict / whole, and the ratios
first verdict ÷ compare and whole ÷ compare (the targets: about 1.2 and 3).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = "eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree"
MODELS = ["benchmarks/models/keras_mobilenetv3.py", "benchmarks/models/hf_gpt2.py",
          "benchmarks/models/haiku_char_lstm.py", "benchmarks/models/diffrax_neural_ode.py"]


def _timed(args: list[str], env: dict[str, str], keep: Path | None = None) -> dict[str, float]:
    """Seconds from the start to the table, to the first verdict and to the end, read from stderr as it comes."""
    start = time.monotonic()
    out = open(keep, "w") if keep is not None else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "jaxparity", *args], stdout=out,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    seen: dict[str, float] = {}
    assert proc.stderr is not None
    for line in proc.stderr:
        now = time.monotonic() - start
        if line.startswith(("path ", "path: ")) and "table" not in seen:  # a table, or one stacked as lines
            seen["table"] = now
        elif "table" in seen and line.startswith(("✗ ", "✓ ", "– ")) and \
                not line.startswith(("✓ explain ", "✗ explain ")):  # after the table: a verdict, not a path
            seen.setdefault("verdict", now)
            if " diverge" in line:
                seen.setdefault("divergence", now)
    proc.wait()
    seen["whole"] = time.monotonic() - start
    seen["exit"] = proc.returncode
    return seen


def main(files: list[str], keep: Path | None = None) -> None:
    print(f"{'model':20s} {'state':5s} {'compare':>7s} {'table':>6s} {'first':>6s} {'diverge':>7s} {'explain':>7s}"
          f" {'first/cmp':>9s} {'diverge/cmp':>11s} {'explain/cmp':>11s}")
    for file in files or MODELS:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, JAXPARITY_CACHE=cache, KERAS_BACKEND="jax", EQX_ON_ERROR="nan", COLUMNS="80")
            for state in ("cold", "warm"):
                if state == "cold":  # compare and explain each cold: a cache of their own
                    with tempfile.TemporaryDirectory() as other:
                        compare = _timed(["compare", file, "--paths", PATHS], dict(env, JAXPARITY_CACHE=other))
                else:
                    compare = _timed(["compare", file, "--paths", PATHS], env)
                stem = f"{Path(file).stem}-{state}"
                explain = _timed(["explain", file, "--paths", PATHS] +
                                 (["--json", str(keep / f"{stem}.json")] if keep else []), env,
                                 keep / f"{stem}.txt" if keep else None)
                c, nan = compare["whole"], float("nan")
                v, d = explain.get("verdict", nan), explain.get("divergence", nan)
                print(f"{Path(file).stem:20s} {state:5s} {c:7.1f} {explain.get('table', nan):6.1f} {v:6.1f} {d:7.1f} "
                      f"{explain['whole']:7.1f} {v / c:9.2f} {d / c:11.2f} {explain['whole'] / c:11.2f}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    keep = None
    if args[:1] == ["--keep"]:
        keep = Path(args[1])
        keep.mkdir(parents=True, exist_ok=True)
        args = args[2:]
    main(args, keep)
