"""How each installed runtime adds a float32 sum over the last axis, read off its own kernel by the summation-order
probe (``jaxparity.explain.mechanism.summation``: one row per pair of terms, M at one, −M at the other, ones
elsewhere), and whether that tree of additions gives the runtime's sums of other data bit for bit (random rows
spanning 14 decades of magnitude, where orders differ in their last bits).

Usage: python benchmarks/sum_orders.py [--paths eager,jit,tflite,onnx,onnx-ref,iree] [--n 6,37,100,256]
Prints a row per (path, n): the order in words, whether it reproduces the data's sums, the probe's seconds.
"""

from __future__ import annotations

import argparse
import time

import jax.numpy as jnp
import numpy as np

from jaxparity.execution.inprocess import run_in_process
from jaxparity.explain.mechanism.summation import evaluate, order_of
from jaxparity.paths import make_path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--paths", default="eager,jit,tflite,onnx,onnx-ref,iree")
    ap.add_argument("--n", default="6,37,100,256")
    args = ap.parse_args()
    print(f"{'path':9} {'n':>4} {'reproduces':>10} {'seconds':>7}  order")
    for spec in args.paths.split(","):
        for n in map(int, args.n.split(",")):
            start = time.monotonic()
            order = order_of(spec, n, np.float32)
            took = time.monotonic() - start
            if isinstance(order, str):
                print(f"{spec:9} {n:>4} {'-':>10} {took:7.1f}  {order}")
                continue
            rng = np.random.default_rng(n)
            x = (rng.standard_normal((256, n)) * np.exp(rng.uniform(-16, 16, (256, n)))).astype(np.float32)
            r = run_in_process(make_path(spec), lambda v: jnp.sum(v, axis=-1), (x,))
            got = np.asarray(r.outputs[0][1]) if r.status == "ok" else None
            held = "-" if order.tree is None or got is None else (
                "yes" if np.array_equal(evaluate(order.tree, x), got) else "no")
            print(f"{spec:9} {n:>4} {held:>10} {took:7.1f}  {order.words}")


if __name__ == "__main__":
    main()
