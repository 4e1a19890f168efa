"""``declared`` and ``f64``: references computed by interpreting the jaxpr op by op in float64.

``declared`` rounds each op's result once to the dtype the program declares for it: the numbers
the program *means*. ``f64`` never rounds: ideal math, against which every path's error is measured.

Where the program divides an integer by zero (or the smallest integer by -1) the result is left to the
implementation: there is no ideal there. Both references take XLA's values (-1 for x / 0, x for x % 0)
and ``f64`` says so in a note beginning ``IDEAL_UNDEFINED``, so that no side is called closer to it.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Literal

from .base import Path

__all__ = ["DeclaredPath", "F64Path", "IDEAL_UNDEFINED"]

IDEAL_UNDEFINED = "the ideal is undefined where the program leaves its result to the implementation"


class DeclaredPath(Path):
    name = "declared"
    summary = "reference: each op in float64, rounded once to its declared dtype"
    reference = True
    mode: ClassVar[Literal["declared", "f64"] | None] = "declared"
    capabilities = frozenset({"declared"})

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        from ..interpreter import interpret

        return interpret(fn, *args, mode=self.mode or "declared")


class F64Path(DeclaredPath):
    name = "f64"
    summary = "reference: ideal math, every float op in float64 and never rounded"
    mode: ClassVar[Literal["declared", "f64"] | None] = "f64"
    capabilities = frozenset({"ideal"})

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        from ..localize.refusals import refusal_hint

        out = super().run(fn, args, timeout=timeout)
        undefined = refusal_hint(fn, args, primitives=("div", "rem"))
        if undefined:
            self.notes.append(f"{IDEAL_UNDEFINED} ({undefined.split('; mask')[0]}): XLA's values stand in there, "
                              f"and no path is called closer to the ideal")
        return out
