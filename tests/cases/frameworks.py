"""The same small convolutional classifier as each framework writes it, with a BatchNorm whose
running variance drawn like data would go negative (NaN everywhere), for the role of each argument:
the model's variables stay, the data varies. Also the shapes a case can take (static keyword
arguments, marked arguments) and models that show nothing (all NaN, a zero head, no input)."""

import functools

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx

import jaxparity

IMAGES = jax.random.uniform(jax.random.key(1), (2, 8, 8, 1))  # in [0, 1], like pixels


class NNXNet(nnx.Module):
    def __init__(self, rngs):
        self.conv = nnx.Conv(1, 4, (3, 3), rngs=rngs)
        self.bn = nnx.BatchNorm(4, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.head = nnx.Linear(4, 3, rngs=rngs)

    def __call__(self, x):
        x = self.drop(jax.nn.relu(self.bn(self.conv(x))))
        return self.head(x.mean(axis=(1, 2)))


def _set(variable, value):
    if hasattr(variable, "set_value"):  # flax >= 0.12
        variable.set_value(value)
    else:
        variable.value = value


def _nnx_model():
    model = NNXNet(nnx.Rngs(0))
    _set(model.bn.mean, jnp.full(4, 0.1))
    _set(model.bn.var, jnp.full(4, 0.05))  # small and positive: drawn like data it would not stay so
    model.eval()
    return model


def make_nnx_state():
    graphdef, state = nnx.split(_nnx_model())
    return (lambda state, x: nnx.merge(graphdef, state)(x)), (state, IMAGES)


def make_nnx_module():
    return (lambda m, x: m(x)), (_nnx_model(), IMAGES)


class LinenNet(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Conv(4, (3, 3))(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        x = nn.Dropout(0.5, deterministic=not train)(jax.nn.relu(x))
        return nn.Dense(3)(x.mean(axis=(1, 2)))


def make_linen():
    """model.apply with a static keyword argument: (fn, args, kwargs)."""
    variables = LinenNet().init(jax.random.key(0), IMAGES, train=False)
    variables = {"params": variables["params"],
                 "batch_stats": jax.tree.map(lambda v: jnp.full_like(v, 0.05), variables["batch_stats"])}
    return LinenNet().apply, (variables, IMAGES), {"train": False}


def make_linen_partial():
    make = make_linen()
    return functools.partial(make[0], train=False), make[1]


class EqxNet(eqx.Module):
    conv: eqx.nn.Conv2d
    head: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 4, 3, key=k1)
        self.head = eqx.nn.Linear(4, 3, key=k2)

    def __call__(self, x):  # one image, channels first, as Equinox writes it
        return self.head(jax.nn.relu(self.conv(x)).mean(axis=(1, 2)))


def make_equinox():
    model = EqxNet(jax.random.key(0))
    return (lambda model, x: jax.vmap(model)(x)), (model, jnp.moveaxis(IMAGES, -1, 1))


def make_plain():
    """Plain JAX: the weights under a name the signature gives them."""
    params = {"w": jax.random.normal(jax.random.key(2), (64, 3)), "scale": jnp.full(3, 0.05)}

    def predict(params, images):
        return images.reshape(2, -1) @ params["w"] / jnp.sqrt(params["scale"])

    return predict, (params, IMAGES)


def make_marked():
    """Arguments marked: only the marked one is data, whatever the names."""
    w = jax.random.normal(jax.random.key(2), (64, 3))
    return (lambda a, b: b.reshape(2, -1) @ a), (w, jaxparity.data(IMAGES))


def make_all_nan():
    graphdef, state = nnx.split(_nnx_model())
    _set(state["bn"]["var"], -jnp.ones(4))  # a broken checkpoint: sqrt of a negative variance
    return (lambda state, x: nnx.merge(graphdef, state)(x)), (state, IMAGES)


def make_zero_head():
    model = _nnx_model()
    _set(model.head.kernel, jnp.zeros((4, 3)))  # as a ViT initialises its head
    graphdef, state = nnx.split(model)
    return (lambda state, x: nnx.merge(graphdef, state)(x)), (state, IMAGES)


def make_zero_kernel_head():
    """A zero-initialised head kernel before a bias that is not zero: each example gets the bias."""
    model = _nnx_model()
    _set(model.head.kernel, jnp.zeros((4, 3)))
    _set(model.head.bias, jnp.asarray([0.5, -1.0, 2.0]))
    graphdef, state = nnx.split(model)
    return (lambda state, x: nnx.merge(graphdef, state)(x)), (state, IMAGES)


def _in_dtype(make, dtype):
    """``make``'s model computing in ``dtype``: its float variables and the images cast, its outputs ``dtype``."""
    fn, (state, x) = make()

    def cast(v):
        return v.astype(dtype) if jnp.issubdtype(v.dtype, jnp.floating) else v  # the Rngs' keys stay keys

    return fn, (jax.tree.map(cast, state), x.astype(dtype))


def make_all_nan_bf16():
    """The broken checkpoint in bfloat16 (ml_dtypes: numpy kind 'V', not 'f'): every output NaN."""
    return _in_dtype(make_all_nan, jnp.bfloat16)


def make_zero_head_bf16():
    return _in_dtype(make_zero_head, jnp.bfloat16)


def make_all_nan_f16():
    return _in_dtype(make_all_nan, jnp.float16)


def make_ignores_input():
    params = jax.random.normal(jax.random.key(2), (4, 3))
    return (lambda params, x: jnp.tanh(params).sum(0) + 0.0 * x[0, 0, 0, 0]), (params, IMAGES)


def make_broken():
    """Fails on its own inputs, whichever path runs it."""
    return (lambda params, x: x.reshape(2, -1) @ params), (jnp.ones((65, 3)), IMAGES)


def make_equinox_mlp():
    """eqx.nn.MLP as Equinox's docs use it: its activation functions are leaves of the module."""
    model = eqx.nn.MLP(8, 3, 16, 2, key=jax.random.key(0))
    return (lambda model, x: jax.vmap(model)(x)), (model, jnp.ones((2, 8)))


class _Dropped(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dropout(0.5, deterministic=False)(nn.Dense(4)(x))


def make_dropout_key_data():
    """Dropout left on, its key passed as key data: every converter meets threefry."""
    x = jnp.ones((2, 4))
    variables = _Dropped().init(jax.random.key(0), x)
    fn = lambda params, x, bits: _Dropped().apply(params, x, rngs={"dropout": jax.random.wrap_key_data(bits)})  # noqa: E731
    return fn, (variables, x, jax.random.key_data(jax.random.key(3)))


class NNXDropoutRngs(nnx.Module):
    """As flax's NNX MNIST tutorial calls its Dropout: with rngs=, which jax2onnx's Dropout plugin refuses."""

    def __init__(self, rngs):
        self.linear = nnx.Linear(8, 4, rngs=rngs)
        self.dropout = nnx.Dropout(0.5)
        self.rngs = rngs

    def __call__(self, x):
        return self.dropout(jax.nn.relu(self.linear(x)), rngs=self.rngs)


def make_nnx_dropout_rngs():
    model = NNXDropoutRngs(nnx.Rngs(0))
    model.eval()
    graphdef, state = nnx.split(model)
    return (lambda state, x: nnx.merge(graphdef, state)(x)), (state, jax.random.normal(jax.random.key(1), (2, 8)))


class BiLSTM(nn.Module):
    """flax's own bidirectional RNN over sequences of given lengths: it flips each by its length (a gather by
    traced lengths) and scans an LSTM cell (jnp.shape inside nn.scan), as flax's sst2 classifier does."""

    @nn.compact
    def __call__(self, x, lengths):
        return nn.Bidirectional(nn.RNN(nn.LSTMCell(8)), nn.RNN(nn.LSTMCell(8)))(x, seq_lengths=lengths)


def make_bilstm():
    x = jax.random.normal(jax.random.key(1), (2, 6, 4))
    lengths = jnp.array([6, 4], jnp.int32)
    variables = BiLSTM().init(jax.random.key(0), x, lengths)
    return BiLSTM().apply, (variables, x, lengths)


class Partitioned(nn.Module):
    """Parameters boxed for sharding (nn.LogicallyPartitioned, nn.Partitioned), as large linen models declare
    them: jax2onnx's linen Dense takes the box for the array."""

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(16, kernel_init=nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp")))(x)
        return nn.Dense(4, kernel_init=nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model")))(
            jax.nn.relu(x))


def make_partitioned():
    x = jax.random.normal(jax.random.key(1), (3, 8))
    return Partitioned().apply, (Partitioned().init(jax.random.key(0), x), x)
