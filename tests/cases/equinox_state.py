"""Equinox's stateful example (docs/examples/stateful.ipynb): BatchNorm and SpectralNorm with an eqx.nn.State,
in inference mode. BatchNorm holds a string (its axis_name) among its leaves, and a Linear follows it:
what is not an array is bound in, and the arrays are put back where they were, around the Nones the
modules hold."""

import equinox as eqx
import jax
import jax.random as jr


class Model(eqx.Module):
    norm1: eqx.nn.BatchNorm
    spectral_linear: eqx.nn.SpectralNorm[eqx.nn.Linear]
    norm2: eqx.nn.BatchNorm
    linear1: eqx.nn.Linear
    linear2: eqx.nn.Linear

    def __init__(self, key):
        key1, key2, key3, key4 = jr.split(key, 4)
        self.norm1 = eqx.nn.BatchNorm(input_size=3, axis_name="batch")
        self.spectral_linear = eqx.nn.SpectralNorm(
            layer=eqx.nn.Linear(in_features=3, out_features=32, key=key1), weight_name="weight", key=key2)
        self.norm2 = eqx.nn.BatchNorm(input_size=32, axis_name="batch")
        self.linear1 = eqx.nn.Linear(in_features=32, out_features=32, key=key3)
        self.linear2 = eqx.nn.Linear(in_features=32, out_features=3, key=key4)

    def __call__(self, x, state):
        x, state = self.norm1(x, state)
        x, state = self.spectral_linear(x, state)
        x = jax.nn.relu(x)
        x, state = self.norm2(x, state)
        x = self.linear1(x)
        x = jax.nn.relu(x)
        x = self.linear2(x)
        return x, state


def make():
    model, state = eqx.nn.make_with_state(Model)(jr.PRNGKey(0))
    model = eqx.nn.inference_mode(model)

    def predict(model, state, xs):
        return jax.vmap(lambda x: model(x, state)[0])(xs)

    return predict, (model, state, jr.normal(jr.PRNGKey(1), (4, 3)))
