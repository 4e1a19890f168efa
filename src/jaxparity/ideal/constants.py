"""Constants a program holds rounded, and how far they move the f64 ideal.

A Python number in a bfloat16 program (``x * (1/127.5)``, hard-sigmoid's ``1/6``) is computed at trace time
and enters the jaxpr as a bfloat16 literal or const: ``0.007874``, 0.39% from 2/255. The f64 reference
computes with what the program holds, so its "ideal" is that of another model than the one written, and
the same network built in float64 may differ from it by more than the paths being judged differ from each
other. Here: the literals and consts of every jaxpr (nested ones included) whose value rounds a short value
(``ideal.short``), and the ideal re-run with them replaced, once by their short values and once by the
ends of their rounding intervals on the same side (which short value the user meant cannot be known; any
value in the interval gives the same program).

Scalars and arrays of one repeated value only: an array of distinct values is data (weights, a table),
not a number the program computed at trace time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax.extend.core as jcore
import numpy as np

from ..result import IdealUncertainty, RoundedConstant
from ..rounding import is_float_dtype
from .short import ShortValue, short_value

__all__ = ["Site", "ideal_uncertainty", "rounded_sites"]


@dataclass(frozen=True)
class Site:
    """One literal or const of a jaxpr that holds a rounded short value."""

    key: int  # id() of the Literal or constvar: what ``evaluate_jaxpr(constants=)`` replaces
    shape: tuple[int, ...]
    value: float
    dtype: np.dtype
    short: ShortValue
    where: str | None


def rounded_sites(closed: jcore.ClosedJaxpr) -> list[Site]:
    """Every literal and const of ``closed`` and its nested jaxprs held in a float dtype narrower than
    float64 whose value rounds a short value, in program order."""
    found: list[Site] = []
    _walk(closed.jaxpr, closed.consts, None, found, set())
    return found


def ideal_uncertainty(closed: jcore.ClosedJaxpr, args: Sequence[Any], ideal: Sequence[np.ndarray],
                      names: Sequence[str]) -> IdealUncertainty | None:
    """How far the f64 ideal of ``closed`` on ``args`` (``ideal``: its outputs, named ``names``) moves with
    its rounded constants replaced; None where it holds none."""
    from ..interpreter import evaluate_jaxpr

    sites = rounded_sites(closed)
    if not sites:
        return None
    short = {s.key: np.full(s.shape, s.short.value, np.float64) for s in sites}
    edge = {s.key: np.full(s.shape, s.short.interval[1] if s.short.value > s.value else s.short.interval[0],
                           np.float64) for s in sites}
    to_short = evaluate_jaxpr(closed, args, mode="f64", constants=short)
    to_edge = evaluate_jaxpr(closed, args, mode="f64", constants=edge)
    moved_short = {n: _moved(a, b) for n, a, b in zip(names, ideal, to_short)}
    moved = {n: max(moved_short[n], _moved(a, b)) for n, a, b in zip(names, ideal, to_edge)}
    return IdealUncertainty(_grouped(sites), moved, moved_short)


def _grouped(sites: list[Site]) -> tuple[RoundedConstant, ...]:
    """One RoundedConstant per (value, dtype), the most rounded first."""
    by: dict[tuple[float, str], list[Site]] = {}
    for s in sites:
        by.setdefault((s.value, str(s.dtype)), []).append(s)
    out = []
    for (value, dtype), group in by.items():
        sv = group[0].short
        out.append(RoundedConstant(
            value=value, dtype=dtype, short=sv.text, short_value=sv.value,
            relative_error=abs(value - sv.value) / abs(sv.value), interval=sv.interval,
            alternatives=sv.alternatives, uses=len(group),
            where=_lines([s.where for s in group if s.where])))
    return tuple(sorted(out, key=lambda c: -c.relative_error))


def _lines(wheres: list[str]) -> str | None:
    """The distinct lines of a constant's uses: "model.py:40", "model.py:40 and model.py:42", "model.py:40,
    model.py:42 and 3 more lines"."""
    lines = list(dict.fromkeys(wheres))
    if not lines:
        return None
    if len(lines) <= 2:
        return " and ".join(lines)
    return f"{lines[0]}, {lines[1]} and {len(lines) - 2} more line{'s' if len(lines) > 3 else ''}"


def _moved(before: Any, after: Any) -> float:
    """Max abs change between two outputs, over the elements finite in both (0.0 for non-float outputs)."""
    a, b = np.asarray(before), np.asarray(after)
    if a.shape != b.shape or not (is_float_dtype(a.dtype) and is_float_dtype(b.dtype)):
        return 0.0
    a, b = a.astype(np.float64), b.astype(np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    return float(np.abs(a - b)[both].max()) if both.any() else 0.0


def _walk(jaxpr: jcore.Jaxpr, consts: Sequence[Any], outer: str | None, found: list[Site], seen: set[int]) -> None:
    if id(jaxpr) in seen:  # a jaxpr shared by several equations: its sites are the same objects
        return
    seen.add(id(jaxpr))
    first_use: dict[Any, jcore.JaxprEqn] = {}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            if not isinstance(v, jcore.Literal):
                first_use.setdefault(v, eqn)
    for var, value in zip(jaxpr.constvars, consts):
        user = first_use.get(var)
        _add(found, var, value, var.aval, (_where(user) if user is not None else None) or outer)  # type: ignore[attr-defined]
    for eqn in jaxpr.eqns:
        where = _where(eqn) or outer
        for v in eqn.invars:
            if isinstance(v, jcore.Literal):
                _add(found, v, v.val, v.aval, where)
        for sub in _subjaxprs(eqn.params):
            if isinstance(sub, jcore.ClosedJaxpr):
                _walk(sub.jaxpr, sub.consts, where, found, seen)
            else:
                _walk(sub, (), where, found, seen)
    for v in jaxpr.outvars:
        if isinstance(v, jcore.Literal):
            _add(found, v, v.val, v.aval, outer)


def _add(found: list[Site], var: Any, value: Any, aval: Any, where: str | None) -> None:
    dtype = getattr(aval, "dtype", None)
    if dtype is None or not is_float_dtype(dtype) or np.dtype(dtype).itemsize >= 8:
        return
    flat = np.asarray(value).reshape(-1)
    if flat.size == 0 or (flat.size > 1 and not (np.all(flat[:16] == flat[0]) and np.all(flat == flat[0]))):
        return  # distinct values: data, not a number computed at trace time
    x = float(flat[:1].astype(dtype)[0])  # the value as the program holds it
    sv = short_value(x, dtype)
    if sv is not None:
        found.append(Site(id(var), tuple(getattr(aval, "shape", ())), x, np.dtype(dtype), sv, where))


def _subjaxprs(params: dict) -> list[Any]:
    kinds = (jcore.Jaxpr, jcore.ClosedJaxpr)
    return [u for v in params.values() for u in (v if isinstance(v, (tuple, list)) else (v,)) if isinstance(u, kinds)]


def _where(eqn: Any) -> str | None:
    from ..localize.program import user_line

    return user_line(eqn)
