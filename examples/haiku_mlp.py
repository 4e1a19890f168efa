"""A Haiku MLP with BatchNorm (hk.transform_with_state), computing in bfloat16, through `from_haiku`.
Needs dm-haiku (`pip install dm-haiku`).

    jaxparity compare examples/haiku_mlp.py --paths eager,jit

Haiku's function takes its flag as written (is_training=False here); params and state are one input,
named as Haiku names its modules (arg0/params/linear/w, arg0/state/batch_norm/~/var_ema/average).
"""

import haiku as hk
import jax
import jax.numpy as jnp

from jaxparity.cases import from_haiku


def forward(x, is_training):
    x = hk.Linear(64)(x.astype(jnp.bfloat16))
    x = hk.BatchNorm(create_scale=True, create_offset=True, decay_rate=0.9)(x, is_training)
    return hk.Linear(10)(jax.nn.gelu(x))


def make():
    x = jax.random.normal(jax.random.key(1), (4, 32))
    model = hk.transform_with_state(forward)
    params, state = model.init(jax.random.key(0), x, is_training=True)
    params = jax.tree.map(lambda p: p.astype(jnp.bfloat16), params)
    return from_haiku(model, params, x, state=state, is_training=False)
