"""Divergences between runtimes that are not XLA's flags: each culprit line carries a
`# planted: <what>` comment (issue 11)."""

import jax.numpy as jnp
import numpy as np


def make_log_subnormal():
    """log of subnormal float32 inputs: XLA on CPU treats them as zero (DAZ); the true log is finite."""

    def fn(x):
        return jnp.log(x) * 0.5  # planted: log subnormal

    x = np.array([1e-40, 3e-42, 2.5e-39, 0.5, 2.0, 7.0], np.float32)
    return fn, (jnp.asarray(x),)


def make_nan_to_int():
    """Casting NaN, inf and out-of-range floats to int32: implementation-defined."""

    def fn(x):
        return (x * 2.0).astype(jnp.int32)  # planted: float to int

    return fn, (jnp.asarray(np.array([np.nan, np.inf, -np.inf, 3e9, 1.25, -7.5], np.float32)),)


def make_floor_tan():
    """A 1-ULP difference in tan that floor turns into a whole integer."""

    def fn(x):
        t = jnp.tan(x)  # planted: tan
        return jnp.floor(t * 8.0)  # planted: floor

    # tan(x) * 8 lands next to an integer: a 1-ULP difference in tan decides which side floor takes.
    base = np.arctan(np.concatenate([np.arange(-80, 0), np.arange(1, 81)]) / 8.0).astype(np.float32)
    x = np.concatenate([base + k * np.spacing(base) for k in range(-3, 4)]).astype(np.float32)
    return fn, (jnp.asarray(x),)


def make_sort_ties():
    """Sorting values with ties and ±0: the order among equal keys belongs to the implementation."""

    def fn(x, payload):
        order = jnp.argsort(x)  # planted: argsort ties
        return payload[order]

    x = np.array([0.0, -0.0, 1.0, 1.0, -3.0, 0.0, 2.0, 1.0], np.float32)
    return fn, (jnp.asarray(x), jnp.arange(8, dtype=jnp.float32))
