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

    def device(self) -> str:
        return device_of(self.options)

    def repro_runner(self, extra: Mapping[str, str] | None = None) -> str | None:
        return _RUNNER

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax

        with jax_config(self.options), on_device(self.options), jax.disable_jit():
            return jax.block_until_ready(fn(*placed_on(self.options, args, arrays_only=True)))
