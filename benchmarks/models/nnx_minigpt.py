"""Flax NNX miniGPT (flax docs_nnx/examples/minigpt.md) in bfloat16 compute, float32 params.

Module code: google/flax docs_nnx/examples/minigpt.md (TransformerBlock, TokenAndPositionEmbedding,
MiniGPT). Changes: sharding metadata / reshard removed (single device); dtype=bfloat16 and
param_dtype=float32 added to every layer; the causal mask is passed as `mask=` (flax 0.12.6's
MultiHeadAttention.__call__ has no `is_causal`), built as in the tutorial's earlier version
(jnp.tril(jnp.ones((seq_len, seq_len)))). Small sizes, random weights with a fixed seed, through `from_nnx`.
Tried as a new user would on 2026-12-06 (what it exercises: benchmarks/models/README.md).

    jaxparity explain benchmarks/models/nnx_minigpt.py --paths eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree
"""

import jax
import jax.numpy as jnp
from flax import nnx

from jaxparity.cases import from_nnx

DT = jnp.bfloat16
PT = jnp.float32


class TransformerBlock(nnx.Module):
    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, *, rngs: nnx.Rngs, rate: float = 0.1):
        self.mha = nnx.MultiHeadAttention(num_heads=num_heads, in_features=embed_dim,
                                          dtype=DT, param_dtype=PT, rngs=rngs)
        self.dropout1 = nnx.Dropout(rate=rate, rngs=rngs)
        self.layer_norm1 = nnx.LayerNorm(epsilon=1e-6, num_features=embed_dim,
                                         dtype=DT, param_dtype=PT, rngs=rngs)
        self.mlp = nnx.Sequential(
            nnx.Linear(in_features=embed_dim, out_features=ff_dim, dtype=DT, param_dtype=PT, rngs=rngs),
            nnx.relu,
            nnx.Linear(in_features=ff_dim, out_features=embed_dim, dtype=DT, param_dtype=PT, rngs=rngs),
            nnx.Dropout(rate=rate, rngs=rngs))
        self.layer_norm2 = nnx.LayerNorm(epsilon=1e-6, num_features=embed_dim,
                                         dtype=DT, param_dtype=PT, rngs=rngs)

    def __call__(self, inputs):
        seq_len = inputs.shape[1]
        mask = jnp.tril(jnp.ones((seq_len, seq_len)))
        attention_output = self.mha(inputs_q=inputs, mask=mask, decode=False)
        attention_output = self.dropout1(attention_output)
        out1 = self.layer_norm1(inputs + attention_output)
        ffn_output = self.mlp(out1)
        return self.layer_norm2(out1 + ffn_output)


class TokenAndPositionEmbedding(nnx.Module):
    def __init__(self, maxlen: int, vocab_size: int, embed_dim: int, *, rngs: nnx.Rngs):
        self.token_emb = nnx.Embed(num_embeddings=vocab_size, features=embed_dim,
                                   dtype=DT, param_dtype=PT, rngs=rngs)
        self.pos_emb = nnx.Embed(num_embeddings=maxlen, features=embed_dim,
                                 dtype=DT, param_dtype=PT, rngs=rngs)

    def __call__(self, x):
        positions = jnp.arange(0, x.shape[1])[None, :]
        position_embedding = self.pos_emb(positions)
        token_embedding = self.token_emb(x)
        return token_embedding + position_embedding


class MiniGPT(nnx.Module):
    def __init__(self, maxlen, vocab_size, embed_dim, num_heads, feed_forward_dim, num_transformer_blocks,
                 rngs: nnx.Rngs):
        self.embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim, rngs=rngs)
        self.transformer_blocks = nnx.Sequential(*[TransformerBlock(
            embed_dim, num_heads, feed_forward_dim, rngs=rngs) for _ in range(num_transformer_blocks)])
        self.output_layer = nnx.Linear(in_features=embed_dim, out_features=vocab_size,
                                       dtype=DT, param_dtype=PT, rngs=rngs)

    def __call__(self, inputs):
        x = self.embedding_layer(inputs)
        x = self.transformer_blocks(x)
        return self.output_layer(x)


def make():
    model = MiniGPT(maxlen=16, vocab_size=64, embed_dim=32, num_heads=4, feed_forward_dim=64,
                    num_transformer_blocks=2, rngs=nnx.Rngs(0))
    tokens = jax.random.randint(jax.random.key(1), (2, 16), 0, 64, dtype=jnp.int32)
    return from_nnx(model, tokens)
