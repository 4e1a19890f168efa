"""Divergences planted inside loops and branches, written the way models and samplers write them.

Each culprit line carries a `# planted: <what>` comment; tests find its number from the comment.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def _normal(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def make_scan_fma():
    """An RNN-style update under lax.scan: jit contracts h*x0 - x1*x2 into a fused multiply-add."""

    def rnn(h0, xs):
        def step(h, x):
            h = jnp.tanh(h * x[0] - x[1] * x[2]) + 0.5 * h  # planted: scan fma
            return h, h

        return lax.scan(step, h0, xs)  # planted: scan loop

    return rnn, (_normal((64,)), _normal((16, 3, 64), seed=1))


def make_clean_scan():
    """Adds and a tanh in a scan: nothing to contract, eager and jit agree bit for bit."""

    def cumulative(h0, xs):
        def step(h, x):
            h = jnp.tanh(h + x)
            return h, h

        return lax.scan(step, h0, xs)

    return cumulative, (_normal((64,)), _normal((16, 64), seed=1))


class _Block(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        h = nn.Dense(32, dtype=jnp.bfloat16, param_dtype=jnp.float32, name="mlp")(x)
        y = x + h  # planted: nn.scan excess precision
        # post-LayerNorm on the bf16 residual: the sum is widened to f32 inside the same iteration
        y32 = y.astype(jnp.float32)  # planted: nn.scan widening
        mean = jnp.mean(y32, -1, keepdims=True)
        y = ((y32 - mean) * lax.rsqrt(jnp.mean((y32 - mean) ** 2, -1, keepdims=True) + 1e-6)).astype(jnp.bfloat16)
        return y, None


class _Stack(nn.Module):
    layers: int = 8

    @nn.compact
    def __call__(self, x):
        Scanned = nn.scan(_Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=self.layers)
        x, _ = Scanned(name="layers")(x.astype(jnp.bfloat16), None)  # planted: nn.scan loop
        return x.astype(jnp.float32)


FIRST_ACTIVE_LAYER = 3


def make_nn_scan_bf16():
    """A bf16 stack of 8 blocks applied with nn.scan; the first 3 blocks' Dense kernels are zero
    (the residual passes through exactly), so jit departs from eager first at iteration 3."""
    model = _Stack()
    x = _normal((4, 32), seed=2)
    params = model.init(jax.random.key(0), x)
    kernel = params["params"]["layers"]["mlp"]["kernel"]
    kernel = kernel.at[:FIRST_ACTIVE_LAYER].set(0.0)
    params["params"]["layers"]["mlp"]["kernel"] = kernel
    params["params"]["layers"]["mlp"]["bias"] = jnp.zeros_like(params["params"]["layers"]["mlp"]["bias"])
    return (lambda p, x: model.apply(p, x)), (params, x)


def make_while_fma():
    """A while loop whose trip count is data (an argument): the update contracts into an FMA."""

    def iterate(x, a, b, n):
        def body(state):
            i, x = state
            return i + 1, x * a - b * x * x  # planted: while fma

        return lax.while_loop(lambda s: s[0] < n, body, (jnp.int32(0), x))[1]  # planted: while loop

    return iterate, (_normal((64,)) * 0.1, _normal((64,), seed=1), _normal((64,), seed=2) * 0.1, jnp.int32(9))


def make_cond_in_scan():
    """lax.cond inside a scan: odd steps take the branch with a multiply-subtract."""

    def stepper(h0, xs):
        def step(h, tx):
            t, x = tx
            h = lax.cond(t % 2 == 1,  # planted: cond
                         lambda h: h * x[0] - x[1] * x[2],  # planted: cond fma
                         lambda h: h + x[0],
                         h)
            return jnp.tanh(h), None

        return lax.scan(step, h0, (jnp.arange(xs.shape[0]), xs))[0]

    return stepper, (_normal((64,)), _normal((8, 3, 64), seed=1))


def make_remat_scan():
    """A checkpointed (remat) body inside a scan, as memory-saving stacks write it."""

    @jax.checkpoint
    def cell(h, x):
        return jnp.tanh(h * x[0] - x[1] * x[2])  # planted: remat fma

    def run(h0, xs):
        return lax.scan(lambda h, x: (cell(h, x), None), h0, xs)[0]

    return run, (_normal((64,)), _normal((12, 3, 64), seed=1))


def make_nested_scan():
    """A scan inside a scan (a sampler's steps inside its epochs)."""

    def outer(h0, xs):
        def epoch(h, x_epoch):
            def inner(h, x):
                return jnp.tanh(h * x[0] - x[1] * x[2]), None  # planted: nested fma

            return lax.scan(inner, h, x_epoch)[0], None

        return lax.scan(epoch, h0, xs)[0]

    return outer, (_normal((64,)), _normal((3, 4, 3, 64), seed=1))


def make_nnx_scan():
    """Six Flax NNX blocks applied with nnx.scan over their stacked parameters."""
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.lin = nnx.Linear(16, 16, rngs=rngs)

        def __call__(self, x):
            return jnp.tanh(self.lin(x) * x - x * 0.3)  # planted: nnx fma

    @nnx.split_rngs(splits=6)
    @nnx.vmap(in_axes=(0,), out_axes=0)
    def make_blocks(rngs):
        return Block(rngs)

    graphdef, state = nnx.split(make_blocks(nnx.Rngs(0)))

    def apply(state, x):
        blocks = nnx.merge(graphdef, state)

        @nnx.scan(in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
        def step(block, x):
            return block(x)

        return step(blocks, x)  # planted: nnx scan

    return apply, (state, _normal((4, 16), seed=3))


def make_sampler():
    """A sampler's fori_loop carrying a PRNG key: noise drawn each step, an update that contracts."""

    def sample(x, key, w):
        def body(i, state):
            x, key = state
            key, sub = jax.random.split(key)
            noise = jax.random.normal(sub, x.shape)
            return x * w - 0.1 * noise * x, key  # planted: sampler fma

        return lax.fori_loop(0, 8, body, (x, key))[0]  # planted: sampler loop

    return sample, (_normal((64,)), jax.random.key(0), _normal((64,), seed=1))
