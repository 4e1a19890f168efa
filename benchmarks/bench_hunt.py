"""Hunt against random sampling with the same number of evaluations, on planted cases whose divergence
shows only in a small region of the inputs (tests/cases/hunt.py), each on the path where it happens.

For each case and seed, three searches of BUDGET evaluations each (every input run on both paths and
judged by the same rule, ``hunt.score.divergence``):
- hunt:    ``jaxparity hunt`` (hunt_case) with that budget and seed;
- samples: the input sets ``compare --samples BUDGET --seed S`` draws (normal around the example);
- uniform: inputs drawn uniformly from the hunt's own domain.
A search finds the case when one of its inputs shows the planted kind of divergence. Reported per case:
how many seeds found it, the evaluations to the first find (median over the seeds that found it), and
the wall time of the search.

Usage: python benchmarks/bench_hunt.py [--budget 96] [--seeds 5] [--cases make_argmax_tie,...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "cases" / "hunt.py"

# factory, path, domain, the planted kind (a divergence of this kind at any output is a find)
PLANTED = [
    ("make_argmax_tie", "jit", [], "beyond rounding"),
    ("make_floor_threshold", "savedmodel", [], "beyond rounding"),
    ("make_masked_row", "tflite", [], "NaN or inf on one side"),
    ("make_logsumexp_overflow", "tflite", ["arg0=-90:90"], "NaN or inf on one side"),
    ("make_log_subnormal", "onnx", [], "beyond rounding|NaN or inf on one side"),
    ("make_periodic", "iree", ["arg0=0:100000"], "beyond rounding"),
]


def _random(case: str, path: str, domain: list[str], kinds: set[str], budget: int, seed: int, how: str
            ) -> tuple[int | None, float]:
    """The first evaluation (1-based) whose input shows one of ``kinds``, among ``budget`` random inputs."""
    from jaxparity.execution.runners import Runners
    from jaxparity.execution.samples import draw_samples, drawn_names
    from jaxparity.hunt.domain import parse_domain
    from jaxparity.hunt.score import divergence, output_scales
    from jaxparity.metrics import Tolerance

    with Runners(case, None) as runners:
        info = runners.load()
        runner = runners.home
        example = runner.arrays()
        for spec in ("eager", path):  # compiled and converted before the clock starts, as the hunt's are
            runners.run(spec, None)
        start = time.perf_counter()
        if how == "samples":
            sets = draw_samples(example, budget, seed, info.data)
        else:
            dom = parse_domain(domain, example, drawn_names(example, info.data))
            rng = np.random.default_rng(seed)
            sets = [dom.uniform(rng) for _ in range(budget)]
        runner.send_samples([None] + sets)  # the example first: it sets each output's scale
        outs = {}
        for spec in ("eager", path):
            runs = [r[0] for part in runner.run_many(spec, range(budget + 1), 1, None, chunk=1) for r in part]
            outs[spec] = [r.outputs if r.status == "ok" else f"{r.status}: {r.message}" for r in runs]
        scales = output_scales(outs["eager"][0]) if not isinstance(outs["eager"][0], str) else {}
        first = None
        for i in range(1, budget + 1):
            d = divergence(outs["eager"][i], outs[path][i], Tolerance(), scales)
            if d is not None and d.kind in kinds:
                first = i
                break
        return first, time.perf_counter() - start


def _hunt(case: str, path: str, domain: list[str], kinds: set[str], budget: int, seed: int
          ) -> tuple[int | None, float]:
    from jaxparity.hunt import hunt_case

    start = time.perf_counter()
    r = hunt_case(case, paths=f"eager,{path}", budget=budget, domain=domain, seed=seed, explain=0)
    firsts = [n for kind, n in r.first_kind.items() if kind in kinds]
    return (min(firsts) if firsts else None), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=96)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cases", help="comma-separated factories (default: all)")
    args = parser.parse_args()
    chosen = [p for p in PLANTED if not args.cases or p[0] in args.cases.split(",")]
    print(f"budget {args.budget} evaluations per search, seeds 0..{args.seeds - 1}")
    print(f"{'case':26s} {'path':10s} {'search':8s} {'found':>6s} {'first (median)':>15s} {'wall s (median)':>16s}")
    rows = []
    for factory, path, domain, kind in chosen:
        case = f"{CASES}:{factory}"
        kinds = set(kind.split("|"))
        for how in ("hunt", "samples", "uniform"):
            firsts, walls = [], []
            for seed in range(args.seeds):
                if how == "hunt":
                    first, wall = _hunt(case, path, domain, kinds, args.budget, seed)
                else:
                    first, wall = _random(case, path, domain, kinds, args.budget, seed, how)
                firsts.append(first)
                walls.append(wall)
            found = [f for f in firsts if f is not None]
            med = f"{statistics.median(found):.0f}" if found else "-"
            print(f"{factory:26s} {path:10s} {how:8s} {len(found):>3d}/{args.seeds:<2d} {med:>15s} "
                  f"{statistics.median(walls):16.1f}", flush=True)
            rows.append((factory, how, len(found) / args.seeds))
    hard = [f for f, how, rate in rows if how == "samples" and rate < 0.2]
    hunted = [f for f, how, rate in rows if how == "hunt" and f in hard and rate >= 0.9]
    print(f"\ncases where --samples finds it in fewer than 20% of seeds: {len(hard)}; hunt finds it in at least 90% "
          f"of seeds in {len(hunted)} of them ({len(hunted) / max(len(hard), 1):.0%}; target 90%)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
