"""A Flax linen CNN with BatchNorm and Dropout, computing in bfloat16, through `from_flax`.

    jaxparity compare examples/flax_linen_cnn.py --paths eager,jit

The module's `train` argument is set to False for it (no dropout, running statistics read); the variables
are one input, named by collection and module (arg0/params/Conv_0/kernel, arg0/batch_stats/BatchNorm_0/var).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxparity.cases import from_flax


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = True):
        for features in (8, 16):
            x = nn.Conv(features, (3, 3), dtype=jnp.bfloat16)(x)
            x = nn.BatchNorm(use_running_average=not train, dtype=jnp.bfloat16)(x)
            x = nn.max_pool(nn.relu(x), (2, 2), strides=(2, 2))
        x = nn.Dropout(0.5, deterministic=not train)(x.reshape(x.shape[0], -1))
        return nn.Dense(10, dtype=jnp.bfloat16)(x)


def make():
    images = jax.random.normal(jax.random.key(1), (2, 16, 16, 3))
    variables = CNN().init(jax.random.key(0), images, train=False)
    return from_flax(CNN(), variables, images)
