"""A data-parallel model whose batch mean is a sum over the sharded dimension: on a mesh each device
sums its shard and an all-reduce adds the partial sums (issue 13: sharded paths)."""

import flax.linen as nn
import jax
import jax.numpy as jnp


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Dense(256)(x)
        return jnp.mean(jnp.tanh(h) ** 2, axis=0)  # planted: batch mean


def make():
    model = MLP()
    x = jax.random.normal(jax.random.key(0), (64, 512))
    return model.apply, (model.init(jax.random.key(1), x), x)
