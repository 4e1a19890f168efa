"""A math function whose kernel one runtime approximates its own way: ONNX Runtime's Sigmoid is accurate in
absolute terms only (its relative error grows as the result shrinks, for negative inputs); TFLite's is within a
few ULP, as eager's is. ``mechanism.profile`` must say which, and where."""

import jax
import numpy as np


def sigmoid_scaled(x):
    return jax.nn.sigmoid(x) * 2.0  # planted: a kernel accurate in absolute terms only (onnx)


def make_sigmoid():
    return sigmoid_scaled, (np.linspace(-30, 5, 64).astype(np.float32),)


def log_sigmoid_dot(x, w):
    return jax.numpy.log(jax.nn.sigmoid(x)) @ w  # planted: ORT's sigmoid gives 0 below -17, its log -inf


def make_log_sigmoid_dot():
    r = np.random.default_rng(3)
    return log_sigmoid_dot, (r.normal(-8, 6, (16, 512)).astype(np.float32), r.normal(0, 1, (512, 8)).astype(np.float32))


def cube_root(x):
    return jax.lax.cbrt(x) + 0.0  # planted: NaN for negative inputs on tflite


def make_cbrt():
    return cube_root, (np.linspace(-8, 8, 33).astype(np.float32),)


def make_lgamma():
    """jax.scipy.special.gammaln at its zeros, near them, at negative non-integers and large x (from the public
    corpus): TFLite has no lgamma kernel, and the TFLite converter writes it as a composition of dozens of others."""
    from jax.scipy import special

    def fn(x):
        return special.gammaln(x)

    return fn, (np.array([1.0, 2.0, 1.0000001, 0.99999994, -0.5, -2.5, 0.5, 3.7, 7.25, 1e4], np.float32),)
