"""An exact program miscompiled: int8 squares that wrap, made non-negative with where/abs. Eager computes the
program's values; XLA's algebraic simplifier, taking a square for non-negative, drops the select under jit
(tensorflow/tensorflow#120233 in JAX). Integer arithmetic has one right answer: this is wrong code, and the pass
is what sets it off."""

import jax.numpy as jnp
import numpy as np


def magnitude(b):
    p = b * b  # wraps in int8
    return jnp.where(p < 0, jnp.abs(p), p)  # planted: the select algsimp drops


def make_int8_square():
    return magnitude, (np.array([12, 7, 20, 15, 11, -13, 3, 9], np.int8),)
