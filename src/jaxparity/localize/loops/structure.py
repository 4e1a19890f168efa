"""How a loop or branch op feeds its body: which operands are constants, carries and sliced inputs,
and which values enter and leave iteration ``t``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...jaxcompat import scan_layout
from ..program import FlatProgram, Op, flatten_jaxpr, is_numeric, op_sources

__all__ = ["Body", "LoopTrace", "body_of", "carry_impls", "key_impl", "loop_kind", "numeric_carry"]

_KINDS = ("scan", "while", "cond")


def loop_kind(op: Op) -> str | None:
    """"scan", "while" or "cond" for a control-flow op, else None."""
    name = op.info.primitive
    return name if name in _KINDS else None


@dataclass(frozen=True)
class Body:
    """The program one iteration (or one branch) of ``op`` runs."""

    op: Op
    kind: str
    program: FlatProgram
    cond: FlatProgram | None = None  # while: the loop condition
    branch: int | None = None  # cond: which branch

    @property
    def params(self) -> dict[str, Any]:
        return self.op.eqn.params

    @property
    def n_carry(self) -> int:
        if self.kind == "scan":
            return scan_layout(self.params, len(self.op.eqn.invars))[1]
        if self.kind == "while":
            return len(self.op.eqn.outvars)
        return 0

    @property
    def trips(self) -> int | None:
        """The static trip count (scan), None when the data decides (while)."""
        return int(self.params["length"]) if self.kind == "scan" else None

    def carry_avals(self) -> list[Any]:
        return [v.aval for v in self.op.eqn.outvars[: self.n_carry]]

    def split(self, ins: Sequence[Any]) -> tuple[list, list, list]:
        """The loop op's operands as (constants of the body, initial carry, sliced inputs)."""
        ins = list(ins)
        if self.kind == "scan":
            nc, ncarry = scan_layout(self.params, len(ins))
            return ins[:nc], ins[nc:nc + ncarry], ins[nc + ncarry:]
        if self.kind == "while":
            cnc, bnc = int(self.params["cond_nconsts"]), int(self.params["body_nconsts"])
            return ins[cnc:cnc + bnc], ins[cnc + bnc:], []
        return [], [], ins[1:]

    def xs_index(self, t: int) -> int:
        """The slice of the scanned inputs (and stacked outputs) that execution step ``t`` uses."""
        trips = self.trips or 0
        return trips - 1 - t if self.kind == "scan" and self.params["reverse"] else t

    def iteration_inputs(self, ins: Sequence[Any], trace: LoopTrace, t: int) -> list[Any] | None:
        """The body's arguments at execution step ``t`` on one side, or None if not captured."""
        consts, _, xs = self.split(ins)
        if t >= trace.captured or any(c is None for c in trace.carries) or any(x is None for x in consts + xs):
            return None
        carry = [c[t] if impl is None else _wrap_key(c[t], impl)
                 for c, impl in zip(trace.carries, trace.impls or [None] * len(trace.carries))]
        j = self.xs_index(t)
        return list(consts) + carry + [np.asarray(x)[j] for x in xs]

    def iteration_outputs(self, outs: Sequence[Any], trace: LoopTrace, t: int) -> list[Any | None]:
        """The body's results at step ``t`` (the carry leaving it, then the scan's slices of its
        stacked outputs); an entry is None where that value was not captured."""
        n = self.n_carry
        if t + 1 < trace.captured:
            carry: list[Any | None] = [c[t + 1] if c is not None else None for c in trace.carries]
        elif t + 1 == trace.trips:
            carry = list(outs[:n])
        else:
            carry = [None] * n
        j = self.xs_index(t)
        ys = [None if y is None else np.asarray(y)[j] for y in outs[n:]] if self.kind == "scan" else []
        return carry + ys


@dataclass
class LoopTrace:
    """The carry entering each iteration of one loop along one path (execution order)."""

    carries: list[np.ndarray | None]  # per carry leaf, stacked [captured, ...]; None: not kept (a token)
    trips: int  # iterations the loop ran
    limit: int | None = None  # at most this many iterations are kept (a while loop's bounded buffer)
    # Per carry leaf, the PRNG implementation of a key carry (kept as its key data), else None.
    impls: list[str | None] = field(default_factory=list)

    @property
    def captured(self) -> int:
        lengths = [len(c) for c in self.carries if c is not None]
        return min([self.trips, *lengths]) if lengths else self.trips


_BODIES: OrderedDict[tuple[int, int | None], tuple[Any, Body]] = OrderedDict()


def body_of(op: Op, branch: int | None = None) -> Body:
    """The flattened body of a scan or while op, or branch ``branch`` of a cond (cached per op)."""
    key = (id(op.eqn), branch)
    hit = _BODIES.get(key)
    if hit is not None and hit[0] is op.eqn:
        return hit[1]
    kind = loop_kind(op)
    if kind is None:
        raise ValueError(f"op #{op.info.index} {op.info.primitive} is not a loop or branch")
    stack, outer = op.info.name_stack, op_sources(op)
    p = op.eqn.params
    if kind == "scan":
        body = Body(op, kind, flatten_jaxpr(p["jaxpr"], stack=stack, outer=outer))
    elif kind == "while":
        body = Body(op, kind, flatten_jaxpr(p["body_jaxpr"], stack=stack, outer=outer),
                    cond=flatten_jaxpr(p["cond_jaxpr"], stack=stack, outer=outer))
    else:
        b = int(branch or 0)
        body = Body(op, kind, flatten_jaxpr(p["branches"][b], stack=stack, outer=outer), branch=b)
    _BODIES[key] = (op.eqn, body)
    while len(_BODIES) > 64:
        _BODIES.popitem(last=False)
    return body


def key_impl(aval: Any) -> str | None:
    """The PRNG implementation's name for a key-typed abstract value, else None."""
    import jax

    dtype = getattr(aval, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return dtype._impl.name
    return None


def _wrap_key(data: Any, impl: str) -> Any:
    import jax

    return jax.random.wrap_key_data(jax.numpy.asarray(data), impl=impl)


def numeric_carry(body: Body) -> list[bool]:
    """Which carry leaves are kept per iteration: numbers, and PRNG keys (as their key data)."""
    return [is_numeric(a) or key_impl(a) is not None for a in body.carry_avals()]


def carry_impls(body: Body) -> list[str | None]:
    return [key_impl(a) for a in body.carry_avals()]
