"""Many-inputs mode throughput for jit, side by side with the same executable called directly.

    python benchmarks/bench_samples.py [N]

Measures, on examples/mlp_bf16.py with N (default 64) drawn samples:
  many   jit's samples/s in `compare_samples` (worker call: inputs in, outputs to numpy, back over the pipe)
  loop   the same compiled jit executable called on the same samples in a plain loop here (outputs to numpy)
  batch  one call of jax.vmap over all samples stacked (the path's own batched throughput)
and prints the ratios (target: many / loop >= 0.8). Compile time is excluded from loop and batch
(compiled first); many-inputs mode pays it once, on its first sample, which its samples/s leaves out.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import jax
import numpy as np

from jaxparity.case import load_case
from jaxparity.comparison import compare_samples
from jaxparity.pytree import argument_leaves, host
from jaxparity.samples import args_with, draw_samples

CASE = str(Path(__file__).resolve().parents[1] / "examples" / "mlp_bf16.py")


def main(n: int = 64) -> None:
    case = load_case(CASE)
    example = {name: host(x) for name, x in argument_leaves(case.args)}
    sets = draw_samples(example, n, seed=0)
    all_args = [args_with(case.args, s) for s in sets]  # for the batched call

    # many-inputs mode (isolated worker; compare_samples measures jit's samples/s around its worker calls)
    many = max(compare_samples(CASE, samples=n, seed=0, paths="jit").path("jit").samples.samples_per_second
               for _ in range(3))  # best of 3, as below: runs this short are noisy

    # the same executable in a plain loop
    compiled = jax.jit(case.fn).lower(*case.args).compile()
    jax.block_until_ready(compiled(*case.args))
    best_loop = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for s in sets:  # from host arrays, as many-inputs mode gets them
            jax.tree_util.tree_map(np.asarray, compiled(*args_with(case.args, s)))
        best_loop = max(best_loop, n / (time.perf_counter() - start))

    # one batched call: vmap over every input leaf
    stacked = jax.tree_util.tree_map(lambda *xs: jax.numpy.stack(xs), *all_args)
    batched = jax.jit(jax.vmap(case.fn)).lower(*stacked).compile()
    jax.block_until_ready(batched(*stacked))
    best_batch = 0.0
    for _ in range(3):
        start = time.perf_counter()
        jax.tree_util.tree_map(np.asarray, batched(*stacked))
        best_batch = max(best_batch, n / (time.perf_counter() - start))

    print(f"mlp_bf16, jit, {n} samples")
    print(f"  many-inputs mode  {many:10.1f} samples/s")
    print(f"  plain loop        {best_loop:10.1f} samples/s   many/loop  = {many / best_loop:.2f} (target >= 0.8)")
    print(f"  one batched call  {best_batch:10.1f} samples/s   many/batch = {many / best_batch:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
