"""A Flax NNX MLP with BatchNorm and Dropout, computing in bfloat16, through `from_nnx`.

    jaxparity compare examples/nnx_mlp.py --paths eager,jit

`from_nnx` splits a copy of the model in eval mode: its state is one input by attribute path
(arg0/hidden/kernel, arg0/norm/var), its graph and random-number state are bound in.
"""

import jax
from flax import nnx

from jaxparity.cases import from_nnx


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(32, 64, dtype="bfloat16", rngs=rngs)
        self.norm = nnx.BatchNorm(64, dtype="bfloat16", rngs=rngs)
        self.dropout = nnx.Dropout(0.2, rngs=rngs)
        self.out = nnx.Linear(64, 10, dtype="bfloat16", rngs=rngs)

    def __call__(self, x):
        return self.out(self.dropout(nnx.gelu(self.norm(self.hidden(x)))))


def make():
    return from_nnx(MLP(nnx.Rngs(0)), jax.random.normal(jax.random.key(1), (4, 32)))
