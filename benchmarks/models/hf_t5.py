"""A tiny Hugging Face FlaxT5ForConditionalGeneration in bfloat16 (random weights, 2+2 layers, d_model 64, vocab
256), fed encoder ids with padding and decoder ids, through `from_hf`: the T5 of issues 54 and 55.

    jaxparity explain benchmarks/models/hf_t5.py --paths eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree
"""

import jax.numpy as jnp
import numpy as np
from transformers import FlaxT5ForConditionalGeneration, T5Config

from jaxparity.cases import from_hf


def make():
    config = T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
                      decoder_start_token_id=0)
    model = FlaxT5ForConditionalGeneration(config, seed=0, dtype=jnp.bfloat16)
    rng = np.random.default_rng(1)
    ids = rng.integers(1, 256, (2, 12)).astype(np.int32)
    mask = np.ones((2, 12), np.int32)
    mask[1, 9:] = 0  # the second sequence is padded
    decoder = rng.integers(1, 256, (2, 6)).astype(np.int32)
    return from_hf(model, input_ids=ids, attention_mask=mask, decoder_input_ids=decoder)
