"""``eager``: op by op, as a researcher runs the model in a notebook (``jax.disable_jit``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from .base import Path, jax_config
from .devices import DEVICE_HELP, device_of, on_device, placed_on

# How a reproducer runs a function eagerly (``Path.repro_runner``).
_RUNNER = '''def run_eager(f, args):  # op by op: each primitive compiled and rounded on its own
    return [np.asarray(y) for y in f(*args)]
'''


class EagerPath(Path):
    name = "eager"
    summary = "op by op under jax.disable_jit(): each primitive compiled and rounded on its own"
    options_help = {"jax_*": "any JAX config option while running, e.g. jax_threefry_partitionable=false",
                    "device": DEVICE_HELP}
    capabilities = frozenset({"op_by_op"})
    traces = False
    cost = 4.0  # each primitive compiled on its own (GPT-2: 3x its jit run, Keras MobileNetV3: 5x)

    def device(self) -> str:
        return device_of(self.options)

    def repro_runner(self, extra: Mapping[str, str] | None = None) -> str | None:
        return _RUNNER

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax

        import numpy as np

        with jax_config(self.options), on_device(self.options), jax.disable_jit():
            out = fn(*placed_on(self.options, args, arrays_only=True))
        if any(isinstance(x, np.ndarray) for x in jax.tree_util.tree_leaves(out)):
            # its inputs were JAX arrays: a numpy output was computed in numpy on purpose, which no other path runs
            self.notes.append("the function returns numpy arrays: it computes some of its outputs in numpy "
                              "(given JAX arrays), which jit and the converted runtimes do not run as numpy")
        return jax.block_until_ready(out)
