"""Host callbacks in the program: Equinox's error_if (a pure_callback inside a cond), jax.debug.print
(a debug_callback), io_callback, a callback in a scan body; no path that serializes the program runs them."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class Checked(eqx.Module):
    """A layer that refuses negative inputs, as diffrax's step-size controller and many Equinox models do."""

    weight: jax.Array

    def __call__(self, x):
        x = eqx.error_if(x, jnp.any(x < 0), "negative")  # planted: error_if
        return jnp.tanh(self.weight * x)


def error_if():
    model = Checked(jnp.linspace(0.5, 1.5, 8))
    return (lambda m, x: m(x)), (model, jnp.linspace(0.0, 2.0, 8))


def _printed(x):
    y = jnp.sin(x)
    jax.debug.print("y = {}", y)  # planted: debug.print
    return y * 2


def debug_print():
    return _printed, (jnp.linspace(-1.0, 1.0, 8),)


def _scanned(x):
    def body(c, xi):
        jax.debug.callback(lambda v: None, xi)  # planted: debug.callback
        return c + xi, c

    return jax.lax.scan(body, 0.0, x)


def scan_callback():
    return _scanned, (jnp.linspace(-1.0, 1.0, 8),)


def _io(x):
    y = jax.experimental.io_callback(lambda v: np.asarray(v, np.float32), jax.ShapeDtypeStruct(x.shape, x.dtype), x)  # planted: io_callback
    return y + 1


def io():
    return _io, (jnp.linspace(-1.0, 1.0, 8),)


def plain():
    return jnp.tanh, (jnp.linspace(-1.0, 1.0, 8),)
