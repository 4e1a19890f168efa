"""A tiny user model: softmax computed in bfloat16.

Under ``jax.jit`` XLA may keep the bf16 intermediates (the exp) in f32 ("excess precision"), so the
compiled function differs from op-by-op eager execution by up to 1 ULP of bf16.
"""

import jax
import jax.numpy as jnp
import numpy as np


def softmax_bf16(x):
    return jax.nn.softmax(x.astype(jnp.bfloat16), axis=-1)


def example_input():
    return jnp.asarray(np.random.default_rng(0).standard_normal((10, 100)).astype(np.float32))
