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
