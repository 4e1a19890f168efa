"""``eager``: op by op, as a researcher runs the model in a notebook (``jax.disable_jit``)."""

from __future__ import annotations

from typing import Any, Callable

from .base import Path


class EagerPath(Path):
    name = "eager"
    summary = "op by op under jax.disable_jit(): each primitive compiled and rounded on its own"

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax

        with jax.disable_jit():
            return jax.block_until_ready(fn(*args))
