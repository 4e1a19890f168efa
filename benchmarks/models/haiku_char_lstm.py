"""The character-LSTM sampler of Haiku's examples/rnn/train.py (random weights, a small vocabulary):
hk.dynamic_unroll over a context, then a lax.fori_loop drawing one character a step with
jax.random.categorical, through `from_haiku`.

    jaxparity explain benchmarks/models/haiku_char_lstm.py --paths eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree
"""

import haiku as hk
import jax
import jax.numpy as jnp

from jaxparity.cases import from_haiku

NUM_CHARS, HIDDEN = 64, 32


def make_network() -> hk.RNNCore:
    return hk.DeepRNN([lambda x: hk.one_hot(x, NUM_CHARS), hk.LSTM(HIDDEN), jax.nn.relu, hk.LSTM(HIDDEN),
                       hk.nets.MLP([HIDDEN, NUM_CHARS])])


def sample(rng_key, context, sample_length):
    core = make_network()

    def body(t, values):
        tokens, state, key = values
        logits, state = core(tokens[t], state)
        key, subkey = jax.random.split(key)
        return tokens.at[t + 1].set(jax.random.categorical(subkey, logits)), state, key

    logits, state = hk.dynamic_unroll(core, context, core.initial_state(None))
    key, subkey = jax.random.split(rng_key)
    tokens = jnp.zeros(sample_length, jnp.int32).at[0].set(jax.random.categorical(subkey, logits[-1]))
    return jax.lax.fori_loop(0, sample_length - 1, body, (tokens, state, key))[0]


def make():
    sampler = hk.transform(sample)
    context = jax.random.randint(jax.random.key(1), (16,), 0, NUM_CHARS)
    params = sampler.init(jax.random.key(0), jax.random.key(2), context, 8)
    return from_haiku(sampler, params, jax.random.key(2), context, sample_length=8)
