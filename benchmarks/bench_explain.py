"""Localization at scale: compiles of the full model per path, and wall time against one cold
compile+run of the model, measured side by side in fresh processes.

For each model and compiled path, a fresh process (1) compiles and runs the model once with
jax.jit (cold): the yardstick; another fresh process (2) first runs the comparison's paths (eager,
jit, and the path), as `jaxparity explain` does, then is timed on what it runs to localize that
path: the flat program, the eager baseline's per-op values, the path's per-op values (one compiled
program returning every intermediate), the local replay, and the compiler evidence (the optimized
HLO of the comparison's own jit compile, plus one compile with per-pass dumps). Every
`Lowered.compile` of the model is counted, the comparison's own compile of the path included.
Targets: <= 3 compiles of the full model per path; localization <= 5x the cold compile+run.

Usage: python benchmarks/bench_explain.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics

from fresh import run_fresh


COLD = """
import sys, time, json
sys.path.insert(0, 'examples')
import jax, transformer_bf16
fn, args = getattr(transformer_bf16, sys.argv[1])()
jax.block_until_ready(args)
t = time.perf_counter()
jax.block_until_ready(jax.jit(fn)(*args))
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

LOCALIZE = """
import sys, time, json
sys.path.insert(0, 'examples')
import jax, transformer_bf16
from jax._src import stages
compiles = []
original = stages.Lowered.compile
def counting(self, *a, **k):
    compiles.append(1)
    return original(self, *a, **k)
stages.Lowered.compile = counting
from jaxparity.localize.program import flatten
from jaxparity.localize.values import op_values
from jaxparity.localize.localizer import localize
from jaxparity.explain.evidence.hlo import compiler_evidence
from jaxparity.paths import make_path
fn, args = getattr(transformer_bf16, sys.argv[1])()
path = sys.argv[2]
flat = jax.tree_util.tree_leaves(args)
for spec in dict.fromkeys(['eager', 'jit', path]):  # the comparison before the explanation
    make_path(spec).run(fn, args)
compiles.clear()
compiles.append(1)  # the comparison's own compile of this path
t = time.perf_counter()
program = flatten(fn, args)
base = op_values(program, 'eager', flat)
got = op_values(program, path, flat)
loc = localize(program, got, base, flat, 'eager')
from jaxparity.paths.xla import recent_optimized_hlo
ev = compiler_evidence(fn, args, path=path, optimized_text=recent_optimized_hlo('jit', fn, args))
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "compiles": len(compiles), "ops": len(program.ops),
                  "local": len(loc.local), "widened": len(ev.widened)}))
"""


run = run_fresh


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for factory in ("make", "make_deep"):
        for path in ("jit", "export"):
            cold, loc = [], []
            for _ in range(args.repeat):
                cold.append(run(COLD, factory)["seconds"])
                loc.append(run(LOCALIZE, factory, path))
            c = statistics.median(cold)
            s = statistics.median(r["seconds"] for r in loc)
            rows.append({"model": f"transformer_bf16.py:{factory}", "path": path, "ops": loc[0]["ops"],
                         "cold_compile_run_s": c, "localize_s": s, "ratio": s / c,
                         "compiles": loc[0]["compiles"], "local_divergences": loc[0]["local"],
                         "widened": loc[0]["widened"]})
            r = rows[-1]
            print(f"{r['model']} ({r['ops']} ops), {path}: localize {s:.2f} s vs cold compile+run {c:.2f} s = "
                  f"{r['ratio']:.2f}x (target <= 5); {r['compiles']} compiles (target <= 3); "
                  f"{r['local_divergences']} local divergences, {r['widened']} widened results")
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
