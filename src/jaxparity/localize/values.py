"""Every op's values along one path.

``eager`` replays the flat program primitive by primitive (what ``jax.disable_jit`` runs);
``declared``/``f64`` go through the float64 interpreter; a compiled path (``jit``, ``export``,
``savedmodel`` and their options) compiles ONE program that also returns every intermediate and
runs it the path's own way. Returning intermediates can change what the compiler fuses, so the
compiled outputs are checked against the path's plain outputs and any disagreement is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ..paths import make_path
from ..pytree import host
from .program import FlatProgram, Op, is_numeric

__all__ = ["OpValues", "op_values"]


@dataclass
class OpValues:
    """Values of every recorded op output along one path (value id -> numpy array)."""

    path: str
    values: dict[int, np.ndarray]
    outputs: list[np.ndarray]
    notes: list[str]


def _bind(op: Op, ins: list[Any]) -> Sequence[Any]:
    out = op.eqn.primitive.bind(*ins, **op.eqn.params)
    return out if op.eqn.primitive.multiple_results else [out]


def _recorded(program: FlatProgram) -> list[int]:
    return [vid for op in program.ops for vid in op.outputs if vid is not None and is_numeric(program.avals[vid])]


def op_values(program: FlatProgram, spec: str, flat_args: Sequence[Any]) -> OpValues:
    """Run ``program`` along path ``spec`` and keep every op's outputs."""
    name = spec.split(":", 1)[0]
    if name == "eager":
        with jax.disable_jit():
            values = program.evaluate(flat_args, _bind)
        return _collect(program, spec, values, [])
    if name in ("declared", "f64"):
        from ..interpreter import evaluate_eqn

        np_args = [host(a) for a in flat_args]
        values = program.evaluate(np_args, lambda op, ins: evaluate_eqn(op.eqn, ins, mode=name))
        return _collect(program, spec, values, [])
    return _compiled(program, spec, flat_args)


def _collect(program: FlatProgram, spec: str, values: dict[int, Any], notes: list[str]) -> OpValues:
    keep = {vid: host(values[vid]) for vid in _recorded(program)}
    return OpValues(spec, keep, [host(x) for x in program.outputs(values)], notes)


def _compiled(program: FlatProgram, spec: str, flat_args: Sequence[Any]) -> OpValues:
    recorded = _recorded(program)

    def instrumented(*args: Any) -> tuple:
        values = program.evaluate(args, _bind)
        return tuple(program.outputs(values)), tuple(values[vid] for vid in recorded)

    path = make_path(spec)
    outs, inter = path.run(instrumented, tuple(flat_args))
    values = dict(zip(recorded, (host(x) for x in inter)))
    return OpValues(spec, values, [host(x) for x in outs], list(path.notes))
