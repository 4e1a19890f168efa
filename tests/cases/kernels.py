"""A math function whose kernel one runtime approximates its own way: ONNX Runtime's Sigmoid is accurate in
absolute terms only (its relative error grows as the result shrinks, for negative inputs); TFLite's is within a
few ULP, as eager's is. ``mechanism.profile`` must say which, and where."""

import jax
import numpy as np


def sigmoid_scaled(x):
    return jax.nn.sigmoid(x) * 2.0  # planted: a kernel accurate in absolute terms only (onnx)


def make_sigmoid():
    return sigmoid_scaled, (np.linspace(-30, 5, 64).astype(np.float32),)
