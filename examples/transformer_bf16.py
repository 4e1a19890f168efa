"""Two stacked pre-LayerNorm transformer blocks, bf16 compute with float32 parameters.

Attention chains several precision-sensitive steps: bf16 LayerNorm statistics,
scaled Q.K^T, softmax (max-subtract, exp, normalize) and gelu, joined by
residual adds; a larger graph (100+ equations) where rounding differences compound.
"""

import jax
import jax.numpy as jnp
import flax.linen as nn


class PreLNBlock(nn.Module):
    num_heads: int = 4
    mlp_ratio: int = 4
    dtype: jnp.dtype = jnp.bfloat16

    @nn.compact
    def __call__(self, x):
        width = x.shape[-1]
        h = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32)(x)
        h = nn.MultiHeadDotProductAttention(
            num_heads=self.num_heads,
            dtype=self.dtype,
            param_dtype=jnp.float32,
            deterministic=True,
        )(h, h)
        x = x + h
        h = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32)(x)
        h = nn.Dense(self.mlp_ratio * width, dtype=self.dtype, param_dtype=jnp.float32)(h)
        h = nn.gelu(h)
        h = nn.Dense(width, dtype=self.dtype, param_dtype=jnp.float32)(h)
        return x + h


class TwoBlockEncoder(nn.Module):
    num_blocks: int = 2
    num_heads: int = 4
    dtype: jnp.dtype = jnp.bfloat16

    @nn.compact
    def __call__(self, x):
        for _ in range(self.num_blocks):
            x = PreLNBlock(num_heads=self.num_heads, dtype=self.dtype)(x)
        return nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32)(x)


def _build(model):
    x = jax.random.normal(jax.random.key(1), (2, 8, 32))
    variables = model.init(jax.random.key(0), x)
    return model.apply, (variables, x)


def make():
    """Two pre-LN blocks (self-attention + gelu MLP) and a final LayerNorm on a (2, 8, 32) input."""
    return _build(TwoBlockEncoder())


def make_deep():
    """Twelve pre-LN blocks: over 1,000 jaxpr equations, for localization at scale."""
    return _build(TwoBlockEncoder(num_blocks=12))


class _ScanBlock(nn.Module):
    """PreLNBlock in the (carry, x) -> (carry, y) form nn.scan applies."""

    num_heads: int = 4

    @nn.compact
    def __call__(self, x, _):
        return PreLNBlock(num_heads=self.num_heads)(x), None


class ScannedEncoder(nn.Module):
    """Blocks applied with nn.scan, as large models apply their layers: one loop, parameters stacked
    on a leading axis."""

    num_blocks: int = 24

    @nn.compact
    def __call__(self, x):
        layers = nn.scan(_ScanBlock, variable_axes={"params": 0}, split_rngs={"params": True},
                         length=self.num_blocks)
        x, _ = layers(name="layers")(x, None)
        return nn.LayerNorm(dtype=jnp.bfloat16, param_dtype=jnp.float32)(x)


def make_scanned():
    """Twenty-four pre-LN blocks applied with nn.scan (over 1,000 equations counting the body once
    per layer): localization inside the loop."""
    return _build(ScannedEncoder())
