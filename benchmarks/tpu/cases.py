"""float32 models whose TPU outputs differ from the CPU's (issue 38): an attention block and an MLP in plain
JAX, inputs drawn with numpy (the same on every device)."""

import jax
import jax.numpy as jnp
import numpy as np


def _rng(seed):
    return np.random.default_rng(seed)


def attention(params, x):
    q, k, v = (x @ params[n] for n in ("wq", "wk", "wv"))
    scores = q @ k.T / np.float32(np.sqrt(q.shape[-1]))
    return jax.nn.softmax(scores, axis=-1) @ v @ params["wo"]


def make_attention():
    r = _rng(0)
    params = {n: (r.normal(size=(64, 64)) / 8).astype(np.float32) for n in ("wq", "wk", "wv", "wo")}
    return attention, (params, r.normal(size=(32, 64)).astype(np.float32))


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jax.nn.gelu(h @ params["w2"]) @ params["w3"]


def make_mlp():
    r = _rng(1)
    params = {"w1": (r.normal(size=(128, 256)) / 11).astype(np.float32), "b1": r.normal(size=256).astype(np.float32),
              "w2": (r.normal(size=(256, 256)) / 16).astype(np.float32),
              "w3": (r.normal(size=(256, 8)) / 16).astype(np.float32)}
    return mlp, (params, r.normal(size=(16, 128)).astype(np.float32))


def make_tanh():
    """One elementwise op: the device's own tanh against the host's."""
    return jnp.tanh, (np.linspace(-6, 6, 4001, dtype=np.float32),)
