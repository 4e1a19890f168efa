"""A converter that loses a parameter of a primitive: jax2onnx writes lax.round, whose default rounds halves away
from zero, as ONNX's Round (halves to even). ``mechanism.ablation`` must name the parameter, not only the op."""

import numpy as np
from jax import lax


def doubled_round(x):
    return lax.round(x) * 2.0  # planted: rounding_method lost by the converter


def make_round():
    return doubled_round, (np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.3, 1.7, 3.5], np.float32),)
