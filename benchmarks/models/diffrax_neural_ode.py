"""The neural ODE of diffrax's docs (examples/neural_ode): an MLP vector field solved by diffrax.diffeqsolve
with Tsit5 and a PIDController, saved at 16 times (random weights), through `from_equinox`.
Needs diffrax (`pip install diffrax`).

    jaxparity explain benchmarks/models/diffrax_neural_ode.py --paths eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from jaxparity.cases import from_equinox


class NeuralODE(eqx.Module):
    mlp: eqx.nn.MLP

    def __init__(self, data_size, width_size, depth, *, key):
        self.mlp = eqx.nn.MLP(data_size, data_size, width_size, depth, activation=jax.nn.softplus, key=key)

    def __call__(self, ts, y0):
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, args: self.mlp(y)), diffrax.Tsit5(), t0=ts[0], t1=ts[-1],
            dt0=ts[1] - ts[0], y0=y0, stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
            saveat=diffrax.SaveAt(ts=ts))
        return solution.ys


def make():
    model = NeuralODE(2, 32, 2, key=jax.random.key(0))
    return from_equinox(model, jnp.linspace(0.0, 10.0, 16), jnp.array([0.5, -0.3]))
