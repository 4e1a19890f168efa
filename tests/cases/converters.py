"""A converter that loses a parameter of a primitive: jax2onnx writes lax.round, whose default rounds halves away
from zero, as ONNX's Round (halves to even). ``mechanism.ablation`` must name the parameter, not only the op. And
a converter that lowers a library call whole, where the fix of another output's op is re-run on the program bound
primitive by primitive."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def doubled_round(x):
    return lax.round(x) * 2.0  # planted: rounding_method lost by the converter


def make_round():
    return doubled_round, (np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.3, 1.7, 3.5], np.float32),)


def make_glu_and_log_softmax():
    """jax.nn.glu with a subnormal value and jax.nn.log_softmax over a row spread over 1e30 (from the public
    corpus, benchmarks/uncatalogued/public.py): eager flushes the subnormal (DAZ) in glu's product; jax2onnx lowers
    log_softmax whole to LogSoftmax, which onnx.reference computes as the log of a softmax that underflows."""

    def fn(x, z):
        return jax.nn.glu(x, axis=-1), jax.nn.log_softmax(z, axis=-1)

    x = np.array([[1.0, 2.0, 100.0, -100.0],
                  [np.inf, 1.0, -100.0, 100.0],
                  [0.0, 1e30, np.inf, -np.inf],
                  [-1.0, np.nan, 0.0, 1e-40]], np.float32)
    z = np.array([[-np.inf, -np.inf, -np.inf, -np.inf],
                  [np.inf, 0.0, 1.0, 2.0],
                  [1e30, -1e30, 0.0, 1.0],
                  [1e-40, 0.0, -0.0, 1e-40]], np.float32)
    return fn, (x, z)


def make_digitize_nan():
    """jnp.digitize of a feature holding NaN: JAX sorts NaN after every boundary, jax2onnx's own lowering of the
    whole call (whose primitives it cannot convert: a scan) before every one."""
    bounds = jnp.array([-1.0, 0.0, 2.5, 10.0], jnp.float32)
    x = np.array([-5.0, 0.5, 3.0, np.nan, 12.0, -np.inf], np.float32)
    return (lambda v: jnp.digitize(v, bounds)), (jnp.asarray(x),)
