"""The seed report's layer (shared/seeds/000): a bf16 grouped 1x1 conv plus a residual, with the
report's kernel and input. Imported by the interpreter and fingerprint tests."""

import jax.numpy as jnp
from flax import linen as nn


class Foo(nn.Module):
    dtype: object = jnp.float32

    @nn.compact
    def __call__(self, h):
        y = nn.Conv(2, kernel_size=(1,), strides=1, padding=0, feature_group_count=2,
                    use_bias=False, dtype=self.dtype)(h)
        return y + h


LAYER = Foo(dtype=jnp.bfloat16)
VARS = {"params": {"Conv_0": {"kernel": jnp.asarray([[[0.25436434, 0.8453059]]])}}}
X = jnp.asarray([-1.0932410, -1.2380177], jnp.float32).reshape(1, 1, 2)
