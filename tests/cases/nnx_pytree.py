"""An NNX module passed as an argument, a dict of inputs, a NamedTuple of outputs: any pytree in and out."""

import jax, jax.numpy as jnp, numpy as np
from flax import nnx
from typing import NamedTuple

class MLP(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(4, 8, rngs=rngs)
        self.l2 = nnx.Linear(8, 2, rngs=rngs)
    def __call__(self, x):
        return self.l2(jax.nn.relu(self.l1(x)))

class Out(NamedTuple):
    y: jax.Array
    extra: dict

def fn(model, x):
    y = model(x["a"])
    return Out(y, {"norm": jnp.sum(y * y), "b": x["b"] * 2})

def make():
    model = MLP(nnx.Rngs(0))
    x = {"a": jax.random.normal(jax.random.key(1), (3, 4)), "b": jnp.arange(3, dtype=jnp.int32)}
    return fn, (model, x)
