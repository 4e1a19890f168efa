"""The conformance suite over JAX's primitive test corpus; writes docs/conformance.md.

    .venv/bin/python benchmarks/conformance.py                 # the whole corpus (~5,500 harnesses)
    .venv/bin/python benchmarks/conformance.py --sample        # one harness per (group, dtype)
    .venv/bin/python benchmarks/conformance.py --jobs 2 --out docs/conformance.md

Progress and timing go to stderr. Exit status 1 when there is a tool error or a false `equal`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", action="store_true", help="one harness per (group, dtype), not the whole corpus")
    parser.add_argument("--thin", action="store_true", help="with --sample: only enough to cover every group and dtype")
    parser.add_argument("--out", default=str(ROOT / "docs" / "conformance.md"), help="markdown report to write")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1: this process)")
    parser.add_argument("--only", default=None, help="only harnesses whose full name contains this")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    from jaxparity.conformance import load_corpus, render, run_suite, stratified, totals

    start = time.perf_counter()
    corpus = load_corpus()
    chosen = stratified(corpus, thin=args.thin) if args.sample else corpus
    if args.only:
        chosen = [h for h in chosen if args.only in h.fullname]
    print(f"conformance: {len(chosen)} of {len(corpus)} harnesses, {args.jobs} job(s)", file=sys.stderr)

    def progress(done: int, total: int, o) -> None:
        flag = o.declared if o.declared not in (None, "identical") else ""
        bad = " FALSE-EQUAL" if o.false_equal else ""
        if flag or bad or done % 100 == 0 or done == total:
            print(f"[{done}/{total} {time.perf_counter() - start:6.0f}s] {o.fullname[:90]} {flag}{bad}",
                  file=sys.stderr, flush=True)

    outcomes = run_suite(chosen, jobs=args.jobs, progress=progress)
    wall = time.perf_counter() - start
    argv_shown = " ".join(sys.argv[1:] if argv is None else argv)
    command = f".venv/bin/python benchmarks/conformance.py {argv_shown}".strip()
    Path(args.out).write_text(render(outcomes, command=command, wall_seconds=wall, jobs=args.jobs,
                                     corpus_size=len(corpus)))
    t = totals(outcomes)
    per = sorted(o.seconds for o in outcomes)
    print(f"conformance: {len(outcomes)} harnesses in {wall:.0f} s (median {per[len(per) // 2]:.2f} s each); "
          f"tool errors {t.tool_errors}, false equal {t.false_equal}, false differs {t.false_differs}, "
          f"miscounted {t.miscounted}, XLA errors {t.xla_errors}, within accuracy {t.within}, "
          f"symmetric {t.symmetric}, no reference {t.no_reference}, skipped {t.skipped}; wrote {args.out}",
          file=sys.stderr)
    return 1 if t.tool_errors or t.false_equal else 0


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.exit(main())
