"""A bf16 ResNet (inference-mode BatchNorm, 3x3 convs, identity shortcuts) deep enough to have
over 1,500 jaxpr equations: where savedmodel and jit part ways in a real-sized network."""

import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x):
        conv = lambda: nn.Conv(self.channels, (3, 3), use_bias=False, dtype=jnp.bfloat16,  # noqa: E731
                               param_dtype=jnp.float32)
        norm = lambda: nn.BatchNorm(use_running_average=True, dtype=jnp.bfloat16,  # noqa: E731
                                    param_dtype=jnp.float32)
        h = nn.relu(norm()(conv()(x)))
        h = norm()(conv()(h))
        return nn.relu(x + h)


class ResNet(nn.Module):
    stages: tuple[int, ...] = (16, 16, 16)
    width: int = 16
    classes: int = 10

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(self.width, (3, 3), dtype=jnp.bfloat16, param_dtype=jnp.float32)(x)
        for i, blocks in enumerate(self.stages):
            channels = self.width * 2**i
            if i:
                x = nn.Conv(channels, (1, 1), strides=(2, 2), dtype=jnp.bfloat16, param_dtype=jnp.float32)(x)
            for _ in range(blocks):
                x = Block(channels)(x)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.classes, dtype=jnp.bfloat16, param_dtype=jnp.float32)(x).astype(jnp.float32)


def make():
    """ResNet-98-like (3 stages of 16 blocks) on one 16x16 RGB image."""
    model = ResNet()
    x = jax.random.normal(jax.random.key(1), (1, 16, 16, 3))
    variables = model.init(jax.random.key(0), x)
    return model.apply, (variables, x)
