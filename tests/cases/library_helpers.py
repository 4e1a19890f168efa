"""Ops created inside jitted library helpers (jnp.cumsum, jnp.sort, jnp.remainder, jax.image.resize)."""

import jax, jax.numpy as jnp

def f(x):
    a = jnp.cumsum(x)
    b = jnp.sort(a)
    c = jnp.remainder(b, 0.7)
    d = jax.image.resize(c.reshape(2, 4), (4, 8), "linear")
    return d

def make():
    return f, (jnp.linspace(-1, 1, 8),)
