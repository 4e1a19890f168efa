"""How often `jaxparity explain` is fully useful on programs whose mechanism no issue here described:
benchmarks/uncatalogued/corpus.py holds 14 small data-processing and ML programs (hashes, crops, lookups,
bucketing, ranking, losses, spectra, sampling) pushed to the edges of their domains, each differing from
eager on some of tflite, onnx, onnx-ref and iree. Every differing path's explanation is counted for:

  line     it names a line of the corpus (the user's call)
  trigger  it says which elements differ ("differs on exactly ... where", "departs exactly where")
  layer    it names the layer at fault ("at fault: the conversion / the runtime's kernel / ...")
  fix      it prints a fix verified by a re-run (✓)
  catch    its cause is a catch-all ("a different lowering or kernel", "unknown")
  noise    it is judged rounding noise (within what correct implementations of the ops may differ by): no
           fix is owed, and the default gate passes it

These are counts of what the text says, not of whether it is right: read the reports (written to
--out) before quoting a count as accuracy. Each program runs in a fresh `jaxparity explain` process.

Usage: python benchmarks/bench_uncatalogued.py [--src SRC] [--out DIR] [--only NAME ...]
(--src: a jaxparity source tree to measure instead of this one, e.g. an older commit's src/)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
CORPUS = ROOT / "uncatalogued" / "corpus.py"
PATHS = "eager,jit,tflite,onnx,onnx-ref,iree"


def blocks(text: str) -> list[tuple[str, str]]:
    """(paths, text) of each "why P differs from eager" block of a report."""
    parts = re.split(r"^why (.+?) differs? from \S+\n", text, flags=re.M)
    return [(parts[i], parts[i + 1].split("\n\n")[0]) for i in range(1, len(parts) - 1, 2)]


def score(block: str) -> dict[str, bool]:
    flat = " ".join(block.split())
    return {
        "line": re.search(r"corpus\.py:\d+", flat) is not None,
        "trigger": re.search(r"differs on (exactly|the one)|departs exactly where|differs mostly where", flat) is not None,
        "layer": "at fault:" in flat,
        "fix": "✓" in flat,
        "catch": "a different lowering or kernel" in flat or "cause unknown" in flat,
        "noise": flat.startswith("triage rounding noise:") or " triage rounding noise:" in flat[:40],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=str(ROOT.parent / "src"))
    ap.add_argument("--out", default="uncatalogued-reports")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--score", metavar="DIR", help="count the reports already written to DIR (NAME.txt), run nothing")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = re.findall(r"^def make_(\w+)", CORPUS.read_text(), flags=re.M)
    env = dict(os.environ, PYTHONPATH=args.src, COLUMNS="80")
    totals: dict[str, int] = {}
    n = 0
    print(f"{'program':<22} {'paths':<26} line trigger layer fix catch noise  seconds")
    for name in names if not args.only else [x for x in names if x in args.only]:
        t = time.perf_counter()
        if args.score:
            text = (Path(args.score) / f"{name}.txt").read_text()
        else:
            run = subprocess.run([sys.executable, "-m", "jaxparity", "explain", f"{CORPUS}:make_{name}", "--paths",
                                  PATHS, "--jobs", "1"], capture_output=True, text=True, env=env, cwd=ROOT)
            text = run.stdout + run.stderr
            (out / f"{name}.txt").write_text(text)
        seconds = time.perf_counter() - t
        for paths, block in blocks(text):
            s = score(block)
            n += 1
            for k, v in s.items():
                totals[k] = totals.get(k, 0) + int(v)
            marks = "  ".join("y" if s[k] else "-" for k in ("line", "trigger", "layer", "fix", "catch", "noise"))
            print(f"{name:<22} {paths:<26} {marks}    {seconds:6.1f}")
    print(f"\n{n} explanations: " + ", ".join(f"{k} {v}" for k, v in totals.items()))


if __name__ == "__main__":
    main()
