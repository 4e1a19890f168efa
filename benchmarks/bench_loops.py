"""Localization inside loops, and between two compiled paths, at model scale: measured side by side,
every measurement in a fresh process.

1. A bf16 transformer of 24 pre-LN blocks applied with ``nn.scan`` (examples/transformer_bf16.py:
   make_scanned): a fresh process compiles and runs it once with jax.jit (cold): the yardstick.
   Another fresh process runs the comparison's paths (eager, jit) as `jaxparity explain` does, then
   is timed on what it runs to localize jit inside the loop: the flat program, eager's per-op values
   (its loops run op by op), jit's values with the carry of every iteration (one compiled program),
   the top-level localization, the search for the first iteration that departs on its own (one
   iteration replayed at a time), the probed compile that captures that iteration's body, its
   localization, and the compiler evidence. Every ``Lowered.compile`` of the full model is counted.
   Targets: <= 5x the cold compile+run; <= 3 compiles of the full model plus 1 per instrumented
   iteration.
2. ``explain`` of savedmodel (with the serving flag) against jit on a bf16 ResNet of over 1,500
   equations (examples/resnet_bf16.py): wall time, JAX compiles, peak memory of the process
   (TensorFlow's own processes are not included).

Usage: python benchmarks/bench_loops.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics

from fresh import run_fresh


COUNTING = """
import sys, time, json, resource
sys.path.insert(0, 'examples')
import jax
from jax._src import stages
compiles = []
original = stages.Lowered.compile
def counting(self, *a, **k):
    compiles.append(len(self.as_text()))
    return original(self, *a, **k)
stages.Lowered.compile = counting
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""

COLD = COUNTING + """
import transformer_bf16
fn, args = transformer_bf16.make_scanned()
jax.block_until_ready(args)
t = time.perf_counter()
jax.block_until_ready(jax.jit(fn)(*args))
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

LOCALIZE = COUNTING + """
import transformer_bf16
from jaxparity.localize.program import flatten
from jaxparity.localize.values import op_values
from jaxparity.localize.localizer import localize
from jaxparity.localize.loops.descend import open_loops
from jaxparity.localize.loops.structure import body_of
from jaxparity.explain.evidence.hlo import compiler_evidence
from jaxparity.paths import make_path
from jaxparity.paths.xla import recent_optimized_hlo
fn, args = transformer_bf16.make_scanned()
flat = jax.tree_util.tree_leaves(args)
outs = {spec: jax.tree_util.tree_leaves(make_path(spec).run(fn, args)) for spec in ('eager', 'jit')}
model_size = compiles[-1]
compiles.clear()
compiles.append(model_size)  # the comparison's own compile of jit
t = time.perf_counter()
program = flatten(fn, args)
base = op_values(program, 'eager', flat)
got = op_values(program, 'jit', flat)
loc = localize(program, got, base, flat, 'eager')
before = len(compiles)
loc = open_loops(program, loc, got, base, case=program, flat_args=flat, plain_outputs=outs['jit'])
iteration_compiles = len(compiles) - before  # the opened iteration's body (and one iteration's replay)
ev = compiler_evidence(fn, args, path='jit', optimized_text=recent_optimized_hlo('jit', fn, args))
seconds = time.perf_counter() - t
first = loc.first
scan = next(o for o in program.ops if o.info.primitive == 'scan')
body = len(body_of(scan).program.ops)
print(json.dumps({"seconds": seconds, "compiles_full": len(compiles) - iteration_compiles,
                  "compiles_iteration": iteration_compiles,
                  "ops_top": len(program.ops), "ops_unrolled": len(program.ops) - 1 + body * 24,
                  "where": first.where() if first else None, "line": first.op.user_source if first else None,
                  "peak_mb": peak_mb()}))
"""

RESNET = COUNTING + """
import resnet_bf16, jaxparity
from jaxparity.localize.program import flatten
fn, args = resnet_bf16.make()
ops = len(flatten(fn, args).ops)
path = 'savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false'
result = jaxparity.compare(fn, *args, paths=['jit', path], baseline='jit')
compiles.clear()
t = time.perf_counter()
(e,) = [x for x in result.explain().explanations if x.path == path]
seconds = time.perf_counter() - t
first = e.localization.first
print(json.dumps({"seconds": seconds, "compiles": len(compiles), "ops": ops,
                  "where": first.where() if first else None, "line": first.op.user_source if first else None,
                  "peak_mb": peak_mb()}))
"""


run = run_fresh


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cold, loc = [], []
    for _ in range(args.repeat):
        cold.append(run(COLD)["seconds"])
        loc.append(run(LOCALIZE))
    c = statistics.median(cold)
    s = statistics.median(r["seconds"] for r in loc)
    r = loc[0]
    print(f"transformer_bf16.py:make_scanned ({r['ops_top']} ops, {r['ops_unrolled']} counting the body once per "
          f"layer), jit vs eager: localize {s:.2f} s vs cold compile+run {c:.2f} s = {s / c:.2f}x (target <= 5); "
          f"{r['compiles_full']} compiles of the full model (target <= 3) + {r['compiles_iteration']} for the "
          f"opened iteration; peak {max(x['peak_mb'] for x in loc):.0f} MB; first: {r['where']} at {r['line']}")
    rn = [run(RESNET) for _ in range(max(1, args.repeat // 3))]
    q = rn[0]
    print(f"resnet_bf16.py:make ({q['ops']} ops), savedmodel (serving flag) vs jit: explain "
          f"{statistics.median(x['seconds'] for x in rn):.1f} s, {q['compiles']} JAX compiles, peak "
          f"{max(x['peak_mb'] for x in rn):.0f} MB; first: {q['where']} at {q['line']}")
    print(json.dumps({"scanned": {"cold_s": cold, "localize": loc}, "resnet": rn}, indent=2))


if __name__ == "__main__":
    main()
