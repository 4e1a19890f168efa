"""How often `jaxparity explain` is fully useful on programs whose mechanism no issue here described:
benchmarks/uncatalogued/corpus.py holds 14 small data-processing and ML programs (hashes, crops, lookups,
bucketing, ranking, losses, spectra, sampling) pushed to the edges of their domains, each differing from
eager on some of tflite, onnx, onnx-ref and iree. Each group of differing paths is counted from its verdict
(the report's --json, ``jaxparity.verdict``) for:

  line     a carrier names a line of the corpus (the user's call)
  trigger  it says which elements differ (the verdict's trigger)
  layer    it names the layer at fault (compiler, converter, kernel, device, program)
  fix      a fix holds on re-run (parity, within rounding noise, or toward the f64 ideal)
  catch    its mechanism is a catch-all ("another lowering or kernel", unknown, not established)
  noise    it is judged rounding noise (within what correct implementations of the ops may differ by): no
           fix is owed, and the default gate passes it

These are counts of what the verdicts say, not of whether it is right: read the reports (written to
--out) before quoting a count as accuracy. Each program runs in a fresh `jaxparity explain` process.

Usage: python benchmarks/bench_uncatalogued.py [--src SRC] [--out DIR] [--only NAME ...] [--corpus FILE]
(--src: a jaxparity source tree to measure instead of this one, e.g. an older commit's src/; --corpus: another
file of make_NAME factories to score the same way, e.g. benchmarks/uncatalogued/public.py, programs of public
libraries)
"""

from __future__ import annotations

import argparse
import os
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
CORPUS = ROOT / "uncatalogued" / "corpus.py"
PATHS = "eager,jit,tflite,onnx,onnx-ref,iree"


def verdicts(report: dict, corpus: Path = CORPUS) -> list[tuple[str, dict[str, bool]]]:
    """(paths, what its verdict says) for each group of differing paths of a ``--json`` report: counted from the
    verdicts themselves (``jaxparity.verdict``), which every renderer only renders. A carrier names a line of the
    corpus when its line holds ``<corpus file name>:``."""
    mark = f"{corpus.name}:"
    out = []
    for v in report.get("verdicts", []):
        if v["kind"] not in ("divergence", "noise"):
            continue
        title = v.get("title") or ""
        out.append((",".join(v["paths"]), {
            "line": any(mark in (c.get("line") or "") for c in v.get("carriers", [])),
            "trigger": bool(v.get("trigger")),
            "layer": bool(v.get("layer")),
            "fix": any(f["outcome"] in ("parity", "noise", "toward f64") for f in v.get("fixes", [])),
            "catch": v["kind"] == "divergence" and (title in ("another lowering or kernel", "unknown", "") or
                                                    (v.get("mechanism") or "").startswith("not established")),
            "noise": v["kind"] == "noise",
        }))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=str(ROOT.parent / "src"))
    ap.add_argument("--out", default="uncatalogued-reports")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--corpus", default=str(CORPUS), metavar="FILE",
                    help="the programs (make_NAME factories) to explain; default: uncatalogued/corpus.py")
    ap.add_argument("--score", metavar="DIR", help="count the reports already written to DIR (NAME.txt), run nothing")
    args = ap.parse_args()
    out = Path(args.out).resolve()  # the explain subprocess runs in benchmarks/: a relative --out must not move
    out.mkdir(parents=True, exist_ok=True)
    corpus = Path(args.corpus).resolve()
    names = re.findall(r"^def make_(\w+)", corpus.read_text(), flags=re.M)
    env = dict(os.environ, PYTHONPATH=args.src, COLUMNS="80")
    totals: dict[str, int] = {}
    n = 0
    names = names if not args.only else [x for x in names if x in args.only]
    w = max([22, *map(len, names)])
    print(f"{'program':<{w}} {'paths':<26} line trigger layer fix catch noise  seconds")
    for name in names:
        t = time.perf_counter()
        report = (Path(args.score) if args.score else out) / f"{name}.json"
        if not args.score:
            run = subprocess.run([sys.executable, "-m", "jaxparity", "explain", f"{corpus}:make_{name}", "--paths",
                                  PATHS, "--jobs", "1", "--json", str(report)], capture_output=True, text=True,
                                 env=env, cwd=ROOT)
            (out / f"{name}.txt").write_text(run.stdout + run.stderr)
        seconds = time.perf_counter() - t
        if not report.exists():
            print(f"{name:<{w}} (no report: see {out / (name + '.txt')})")
            continue
        for paths, s in verdicts(json.loads(report.read_text()), corpus):
            n += 1
            for k, v in s.items():
                totals[k] = totals.get(k, 0) + int(v)
            marks = "  ".join("y" if s[k] else "-" for k in ("line", "trigger", "layer", "fix", "catch", "noise"))
            print(f"{name:<{w}} {paths:<26} {marks}    {seconds:6.1f}")
    print(f"\n{n} explanations: " + ", ".join(f"{k} {v}" for k, v in totals.items()))


if __name__ == "__main__":
    main()
