"""The TPU's arithmetic against the correctly rounded result (issue 38), one process: elementwise functions
on 100,001 points, and float32 dot products at each matmul precision against emulations of k bf16 passes
computed on the host. Prints one line per measurement; run on the TPU machine (benchmarks/tpu/run.sh)."""

import math
import time

import jax
import jax.numpy as jnp
import numpy as np

import ml_dtypes

tpu = jax.devices()[0]
cpu = jax.devices("cpu")[0]
print("devices", tpu, "|", cpu, "| jax", jax.__version__)


def ulps(got, exact):
    """ULP distance of float32 values from the float64 exact values rounded to float32."""
    ref = exact.astype(np.float32)
    a = got.view(np.int32).astype(np.int64)
    b = ref.view(np.int32).astype(np.int64)
    a = np.where(a < 0, -(a & 0x7FFFFFFF), a)
    b = np.where(b < 0, -(b & 0x7FFFFFFF), b)
    return np.abs(a - b)


x = np.linspace(-10, 10, 100_001).astype(np.float32)
pos = np.linspace(1e-6, 100, 100_001).astype(np.float32)
unit = np.linspace(-0.999, 0.999, 100_001).astype(np.float32)
ops = {
    "tanh": (jnp.tanh, np.tanh, x), "exp": (jnp.exp, np.exp, np.clip(x, -80, 80)),
    "log": (jnp.log, np.log, pos), "logistic": (jax.nn.sigmoid, lambda v: 1 / (1 + np.exp(-v)), x),
    "erf": (jax.scipy.special.erf, np.vectorize(math.erf), x), "rsqrt": (jax.lax.rsqrt, lambda v: 1 / np.sqrt(v), pos),
    "sqrt": (jnp.sqrt, np.sqrt, pos), "log1p": (jnp.log1p, np.log1p, pos), "expm1": (jnp.expm1, np.expm1, x),
    "sin": (jnp.sin, np.sin, x), "cos": (jnp.cos, np.cos, x), "div": (lambda v: 1.0 / v, lambda v: 1.0 / v, pos),
    "atanh": (jnp.arctanh, np.arctanh, unit), "pow": (lambda v: v ** np.float32(1.7), lambda v: v ** 1.7, pos),
}
for name, (f, ref, data) in ops.items():
    exact = ref(data.astype(np.float64))
    for dev in (tpu, cpu):
        got = np.asarray(jax.jit(f, device=dev)(jax.device_put(data, dev)))
        u = ulps(got, exact)
        print(f"elementwise {name:9s} {dev.platform}: max {u.max():>8d} ULP, mean {u.mean():.3f}, "
              f"worst at x={data[u.argmax()]!r}")

# float32 dot products: the TPU at each precision against k-pass bf16 emulations on the host
r = np.random.default_rng(0)
a = r.normal(size=(256, 512)).astype(np.float32)
b = r.normal(size=(512, 256)).astype(np.float32)
exact = a.astype(np.float64) @ b.astype(np.float64)


def split(v):
    hi = v.astype(ml_dtypes.bfloat16).astype(np.float32)
    mid = (v - hi).astype(ml_dtypes.bfloat16).astype(np.float32)
    lo = (v - hi - mid).astype(ml_dtypes.bfloat16).astype(np.float32)
    return hi, mid, lo


ah, am, al = split(a)
bh, bm, bl = split(b)
f64 = lambda p, q: p.astype(np.float64) @ q.astype(np.float64)  # noqa: E731  (products exact, sum in f64)
emulated = {
    "1 pass": f64(ah, bh),
    "3 passes": f64(ah, bh) + f64(ah, bm) + f64(am, bh),
    "6 passes": f64(ah, bh) + f64(ah, bm) + f64(am, bh) + f64(am, bm) + f64(ah, bl) + f64(al, bh),
}
for precision in ("default", "high", "highest"):
    with jax.default_matmul_precision(precision):
        got = np.asarray(jax.jit(jnp.matmul, device=tpu)(jax.device_put(a, tpu), jax.device_put(b, tpu)))
    dist = {k: float(np.abs(got - e).max()) for k, e in emulated.items()}
    print(f"dot f32 {precision:8s} tpu: max abs from exact {np.abs(got - exact).max():.3g}; from emulations: "
          + ", ".join(f"{k} {v:.3g}" for k, v in dist.items()))
got = np.asarray(jax.jit(jnp.matmul, device=cpu)(a, b))
print(f"dot f32 cpu: max abs from exact {np.abs(got - exact).max():.3g}; from emulations: "
      + ", ".join(f"{k} {float(np.abs(got - e).max()):.3g}" for k, e in emulated.items()))
# timing of the precisions on the TPU
for precision in ("default", "high", "highest"):
    big = jax.device_put(r.normal(size=(4096, 4096)).astype(np.float32), tpu)
    with jax.default_matmul_precision(precision):
        g = jax.jit(lambda p: p @ p)
        g(big).block_until_ready()
        t = time.perf_counter()
        for _ in range(20):
            g(big).block_until_ready()
    print(f"time f32 4096^3 matmul {precision}: {(time.perf_counter() - t) / 20 * 1e3:.3f} ms")
