"""Cases for blame (``localize.blame``): which local divergences carry the output difference.

Each culprit line carries a `# planted: <what>` comment; the tests find the line number from it.
"""

import jax
import jax.numpy as jnp
import numpy as np


def _normal(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def make_small_ahead_of_matmul():
    """A 1 ULP divide (jit: x * (1/3)) ahead of a bf16 matmul whose rounding jit elides: the matmul's
    own divergence carries the output difference, the divide's is erased by the bf16 cast."""

    def fn(a, b, w):
        t = a / 3.0 + b  # planted: blame small op
        y = jnp.dot(t.astype(jnp.bfloat16), w.astype(jnp.bfloat16)).astype(jnp.float32)  # planted: blame matmul
        return y * 2.0

    return fn, (_normal((16, 32)), _normal((16, 32), seed=1), _normal((32, 8), seed=2))


def _two_together(fn_for):
    """Scalar-ish inputs and a threshold where eager's x1/3 * x2/3 stays at or below it, jit's (both
    divides rewritten to x * (1/3), each 1 ULP off) goes above, and neither 1 ULP change alone does."""
    def parts(x1, x2):
        return x1 / 3.0, x2 / 3.0

    x1, x2 = np.random.default_rng(0).standard_normal((2, 4096)).astype(np.float32)
    e1, e2 = (np.asarray(v) for v in parts(x1, x2))
    j1, j2 = (np.asarray(v) for v in jax.jit(parts)(x1, x2))
    above = (e1 != j1) & (e2 != j2) & (j1 * j2 > np.maximum(np.maximum(e1 * e2, e1 * j2), j1 * e2))
    for i in np.flatnonzero(above)[:20]:
        a, b = x1[i:i + 1], x2[i:i + 1]
        thr = np.nextafter(j1[i] * j2[i], np.float32(-np.inf))
        fn = fn_for(thr)
        # the (1,)-shaped program must behave as the search assumed: both divides 1 ULP off, the
        # product of either one alone at or below the threshold, eager 0 and jit 1 at the output
        k1, k2 = (np.asarray(v) for v in jax.jit(parts)(a, b))
        if ((k1, k2) == (j1[i], j2[i]) and np.asarray(fn(a, b))[0] == 0.0
                and np.asarray(jax.jit(fn)(a, b))[0] == 1.0):
            return fn, (jnp.asarray(a), jnp.asarray(b))
    raise AssertionError("no inputs found where the two 1 ULP divides cross the threshold only together")


def make_only_together():
    """Two 1 ULP divides that flip a threshold only together. A sum t1 + t2 would not do: jit contracts
    x1 * (1/3) + x2 * (1/3) into an FMA, so the add diverges on its own; a product has no FMA."""

    def fn_for(thr):
        def fn(x1, x2):
            t1 = x1 / 3.0  # planted: together first
            t2 = x2 / 3.0  # planted: together second
            return jnp.where(t1 * t2 > thr, 1.0, 0.0)

        return fn

    return _two_together(fn_for)


def make_cancellation():
    """A one-pass variance of values with a large mean: jit's reduction differs from eager's by a few
    ULP, and the cancellation in mean(x²) − mean(x)² makes that a large output difference."""

    def fn(x):
        return jnp.mean(x * x, -1) - jnp.mean(x, -1) ** 2  # planted: one-pass variance

    return fn, (_normal((16, 4096)) + 1000.0,)


def make_fast_variance_layernorm():
    """flax's LayerNorm with use_fast_variance=True on activations whose mean is large against their
    spread: its one-pass variance turns the 1 ULP differences of two summation orders into a large
    output difference, on every runtime that sums in another order."""
    import flax.linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Dense(64)(x) * 0.1 + 500.0
            h = nn.LayerNorm(use_fast_variance=True)(h)  # planted: fast variance
            return nn.Dense(8)(h)

    model, x = Block(), _normal((8, 32))
    return model.apply, (model.init(jax.random.key(0), x), x)


def make_rounding_only():
    """A float32 MLP block (Dense, LayerNorm with a two-pass variance, tanh GELU, Dense): another runtime
    sums in other orders and computes tanh and rsqrt with its own math library; every divergence is
    rounding, and the difference is the size of the model's own rounding noise."""
    import flax.linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Dense(128)(x)
            h = nn.LayerNorm(use_fast_variance=False)(h)
            h = nn.gelu(h, approximate=True)  # planted: rounding only
            return nn.Dense(16)(h)

    model, x = Block(), _normal((8, 64))
    return model.apply, (model.init(jax.random.key(0), x), x)


def make_deep_bf16_resnet():
    """A bf16 residual network of 14 blocks (3x3 conv, inference BatchNorm, ReLU, identity shortcut):
    jit elides two bf16 roundings per block (28 local divergences, more than are replayed one by one),
    and with bf16 logits several of them alone set off much the same output difference."""
    import flax.linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            conv = lambda: nn.Conv(16, (3, 3), use_bias=False, dtype=jnp.bfloat16, param_dtype=jnp.float32)
            norm = lambda: nn.BatchNorm(use_running_average=True, dtype=jnp.bfloat16,
                                        param_dtype=jnp.float32)
            h = nn.relu(norm()(conv()(x)))
            h = norm()(conv()(h))
            return nn.relu(x + h)

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(16, (3, 3), dtype=jnp.bfloat16, param_dtype=jnp.float32)(x)
            for _ in range(14):
                x = Block()(x)
            x = jnp.mean(x, axis=(1, 2))
            return nn.Dense(10, dtype=jnp.bfloat16, param_dtype=jnp.float32)(x).astype(jnp.float32)

    model, x = Net(), _normal((1, 12, 12, 3), seed=3)
    return model.apply, (model.init(jax.random.key(0), x), x)


def make_scalar_loss():
    """A loss (a 0-d output): a logistic loss over a bf16 layer whose rounding jit elides. Blame must name the op
    that carries the loss's difference, as for any output (issue 55: a 0-d output ended blame with an IndexError)."""

    def loss(w, x, y):
        h = jnp.tanh(x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32)  # planted: loss layer
        return jnp.mean(jnp.log1p(jnp.exp(-y * h.sum(-1))))

    return loss, (_normal((16, 8)), _normal((32, 16), seed=1), jnp.sign(_normal((32,), seed=2)))
