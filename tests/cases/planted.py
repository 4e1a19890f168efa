"""Small cases with one planted divergence each, and the line where it is planted.

Each factory's culprit line carries a `# planted: <cause>` comment; the tests find the line number
from that comment, so editing this file cannot silently break what they check.
"""

import jax
import jax.numpy as jnp
import numpy as np


def _normal(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def make_softmax_bf16():
    def fn(x):
        return jax.nn.softmax(x.astype(jnp.bfloat16), axis=-1)  # planted: excess-precision softmax

    return fn, (_normal((10, 100)),)


def make_layernorm_bf16():
    def layer_norm(x):
        x = x.astype(jnp.bfloat16)
        y = (x - jnp.mean(x, -1, keepdims=True)) / jnp.sqrt(jnp.var(x, -1, keepdims=True) + 1e-5)  # planted: excess-precision layernorm
        return y.astype(jnp.float32)

    return layer_norm, (_normal((8, 64)) * 3 + 1,)


def make_fma():
    def fn(a, b, c, d):
        return a * b - c * d  # planted: fma-contraction

    return fn, tuple(_normal((1000,), seed=i) for i in range(4))


def make_div_by_constant():
    def fn(x):
        return x / 3.0  # planted: algebraic-rewrite

    return fn, (_normal((1000,)),)


def make_reduction_noise():
    def fn(x, y):
        return jnp.sum(x * y, axis=-1)  # planted: reduction-order

    return fn, (_normal((64, 4096)), _normal((64, 4096), seed=1))


def make_subnormals():
    def fn(x):
        return x * jnp.float32(1e-39)  # planted: denormal-flush

    return fn, (_normal((256,)),)


def make_clean():
    def fn(x, w):
        return jnp.tanh(x @ w)

    return fn, (_normal((4, 16)), _normal((16, 8), seed=1))


def make_noise_cancelled():
    """Reduction noise, then a cancellation that makes it millions of ULP at the output: still the
    reductions' noise, but too large a difference to be called noise."""
    x, y = _normal((16, 4096)), _normal((16, 4096), seed=1)
    near = jnp.asarray((np.asarray(x, np.float64) * np.asarray(y, np.float64)).sum(-1).astype(np.float32))

    def fn(x, y):
        return jnp.sum(x * y, axis=-1) - near  # planted: cancelled noise

    return fn, (x, y)


def make_two_causes():
    """Two causes in one program: a bf16 LayerNorm (excess precision) and a float32 multiply-subtract
    (FMA). Turning off excess precision fixes the first output only; the rest is the FMA."""

    def fn(x, a, b, c, d):
        x = x.astype(jnp.bfloat16)
        y = (x - jnp.mean(x, -1, keepdims=True)) / jnp.sqrt(jnp.var(x, -1, keepdims=True) + 1e-5)  # planted: two causes layernorm
        return y.astype(jnp.float32), a * b - c * d  # planted: two causes fma

    return fn, (_normal((8, 64)) * 3 + 1, *(_normal((1000,), seed=i) for i in range(4)))


def make_identity_rewrite():
    """log(exp(x)) overflows to inf for x > 88 in float32; XLA's simplifier rewrites it to x."""

    def fn(x):
        return jnp.log(jnp.exp(x))  # planted: identity rewrite

    return fn, (jnp.asarray(np.array([1.0, 50.0, 100.0, 200.0, -3.0], np.float32)),)


def make_rng():
    """Noise drawn from a key: its bits depend on JAX's RNG configuration (jax_threefry_partitionable)."""

    def fn(key, x):
        return x + jax.random.normal(key, x.shape)  # planted: rng

    return fn, (jax.random.key(42), _normal((16, 4)))


def make_nan_fold():
    """x * 0.0 and x - x where x holds NaN and inf: IEEE gives NaN; fast math folds them to 0."""

    def fn(x):
        return x * 0.0 + (x - x)  # planted: nan fold

    return fn, (jnp.asarray(np.array([np.nan, np.inf, -np.inf, 1.0, 2.0], np.float32)),)
