"""Programs whose mechanism no cause of the table names, from the kinds of code in public bug reports: the
fix search (explain/search/) finds the change at the user's line that makes the runtimes agree, and the
layer at fault comes from two executions of one converted model (issue 37). Inputs push each program to
the edge of its domain."""

import jax
import jax.numpy as jnp
import numpy as np


def make_focal_loss():
    """Sigmoid focal loss from logits: jax2onnx converts jax.nn.log_sigmoid whole (Log of Sigmoid), which
    gives inf at logits of ±30 and beyond; JAX's own primitives give the finite loss."""

    def fn(logits, labels):
        ce = -(labels * jax.nn.log_sigmoid(logits) + (1 - labels) * jax.nn.log_sigmoid(-logits))
        return ce * 0.25

    logits = np.array([100.0, -100.0, 30.0, -30.0, 0.0, 17.0, -2.0, 5.0], np.float32)
    labels = np.array([0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0], np.float32)
    return fn, (logits, labels)


def make_one_hot_ignore_label():
    """Label smoothing over one-hot targets with an ignore label of -1: JAX gives a row of zeros, ONNX's
    OneHot wraps -1 to the last class."""

    def fn(labels):
        return jax.nn.one_hot(labels, 5) * 0.9 + 0.02

    return fn, (np.array([0, 4, -1, 5, 2, 7], np.int32),)


def make_small_probabilities():
    """Probabilities of rare events: ONNX Runtime's Sigmoid is accurate in absolute terms only, 0 where the
    probability is below float32's unit roundoff."""

    def fn(x):
        return jax.nn.sigmoid(x) * 2.0

    return fn, (np.array([-100.0, -20.0, -5.0, 0.0, 5.0, 20.0, 100.0, -90.0], np.float32),)


def make_bf16_scaled_sum():
    """A bf16 feature scaled and summed per row."""

    def fn(x):
        return jnp.sum(x.astype(jnp.bfloat16) * 3, axis=-1)

    return fn, (np.linspace(0.1, 9.7, 64, dtype=np.float32).reshape(4, 16),)


def make_subnormal_mask():
    """A float attention mask cast to bool: XLA on the CPU reads the subnormal 1e-40 as zero (False), IEEE
    and the other runtimes as True."""

    def fn(scores, mask):
        return jnp.where(mask.astype(bool), scores, -1e9)

    scores = np.linspace(-1, 1, 8, dtype=np.float32)
    mask = np.array([1.0, 0.0, -0.0, 1.0, 0.5, 1e-40, -1.0, 1.0], np.float32)
    return fn, (jnp.asarray(scores), jnp.asarray(mask))  # JAX arrays: eager's astype is then JAX's, not numpy's


def make_topk_nan():
    """Top-k retrieval scores with a failed (NaN) score: lax.top_k ranks NaN first; TFLite's TopKV2 never
    picks it. Equal scores are present too, but come out in the same order everywhere."""

    def fn(scores):
        return jax.lax.top_k(scores, 3)

    s = np.array([[0.5, np.nan, 0.9, 0.9, 0.1, 0.3], [1.0, 0.2, 0.2, 0.7, 0.4, 0.0]], np.float32)
    return fn, (jnp.asarray(s),)


def make_log1p_rates():
    """log1p of tiny rates: TFLite's converter writes log1p as ADD then LOG, which loses them."""

    def fn(x):
        return jnp.log1p(x)

    return fn, (jnp.asarray(np.array([1e-10, 1e-7, 3e-5, -1e-9, 0.5, 10.0, 0.0], np.float32)),)
