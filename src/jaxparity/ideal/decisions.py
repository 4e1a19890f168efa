"""Where the f64 ideal computes another program: the loops and branches the program decides on its float values
(an adaptive solver's step acceptance, a loop that stops at a threshold) may go otherwise in float64 than with
each op rounded to its declared dtype. Then the ideal is another computation, and a path's distance from it is
not its rounding: no side is nearer it, and the baseline's distance is no noise floor."""

from __future__ import annotations

from typing import Any

__all__ = ["decides_otherwise", "other_decisions"]

Decision = tuple[str, str, int]  # ("while", its line, iterations) or ("cond", its line, branch index)


def other_decisions(closed: Any, leaves: list, ideal: list[Decision] | None = None) -> str | None:
    """The first loop or branch decision ``closed`` takes otherwise in float64 than as declared, in words; None
    where they are the same (or the program decides nothing). ``ideal``: the float64 run's decisions, where the
    caller already has them (``evaluate_jaxpr(decisions=...)``)."""
    from ..interpreter import evaluate_jaxpr
    from ..localize.program import _relative

    if ideal is None:
        if not _decides(closed.jaxpr):
            return None
        ideal = []
        evaluate_jaxpr(closed, leaves, mode="f64", decisions=ideal)
    if not ideal:
        return None
    declared: list[Decision] = []
    evaluate_jaxpr(closed, leaves, mode="declared", decisions=declared)
    if declared == ideal:
        return None
    n = min(len(ideal), len(declared))
    first = next((i for i, (a, b) in enumerate(zip(ideal, declared)) if a != b), n)
    if first == n:
        return (f"the program takes {len(ideal)} loop and branch decisions in float64 and {len(declared)} with each "
                "op rounded to its declared dtype")
    kind, where, mine = ideal[first]
    theirs = declared[first][2]
    file, sep, rest = where.partition(".py:")  # "/…/site-packages/equinox/….py:271:11 (fn)"
    where = f"{_relative(file + '.py')}:{rest.split(' ')[0].rsplit(':', 1)[0]}" if sep else where
    if kind == "while":
        return (f"the while loop at {where} runs {mine} iteration{'s' if mine != 1 else ''} in float64 and {theirs} "
                "with each op rounded to its declared dtype")
    return f"the cond at {where} takes branch {mine} in float64 and {theirs} with each op rounded to its declared dtype"


def decides_otherwise(fn: Any, args: tuple) -> bool:
    """Does the f64 ideal of ``fn`` on ``args`` take another loop or branch decision than the program as
    declared? False where it decides nothing or cannot be interpreted."""
    import jax

    from ..interpreter import trace

    try:
        closed, _ = trace(fn, *args)
        return other_decisions(closed, jax.tree_util.tree_leaves(args)) is not None
    except Exception:  # noqa: BLE001 - not established: the measure stands as it was
        return False


def _decides(jaxpr: Any) -> bool:
    """Does the jaxpr (nested ones included) hold a while loop or a cond?"""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("while", "cond"):
            return True
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns") and _decides(inner):
                    return True
    return False
