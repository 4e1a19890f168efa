"""Small mixed-precision CNN: two bf16 3x3 convs with relu and pooling, then a Dense head.

Convolutions sum many bf16 products per output, so accumulation order and
precision differ between XLA and TF kernels; max/avg pooling and the flatten
into a bf16 Dense carry those differences through to the logits.
"""

import jax
import jax.numpy as jnp
import flax.linen as nn


class TinyConvNet(nn.Module):
    num_classes: int = 10
    dtype: jnp.dtype = jnp.bfloat16

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(8, kernel_size=(3, 3), dtype=self.dtype, param_dtype=jnp.float32)(x)
        x = nn.relu(x)
        x = nn.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = nn.Conv(16, kernel_size=(3, 3), dtype=self.dtype, param_dtype=jnp.float32)(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=jnp.float32)(x)


def make():
    model = TinyConvNet()
    x = jax.random.normal(jax.random.key(1), (2, 16, 16, 3))
    variables = model.init(jax.random.key(0), x)
    return model.apply, (variables, x)
