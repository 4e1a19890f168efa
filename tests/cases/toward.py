"""Programs on which no path is near the f64 ideal, and two on which that is nothing the program could change:
``explain.toward`` must name where the first loses its digits and verify the change toward the ideal on every
path, and say nothing of the others."""

import jax
import jax.numpy as jnp
import numpy as np


def layer_norm(x):
    """A one-pass variance written by hand, with keepdims (no library form), of activations near 300."""
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean(x * x, axis=-1, keepdims=True) - m * m  # planted: one-pass variance
    return (x - m) * jax.lax.rsqrt(v + 1e-5)


def make_one_pass():
    x = np.random.default_rng(7).normal(300.0, 0.5, size=(8, 128)).astype(np.float32)
    return layer_norm, (x,)


def make_two_pass():
    """The same normalization with jnp.var (two passes): every path near the ideal."""
    x = np.random.default_rng(7).normal(300.0, 0.5, size=(8, 128)).astype(np.float32)
    return (lambda x: (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5)), (x,)


def make_running_bf16():
    """A running sum in bfloat16: far from the ideal on every path because the declared dtype is that narrow,
    not because an op amplifies anything (nothing to name, no change to offer)."""
    return (lambda x: jnp.cumsum(x)), (jnp.full((1024,), 0.1, jnp.bfloat16),)


def softmax(logits):
    e = jnp.exp(logits)  # planted: overflows
    return e / jnp.sum(e, axis=-1, keepdims=True)


def make_softmax_overflow():
    """A softmax written without the max shift, on logits past 88: exp overflows, inf / inf is NaN on every path
    (ONNX Runtime's exp differs from eager's by 1 ULP where neither overflows)."""
    return softmax, (np.random.default_rng(0).normal(0, 60, (4, 16)).astype(np.float32),)


def offset_layer_norm(x):
    """A layer norm as equinox writes it (mean, then jnp.var: two passes), per row."""
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.var(x, axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5)  # planted: centering


def make_offset_rows():
    """Rows offset by 1e7 with a spread of a few units: each row's sum of 6e7 rounds by up to 2 in float32, in
    whatever order a runtime adds it (both orders correct), and x − mean(x) turns that into a difference in the
    leading digits. A constant row and a row holding inf besides."""
    x = np.array([[7.0] * 6,
                  [1e7, 1e7 + 1, 1e7 + 2, 1e7 + 3, 1e7 + 4, 1e7 + 5],
                  [np.inf, 0.0, 1.0, 2.0, 3.0, 4.0],
                  [3e7, 3e7 + 2, 3e7 + 4, 3e7 + 6, 3e7 + 8, 3e7 + 10]], np.float32)
    return offset_layer_norm, (x,)


def fast_variance(x):
    """flax's LayerNorm with use_fast_variance (its default): mean(x²) − mean(x)²."""
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.maximum(0.0, jnp.mean(jnp.square(x), axis=-1, keepdims=True) - jnp.square(m))
    return (x - m) * jax.lax.rsqrt(v + 1e-6)


def make_fast_variance_overflow():
    """A one-pass variance whose baseline value is 0 on one row (mean(x²) and mean(x)² round to the same float)
    while another runtime's sum order leaves 131072, and a row whose squares overflow to inf on every side."""
    x = np.array([[2.0] * 6,
                  [1e20, -1e20, 1e20, -1e20, 0.0, 0.0],
                  [1e6, 1e6 + 1, 1e6 + 2, 1e6 + 3, 1e6 + 4, 1e6 + 5],
                  [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]], np.float32)
    return fast_variance, (x,)


def make_offset_and_subnormal_rows():
    """The layer norm above on a row offset by 1e7 (summed otherwise by onnx's ReduceMean, amplified by the
    centering) and a row of subnormals (which eager flushes to zero): two mechanisms, each on its own elements."""
    x = np.array([[7.0] * 6,
                  [1e7, 1e7 + 1, 1e7 + 2, 1e7 + 3, 1e7 + 4, 1e7 + 5],
                  [1e-40, 0.0, -1e-40, 1e-40, 0.0, 0.0]], np.float32)
    return offset_layer_norm, (x,)
