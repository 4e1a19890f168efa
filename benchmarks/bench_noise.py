"""What the rounding-noise bound (explain/noise.py) costs: one float64 run of the program per draw.

Usage: python benchmarks/bench_noise.py [CASE ...]   (default: the examples)
"""

import sys
import time

import jax

from jaxparity.case import load_case
from jaxparity.explain.noise import spread
from jaxparity.localize.program import flatten

cases = sys.argv[1:] or ["examples/resnet_bf16.py", "examples/transformer_bf16.py", "examples/cnn_bf16.py",
                         "examples/mlp_bf16.py"]
for case in cases:
    c = load_case(case)
    program = flatten(c.fn, c.args)
    leaves = jax.tree_util.tree_leaves(c.args)
    t = time.perf_counter()
    far = spread(program, leaves, trials=1)
    print(f"{case}: {len(program.ops)} ops, {time.perf_counter() - t:.2f} s per draw"
          + (" (the interpreter could not run it)" if far is None else ""))
