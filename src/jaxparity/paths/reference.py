"""``declared`` and ``f64``: references computed by interpreting the jaxpr op by op in float64.

``declared`` rounds each op's result once to the dtype the program declares for it: the numbers
the program *means*. ``f64`` never rounds: ideal math, against which every path's error is measured.
"""

from __future__ import annotations

from typing import Any, Callable

from .base import Path


class DeclaredPath(Path):
    name = "declared"
    summary = "reference: each op in float64, rounded once to its declared dtype"
    reference = True
    mode = "declared"

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        from ..interpreter import interpret

        return interpret(fn, *args, mode=self.mode)


class F64Path(DeclaredPath):
    name = "f64"
    summary = "reference: ideal math, every float op in float64 and never rounded"
    mode = "f64"
