"""A 1-billion-parameter bf16 transformer (20 pre-LN blocks, width 2048, MLP 8192, bf16 parameters)
on one short sequence: the model that `explain` must localize within 24 GB (issue 13, memory).

Parameters are drawn directly in bf16 with numpy (Flax's init would build them in float32 first and
take minutes on two cores); the layer structure is Flax's, written as `PreLNBlock` applies it.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

WIDTH, MLP, HEADS, LAYERS, TOKENS = 2048, 8192, 16, 20, 8


class PreLNBlock(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(x)
        h = nn.MultiHeadDotProductAttention(num_heads=HEADS, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16,
                                            deterministic=True)(h, h)
        x = x + h
        h = nn.LayerNorm(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(x)
        h = nn.gelu(nn.Dense(MLP, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(h))
        return x + nn.Dense(WIDTH, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(h)


class Transformer1B(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(LAYERS):
            x = PreLNBlock()(x)
        return nn.LayerNorm(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(x)


def make():
    """The 1B model on a (1, 8, 2048) bf16 input; parameters drawn N(0, 1/fan_in) in bf16."""
    model = Transformer1B()
    x = jnp.zeros((1, TOKENS, WIDTH), jnp.bfloat16)
    shapes = jax.eval_shape(model.init, jax.random.key(0), x)
    rng = np.random.default_rng(0)

    def draw(path, s):
        name = str(path[-1])
        if "scale" in name:
            return jnp.ones(s.shape, s.dtype)
        if "bias" in name:
            return jnp.zeros(s.shape, s.dtype)
        fan_in = int(np.prod(s.shape[:-1])) if len(s.shape) > 1 else 1
        w = rng.standard_normal(s.shape, dtype=np.float32) * np.float32(fan_in ** -0.5)
        return jnp.asarray(w.astype(jnp.bfloat16))

    variables = jax.tree_util.tree_map_with_path(draw, shapes)
    x = jnp.asarray(rng.standard_normal((1, TOKENS, WIDTH), dtype=np.float32).astype(jnp.bfloat16))
    return model.apply, (variables, x)


def parameters(variables) -> int:
    return sum(int(np.prod(v.shape)) for v in jax.tree_util.tree_leaves(variables))
