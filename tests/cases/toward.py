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
