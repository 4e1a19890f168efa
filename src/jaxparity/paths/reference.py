"""``declared`` and ``f64``: references computed by interpreting the jaxpr op by op in float64.

``declared`` rounds each op's result once to the dtype the program declares for it: the numbers
the program *means*. ``f64`` never rounds: ideal math, against which every path's error is measured.

Where the program divides an integer by zero (or the smallest integer by -1) the result is left to the
implementation: there is no ideal there. Both references take XLA's values (-1 for x / 0, x for x % 0)
and ``f64`` says so in a note beginning ``IDEAL_UNDEFINED``, so that no side is called closer to it.

Where the program holds constants rounded at trace time (``x * (1/127.5)`` in bfloat16), ``f64`` computes
with them as held, and measures how far its outputs move with them replaced by the short values they
plausibly stand for (``ideal.constants``): its ``ideal_uncertainty``, said in a note beginning
``IDEAL_UNCERTAIN``.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Literal

from .base import Path

__all__ = ["DeclaredPath", "F64Path", "IDEAL_OTHER_DECISIONS", "IDEAL_UNCERTAIN", "IDEAL_UNDEFINED"]

IDEAL_UNDEFINED = "the ideal is undefined where the program leaves its result to the implementation"
IDEAL_UNCERTAIN = "the ideal is uncertain"
IDEAL_OTHER_DECISIONS = "the ideal takes other control-flow decisions than the program as declared"


class DeclaredPath(Path):
    name = "declared"
    summary = "reference: each op in float64, rounded once to its declared dtype"
    reference = True
    mode: ClassVar[Literal["declared", "f64"] | None] = "declared"
    capabilities = frozenset({"declared"})

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        from ..interpreter import interpret

        with on_host():
            return interpret(fn, *_host(args), mode=self.mode or "declared")


def on_host() -> Any:
    """A reference computes on the host (the CPU), whatever device the process holds: an op the interpreter
    hands to JAX in float64 would otherwise run on an accelerator, slowly and with its arithmetic."""
    import jax

    return jax.default_device(jax.devices("cpu")[0])


def _host(args: tuple) -> tuple:
    import jax

    cpu = jax.devices("cpu")[0]
    return jax.tree_util.tree_map(lambda x: jax.device_put(x, cpu) if isinstance(x, jax.Array) else x, args)


class F64Path(DeclaredPath):
    name = "f64"
    summary = "reference: ideal math, every float op in float64 and never rounded"
    mode: ClassVar[Literal["declared", "f64"] | None] = "f64"
    capabilities = frozenset({"ideal"})

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        with on_host():
            return self._run(fn, _host(args))

    def _run(self, fn: Callable[..., Any], args: tuple) -> Any:
        import jax

        from ..interpreter import evaluate_jaxpr, trace
        from ..localize.refusals import refusal_hint
        from ..pytree import named_leaves

        closed, tree = trace(fn, *args)
        leaves = jax.tree_util.tree_leaves(args)
        taken: list[tuple[str, str, int]] = []
        outs = evaluate_jaxpr(closed, leaves, mode="f64", decisions=taken)
        out = jax.tree_util.tree_unflatten(tree, outs)
        if taken:
            self._other_decisions(closed, leaves, taken)
        self._measure_constants(closed, leaves, outs, [n for n, _ in named_leaves(out, "out")])
        undefined = refusal_hint(fn, args, primitives=("div", "rem"))
        if undefined:
            self.notes.append(f"{IDEAL_UNDEFINED} ({undefined.split('; mask')[0]}): XLA's values stand in there, "
                              f"and no path is called closer to the ideal")
        return out

    def _other_decisions(self, closed: Any, leaves: list, ideal: list[tuple[str, str, int]]) -> None:
        """Where the program's loops and branches go otherwise in float64 than as declared (``ideal.decisions``),
        said in a note beginning ``IDEAL_OTHER_DECISIONS``."""
        from ..ideal.decisions import other_decisions

        try:
            said = other_decisions(closed, leaves, ideal)
        except Exception:  # noqa: BLE001 - a note the ideal stands without
            return
        if said is not None:
            self.notes.append(f"{IDEAL_OTHER_DECISIONS}: {said} (the first of the decisions that differ): a path's "
                              "distance from the ideal is that of another computation, not its rounding alone")

    def _measure_constants(self, closed: Any, leaves: list, outs: list, names: list[str]) -> None:
        """How far the ideal moves with the program's rounded constants replaced (``ideal_uncertainty``)."""
        from ..ideal import ideal_uncertainty

        try:
            self.ideal_uncertainty = ideal_uncertainty(closed, leaves, outs, names)
        except Exception as e:  # the ideal stands without it; say what was not measured
            self.notes.append(f"the constants the program rounded at trace time were not measured: "
                              f"{type(e).__name__}: {e}")
            return
        u = self.ideal_uncertainty
        if u is not None and max(u.moved.values(), default=0.0) > 0:
            n = len(u.constants)
            which = (f"{n} constants rounded at trace time, the most rounded" if n > 1
                     else "a constant rounded at trace time,")
            decides = any(n.startswith(IDEAL_OTHER_DECISIONS) for n in self.notes)  # no side is called closer
            self.notes.append(
                f"{IDEAL_UNCERTAIN} by up to {max(u.moved.values()):.3g} (max abs) for {which} "
                f"{u.constants[0].describe()}" + ("" if decides else "; a side is called closer to the ideal only "
                                                  "where their errors against it differ by more than that"))
