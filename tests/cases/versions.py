"""Cases for the version range (issue 21): functions whose StableHLO a newer JAX writes in a version the
serving TensorFlow cannot read (sinh, erf, cosh and top_k are among the ops that moved)."""

import jax
import jax.numpy as jnp
import numpy as np


def make_sinh_erf():
    def fn(x):
        return jnp.sinh(x) + jax.scipy.special.erf(x) * jnp.cosh(x)  # planted: skew

    return fn, (jnp.asarray(np.linspace(-3, 3, 16, dtype=np.float32)),)


def make_top_k():
    def fn(x):
        return jax.lax.top_k(x, 3)[0]  # planted: skew

    return fn, (jnp.asarray(np.linspace(-3, 3, 16, dtype=np.float32)),)


def moments(x, w):
    """softmax, logsumexp, var, gelu and norm: jax.numpy calls whose traces change between JAX versions."""
    h = jax.nn.softmax(x @ w, axis=-1)
    s = jax.nn.logsumexp(h * 3.0, axis=0)
    return jnp.var(h, axis=-1), s, jax.nn.gelu(x[:, :4]), jnp.linalg.norm(w, axis=0)


def make_moments():
    r = np.random.default_rng(0)
    return moments, (r.normal(size=(8, 16)).astype(np.float32), r.normal(size=(16, 8)).astype(np.float32))
