"""A tiny Hugging Face Flax BERT (random weights, 2 layers) through `from_hf`. Needs transformers 4.x
(Flax models left transformers in 5.0): `pip install "transformers<5"`.

    jaxparity compare examples/hf_bert.py --paths eager,jit

The params are one input by module path (arg0/encoder/layer/0/attention/self/query/kernel), the token ids
and mask another (arg1/input_ids, arg1/attention_mask); the model runs with train=False.
"""

import jax
import jax.numpy as jnp
from transformers import BertConfig, FlaxBertModel

from jaxparity.cases import from_hf


def make():
    config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32)
    model = FlaxBertModel(config, seed=0, dtype=jnp.bfloat16)
    ids = jax.random.randint(jax.random.key(1), (2, 16), 0, 128)
    return from_hf(model, input_ids=ids, attention_mask=jnp.ones((2, 16), jnp.int32))
