"""Small mixed-precision MLP: float32 parameters, bfloat16 compute (16 -> 64 -> 64 -> 8).

Every Dense casts its f32 weights and inputs to bf16 before the matmul, so
results depend on how each path accumulates bf16 dot products and where it
rounds between layers; gelu's tanh approximation adds transcendental error.
"""

import jax
import jax.numpy as jnp
import flax.linen as nn


class MixedPrecisionMLP(nn.Module):
    hidden: tuple = (64, 64)
    out_features: int = 8
    dtype: jnp.dtype = jnp.bfloat16

    @nn.compact
    def __call__(self, x):
        for width in self.hidden:
            x = nn.Dense(width, dtype=self.dtype, param_dtype=jnp.float32)(x)
            x = nn.gelu(x)
        return nn.Dense(self.out_features, dtype=self.dtype, param_dtype=jnp.float32)(x)


def make():
    model = MixedPrecisionMLP()
    x = jax.random.normal(jax.random.key(1), (4, 16))
    variables = model.init(jax.random.key(0), x)
    return model.apply, (variables, x)
