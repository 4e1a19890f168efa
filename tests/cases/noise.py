"""Programs whose runtimes differ by rounding only, and one that differs by a little more than rounding
for a reason (a skipped narrow rounding): the noise judgement (explain/noise.py) must pass the first and
never the second."""

import jax
import jax.numpy as jnp
import numpy as np
import flax.linen as nn


class SmallCNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        x = nn.relu(nn.Conv(8, (3, 3), strides=2)(x))
        return nn.Dense(4)(x.mean(axis=(1, 2)))


class EncoderBlock(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = x + nn.SelfAttention(num_heads=2, qkv_features=16)(nn.LayerNorm()(x))
        return x + nn.Dense(16)(nn.gelu(nn.Dense(32)(nn.LayerNorm()(x))))


def make_small_cnn():
    m = SmallCNN()
    x = jax.random.normal(jax.random.PRNGKey(0), (2, 8, 8, 3))
    return m.apply, (m.init(jax.random.PRNGKey(1), x), x)


def make_encoder_block():
    m = EncoderBlock()
    x = jax.random.normal(jax.random.PRNGKey(0), (2, 6, 16))
    return m.apply, (m.init(jax.random.PRNGKey(1), x), x)


def make_one_pass_softmax_sum():
    """float32 softmax then a sum: correct runtimes differ by a few ULP."""
    def f(x):
        return jax.nn.softmax(x, axis=-1).sum(axis=0)
    return f, (np.random.default_rng(0).normal(size=(16, 10)).astype(np.float32),)


def make_bf16_chain():
    """Every op rounds to bfloat16: a path that keeps float32 between them departs from the program by no
    more than a bf16 rounding, which is no rounding noise."""
    def f(x, w):
        h = (x @ w).astype(jnp.bfloat16)
        return (h * h + h).astype(jnp.float32)
    rng = np.random.default_rng(1)
    return f, (jnp.asarray(rng.normal(size=(4, 32)), jnp.bfloat16), jnp.asarray(rng.normal(size=(32, 8)), jnp.bfloat16))


class _Classifier(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(nn.relu(nn.Dense(32)(x)))


def make_scalar_loss():
    """A classifier's mean softmax cross-entropy (a 0-d loss) on inputs scaled by 30: logits spread past 87, so
    some exp(x − max) are subnormal, which eager flushes to zero and ORT does not; those terms are lost in a sum of
    about 1 either way. The loss differs by 2 ULP, the dense layer's and the mean's summation orders."""
    model = _Classifier()
    x = 30.0 * jax.random.normal(jax.random.key(3), (8, 16), dtype=jnp.float32)
    labels = jax.random.randint(jax.random.key(4), (8,), 0, 10)
    variables = model.init(jax.random.key(0), x)

    def loss(variables, x, labels):
        logp = jax.nn.log_softmax(model.apply(variables, x))
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))

    return loss, (variables, x, labels)
