"""``eager``: op by op, as a researcher runs the model in a notebook (``jax.disable_jit``)."""

from __future__ import annotations

from typing import Any, Callable

from .base import Path, jax_config


class EagerPath(Path):
    name = "eager"
    summary = "op by op under jax.disable_jit(): each primitive compiled and rounded on its own"
    options_help = {"jax_*": "any JAX config option while running, e.g. jax_threefry_partitionable=false"}

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax

        with jax_config(self.options), jax.disable_jit():
            return jax.block_until_ready(fn(*args))
