"""Speed as the user feels it (issue 54): for each model, `jaxparity compare`'s whole time against `jaxparity
explain`'s time to the table (the comparison printed on stderr), to the first verdict (the first line a verdict
streams) and to its end, cold (a fresh cache) then warm (the same commands again), every path.

    python benchmarks/first_verdict.py [FILE.py ...]   (default: the real models of benchmarks/models)

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


def _timed(args: list[str], env: dict[str, str]) -> dict[str, float]:
    """Seconds from the start to the table, to the first verdict and to the end, read from stderr as it comes."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "jaxparity", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    seen: dict[str, float] = {}
    assert proc.stderr is not None
    for line in proc.stderr:
        now = time.monotonic() - start
        if line.startswith("path ") and "table" not in seen:
            seen["table"] = now
        elif "table" in seen and "verdict" not in seen and line.startswith(("✗ ", "✓ ")) and \
                not line.startswith(("✓ explain ", "✗ explain ")):  # after the table: a verdict, not a path
            seen["verdict"] = now
    proc.wait()
    seen["whole"] = time.monotonic() - start
    seen["exit"] = proc.returncode
    return seen


def main(files: list[str]) -> None:
    print(f"{'model':24s} {'state':5s} {'compare':>8s} {'table':>7s} {'verdict':>8s} {'explain':>8s} "
          f"{'verdict/compare':>16s} {'explain/compare':>16s}")
    for file in files or MODELS:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, JAXPARITY_CACHE=cache, KERAS_BACKEND="jax", EQX_ON_ERROR="nan", COLUMNS="80")
            for state in ("cold", "warm"):
                if state == "cold":  # compare and explain each cold: a cache of their own
                    with tempfile.TemporaryDirectory() as other:
                        compare = _timed(["compare", file, "--paths", PATHS], dict(env, JAXPARITY_CACHE=other))
                else:
                    compare = _timed(["compare", file, "--paths", PATHS], env)
                explain = _timed(["explain", file, "--paths", PATHS], env)
                c = compare["whole"]
                v = explain.get("verdict")
                print(f"{Path(file).stem:24s} {state:5s} {c:8.1f} {explain.get('table', float('nan')):7.1f} "
                      f"{v if v is not None else float('nan'):8.1f} {explain['whole']:8.1f} "
                      f"{(v or float('nan')) / c:16.2f} {explain['whole'] / c:16.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
