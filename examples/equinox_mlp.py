"""An Equinox MLP in bfloat16, written for one example and mapped over a batch, through `from_equinox`.

    jaxparity compare examples/equinox_mlp.py --paths eager,jit

`from_equinox` partitions the module: its floating-point arrays are one input by attribute path
(arg0/layers/0/weight), its activation functions are bound in.
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxparity.cases import from_equinox


def make():
    mlp = eqx.nn.MLP(32, 10, width_size=64, depth=2, activation=jax.nn.gelu, key=jax.random.key(0))
    mlp = jax.tree.map(lambda x: x.astype(jnp.bfloat16) if eqx.is_inexact_array(x) else x, mlp)
    x = jax.random.normal(jax.random.key(1), (4, 32), jnp.bfloat16)
    return from_equinox(mlp, x, vmap=True)
