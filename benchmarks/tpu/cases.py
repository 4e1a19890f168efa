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


def convnet(params, x):
    """Two float32 convolutions in plain JAX (NHWC), the seed's layer without bf16."""
    dn = ("NHWC", "HWIO", "NHWC")
    h = jax.nn.relu(jax.lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME", dimension_numbers=dn) + params["b1"])
    return jax.lax.conv_general_dilated(h, params["k2"], (2, 2), "SAME", dimension_numbers=dn)


def make_conv():
    r = _rng(2)
    params = {"k1": (r.normal(size=(3, 3, 8, 32)) / 8).astype(np.float32), "b1": r.normal(size=32).astype(np.float32),
              "k2": (r.normal(size=(3, 3, 32, 16)) / 17).astype(np.float32)}
    return convnet, (params, r.normal(size=(4, 32, 32, 8)).astype(np.float32))


def make_flax_cnn():
    """The CNN of flax's examples/mnist (linen): conv 32, relu, avg pool, conv 64, relu, avg pool, dense 256,
    relu, dense 10, log_softmax. Random weights drawn on the host (jax.random differs by device), 8 images."""
    import flax.linen as nn

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.avg_pool(nn.relu(nn.Conv(features=32, kernel_size=(3, 3))(x)), window_shape=(2, 2), strides=(2, 2))
            x = nn.avg_pool(nn.relu(nn.Conv(features=64, kernel_size=(3, 3))(x)), window_shape=(2, 2), strides=(2, 2))
            x = nn.relu(nn.Dense(features=256)(x.reshape((x.shape[0], -1))))
            return nn.log_softmax(nn.Dense(features=10)(x))

    model = CNN()
    images = _rng(3).uniform(size=(8, 28, 28, 1)).astype(np.float32)
    with jax.default_device(jax.devices("cpu")[0]):
        params = jax.tree.map(np.asarray, model.init(jax.random.PRNGKey(0), images))
    return model.apply, (params, images)


def make_mlp_large():
    """The MLP wider (6.4 GFLOP a call): the precision fix's cost on a model larger than make_mlp."""
    r = _rng(4)
    params = {"w1": (r.normal(size=(1024, 2048)) / 32).astype(np.float32), "b1": r.normal(size=2048).astype(np.float32),
              "w2": (r.normal(size=(2048, 2048)) / 45).astype(np.float32),
              "w3": (r.normal(size=(2048, 8)) / 45).astype(np.float32)}
    return mlp, (params, r.normal(size=(512, 1024)).astype(np.float32))


def buckets(x, y):
    """A ratio's floor(log2) buckets (a histogram's bin, a quantizer's exponent): the division and the log are
    the device's own arithmetic."""
    r = x / y
    return jnp.floor(jnp.log2(r)), r


def make_div():
    r = _rng(5)
    return buckets, (r.uniform(0.5, 8.0, size=4096).astype(np.float32), r.uniform(0.5, 8.0, size=4096).astype(np.float32))


def log_density(theta, y):
    """A scalar loss: a Student-t log-density summed over the data (issue 55: a 0-d output is blamed like any)."""
    mu, log_sigma, log_nu = theta[0], theta[1], theta[2]
    sigma, nu = jnp.exp(log_sigma), jnp.exp(log_nu) + 1.0
    z = (y - mu) / sigma
    return jnp.sum(-0.5 * (nu + 1.0) * jnp.log1p(z * z / nu) - log_sigma - 0.5 * jnp.log(nu))


def make_loss():
    r = _rng(6)
    return log_density, (np.array([0.3, 0.2, 1.1], np.float32), (r.standard_t(3.0, size=2048) * 2 + 1).astype(np.float32))


def layer_norm(x, g, b):
    """One-pass variance (E[x²] - E[x]²) on activations with a large mean: both devices far from float64."""
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean(x * x, axis=-1, keepdims=True) - m * m
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b


def make_layernorm():
    r = _rng(7)
    x = (r.normal(size=(16, 256)) * 0.5 + 300.0).astype(np.float32)
    return layer_norm, (x, r.normal(size=256).astype(np.float32), r.normal(size=256).astype(np.float32))


def train_step(params, x, y):
    """One SGD step of a small MLP regressor: the loss's gradient and the updated weights."""
    def loss(p):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def make_train_step():
    r = _rng(8)
    params = {"w1": (r.normal(size=(32, 64)) / 6).astype(np.float32), "b1": np.zeros(64, np.float32),
              "w2": (r.normal(size=(64, 1)) / 8).astype(np.float32)}
    return train_step, (params, r.normal(size=(128, 32)).astype(np.float32), r.normal(size=(128, 1)).astype(np.float32))
