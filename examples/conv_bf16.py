"""bf16 grouped 1-D convolution plus residual, from a user's jax2tf bug report.

The user saw different numbers from a jax2tf SavedModel (TF Serving) than from
JAX eager. With bf16 compute, where the conv result is rounded to bf16 and how
the f32 residual is added decides the last bits, so export paths can diverge.
"""

import jax
import jax.numpy as jnp
import flax.linen as nn


class GroupedConvResidual(nn.Module):
    """A depthwise (feature_group_count=2) width-1 conv whose output is added to its input."""

    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, h):
        skip = h
        out = nn.Conv(
            features=2,
            kernel_size=(1,),
            strides=1,
            padding=0,
            feature_group_count=2,
            use_bias=False,
            dtype=self.dtype,
        )(h)
        return out + skip


def _variables():
    # Exact kernel from the report: shape (width=1, in_per_group=1, out=2), float32.
    kernel = jnp.asarray([[[0.25436434, 0.8453059]]], dtype=jnp.float32)
    return {"params": {"Conv_0": {"kernel": kernel}}}


def make():
    """The report's model with x drawn from key(1729) by the current JAX."""
    model = GroupedConvResidual(dtype=jnp.bfloat16)
    x = jax.random.normal(jax.random.key(1729), (2,)).reshape(1, 1, -1)
    return model.apply, (_variables(), x)


def make_report_input():
    """The report's model with the exact x printed in the report (older JAX's key(1729) draw)."""
    model = GroupedConvResidual(dtype=jnp.bfloat16)
    x = jnp.asarray([-1.0932410, -1.2380177], dtype=jnp.float32).reshape(1, 1, 2)
    return model.apply, (_variables(), x)
