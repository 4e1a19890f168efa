"""A tiny Hugging Face FlaxGPT2LMHeadModel in bfloat16 (random weights, 2 layers, n_embd 64, vocab 256),
fed token ids, an int32 attention mask with padding and the position ids, through `from_hf`.

    jaxparity explain benchmarks/models/hf_gpt2.py --paths eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree
"""

import jax.numpy as jnp
import numpy as np
from transformers import FlaxGPT2LMHeadModel, GPT2Config

from jaxparity.cases import from_hf


def make():
    config = GPT2Config(vocab_size=256, n_positions=32, n_embd=64, n_layer=2, n_head=4)
    model = FlaxGPT2LMHeadModel(config, seed=0, dtype=jnp.bfloat16)
    ids = np.random.default_rng(1).integers(0, 256, (2, 16)).astype(np.int32)
    mask = np.ones((2, 16), np.int32)
    mask[1, 12:] = 0  # the second sequence is padded
    positions = np.broadcast_to(np.arange(16, dtype=np.int32), (2, 16))
    return from_hf(model, input_ids=ids, attention_mask=mask, position_ids=positions)
