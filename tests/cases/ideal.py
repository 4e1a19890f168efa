"""Programs whose constants were computed at trace time and rounded to the program's narrow dtype: the f64
ideal computes with the rounded constants, so it is itself uncertain by what that rounding moves
(``ideal/``). And one whose constants are exact, which says nothing."""

import jax
import jax.numpy as jnp
import numpy as np

BF16 = jnp.bfloat16


def _pixels(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).integers(0, 256, size=shape), BF16)


def make_rescale():
    """Keras's Rescaling(1/127.5, offset=-1) under mixed_bfloat16: 1/127.5 enters as a bf16 literal."""
    def f(x):
        return x * (1 / 127.5) - 1  # planted: lone rescale
    return f, (_pixels((64,)),)


def make_hard_sigmoid():
    """Keras's hard_sigmoid, relu6(x + 3) * (1/6), in bf16: 1/6 enters as a bf16 literal."""
    def f(x):
        return jax.nn.relu6(x + 3) * (1 / 6)  # planted: lone sixth
    return f, (jnp.asarray(np.random.default_rng(1).normal(size=(64,)) * 4, BF16),)


def make_mobilenet_block():
    """A MobileNetV3-like stem under mixed_bfloat16: rescaled pixels, a bf16 dense layer, hard-swish and a
    float32 head; the rounded 1/127.5 and 1/6 move the ideal by more than eager and jit differ by."""
    def f(params, img):
        w1, w2 = params
        x = img * (1 / 127.5) - 1  # planted: rescale
        h = x @ w1
        h = h * (jax.nn.relu6(h + 3) * (1 / 6))  # planted: sixth
        return (h @ w2).astype(jnp.float32).sum(axis=-1)
    rng = np.random.default_rng(2)
    w1 = jnp.asarray(rng.normal(size=(48, 32)) / 4, BF16)
    w2 = jnp.asarray(rng.normal(size=(32, 8)) / 4, BF16)
    return f, ((w1, w2), _pixels((16, 48), seed=3))


def make_exact_f32():
    """float32 with exact constants (0.5, 2.0, 1/8): nothing is rounded at trace time."""
    def f(x):
        return x * 0.5 + 2.0 * x / 8 + (1 / 8)
    return f, (np.random.default_rng(4).normal(size=(32,)).astype(np.float32),)
