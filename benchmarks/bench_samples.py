"""Many-inputs mode throughput for jit, side by side with the same executable called directly.

    python benchmarks/bench_samples.py [N [ROUNDS]]

Measures, on examples/mlp_bf16.py with N (default 256) drawn samples:
  many   jit's samples/s in `compare_samples` (isolated worker: inputs put in place, the path run,
         outputs to numpy and back over the pipe, per sample)
  loop   the same compiled jit executable called on the same samples in a plain loop here: per sample
         one transfer of its host arrays (the data; the model's params stay on the device), the call,
         outputs to numpy
  batch  one call of jax.vmap over all samples stacked (a different program: informative only)
Many and loop are measured in ROUNDS (default 5) interleaved rounds, so load on the machine hits both
alike; the figures are the best round of each, and the ratio is also given per round (target:
many / loop >= 0.8). Compile time is excluded from loop and batch (compiled first); many-inputs mode
pays it once, on its first sample, which its samples/s leaves out.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import jax
import numpy as np

from jaxparity.case import load_case
from jaxparity.comparison import compare_samples
from jaxparity.pytree import argument_leaves, host
from jaxparity.execution.samples import draw_samples

CASE = str(Path(__file__).resolve().parents[1] / "examples" / "mlp_bf16.py")


def main(n: int = 256, rounds: int = 5) -> None:
    case = load_case(CASE)
    example = {name: host(x) for name, x in argument_leaves(case.args)}
    sets = draw_samples(example, n, seed=0)  # the samples compare_samples(seed=0) draws
    treedef = jax.tree_util.tree_structure(case.args)
    base = jax.tree_util.tree_leaves(case.args)
    drawn = list(sets[0])  # the leaves a sample varies (the data; the model's params stay)
    where = [list(example).index(k) for k in drawn]

    def many() -> float:  # isolated worker; compare_samples times jit around its worker calls
        return compare_samples(CASE, samples=n, seed=0, paths="jit").path("jit").samples.samples_per_second

    compiled = jax.jit(case.fn).lower(*case.args).compile()
    jax.block_until_ready(compiled(*case.args))

    def loop() -> float:  # the same executable in a plain loop, from the same host arrays
        start = time.perf_counter()
        for s in sets:
            leaves = list(base)
            for i, x in zip(where, jax.device_put([s[k] for k in drawn])):
                leaves[i] = x
            jax.tree_util.tree_map(np.asarray, compiled(*jax.tree_util.tree_unflatten(treedef, leaves)))
        return n / (time.perf_counter() - start)

    print(f"mlp_bf16, jit, {n} samples, {rounds} interleaved rounds")
    rows = []
    for r in range(rounds):
        rows.append((many(), loop()))
        m, lp = rows[-1]
        print(f"  round {r + 1}: many {m:8.1f}  loop {lp:8.1f}  many/loop = {m / lp:.2f}")
    best_many, best_loop = (max(col) for col in zip(*rows))
    median_ratio = statistics.median(m / lp for m, lp in rows)

    # one batched call: vmap over every input leaf
    full = [{**example, **s} for s in sets]
    stacked = jax.tree_util.tree_map(lambda *xs: jax.numpy.stack(xs),
                                     *[jax.tree_util.tree_unflatten(treedef, [s[k] for k in example]) for s in full])
    batched = jax.jit(jax.vmap(case.fn)).lower(*stacked).compile()
    jax.block_until_ready(batched(*stacked))
    best_batch = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        jax.tree_util.tree_map(np.asarray, batched(*stacked))
        best_batch = max(best_batch, n / (time.perf_counter() - start))

    print(f"  many-inputs mode  {best_many:10.1f} samples/s   (best of {rounds})")
    print(f"  plain loop        {best_loop:10.1f} samples/s   (best of {rounds})   many/loop = "
          f"{best_many / best_loop:.2f} (target >= 0.8); median of the per-round ratios {median_ratio:.2f}")
    print(f"  one batched call  {best_batch:10.1f} samples/s   many/batch = {best_many / best_batch:.2f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
