"""What blame may spend, counted in work rather than seconds.

A budget in seconds makes the report depend on the machine: the same ``explain`` said "2 of 3 iterations"
on a loaded CI runner and "3 of 3" on an idle laptop, and a cold compile cache cut a ResNet's blame short.
Here every replayed op is charged what it computes — one unit for its dispatch, plus its multiply-adds
(a dot product's or convolution's; an elementwise op's elements) at ``MACS_PER_UNIT`` — and a run of the
compiled screen is charged the whole program's multiply-adds at the compiled rate. The same command then
measures the same divergences anywhere; what a budget leaves out is said in the notes.

The rates are set so that a unit is about a millisecond of an op replayed alone on a 2-core CPU machine
(measured: a bf16 ResNet's ops replay at 0.7 ms each, a 1B-parameter transformer's at 31 ms each for
4.4 million multiply-adds), so ``BUDGET`` is about the 30 seconds the budget was before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BUDGET", "ITERATION_BUDGET", "Work", "op_units", "program_units"]

MACS_PER_UNIT = 150_000  # multiply-adds of an op replayed alone per unit (beside its unit of dispatch)
COMPILED_MACS_PER_UNIT = 5_000_000  # the same in a compiled run of the whole program (the screen)
BUDGET = 40_000  # units one blame may spend
ITERATION_BUDGET = 4_000  # of which one loop's iterations, each injected alone, may spend


def _size(v: Any) -> int:
    shape = getattr(getattr(v, "aval", None), "shape", None)
    return int(np.prod(shape)) if shape is not None else 0


def macs(eqn: Any) -> int:
    """Multiply-adds of one equation: a dot product's or convolution's output elements times the terms
    each sums; any other op's larger of its inputs' and outputs' elements."""
    out = sum(_size(v) for v in eqn.outvars)
    name = eqn.primitive.name
    try:
        if name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            return out * int(np.prod([eqn.invars[0].aval.shape[i] for i in contract]))
        if name == "conv_general_dilated":
            rhs = eqn.invars[1].aval.shape
            return out * int(np.prod(rhs)) // max(1, rhs[eqn.params["dimension_numbers"].rhs_spec[0]])
    except Exception:  # params of another JAX version: counted as an elementwise op
        pass
    return max(out, sum(_size(v) for v in eqn.invars))


def _bodies(values: Any) -> Any:
    """The jaxprs among an equation's params (a loop's body, a call's, each branch of a cond)."""
    from jax.extend.core import ClosedJaxpr, Jaxpr

    for v in values:
        if isinstance(v, ClosedJaxpr):
            yield v.jaxpr
        elif isinstance(v, Jaxpr):
            yield v
        elif isinstance(v, (tuple, list)):
            yield from _bodies(v)


def op_units(eqn: Any) -> float:
    """Units charged for replaying ``eqn`` alone (a loop or call op: its body's ops, as its replay runs them)."""
    inner = list(_bodies(eqn.params.values()))
    if inner:  # a scan's body runs ``length`` times; a while loop's trips are not known before: once
        return 1.0 + int(eqn.params.get("length", 1)) * sum(op_units(e) for j in inner for e in j.eqns)
    return 1.0 + macs(eqn) / MACS_PER_UNIT


def program_units(eqns: Any) -> float:
    """Units charged for one compiled run of a whole program of ``eqns``."""
    return max(1.0, sum(macs(e) for e in eqns) / COMPILED_MACS_PER_UNIT)


@dataclass
class Work:
    """A budget of units and what was spent of it. ``until(n)``: a stop ``n`` units from now (or the end)."""

    limit: float = BUDGET
    spent: float = 0.0

    def charge(self, units: float) -> None:
        self.spent += units

    @property
    def out(self) -> bool:
        return self.spent >= self.limit

    def until(self, units: float) -> float:
        return min(self.limit, self.spent + units)

    def describe(self) -> str:
        return f"work budget spent: {self.limit:,.0f} units of ops replayed, weighted by their size"
