"""Two environments' programs op by op: each side's per-op values captured by its own worker (its own
JAX traced the function, its own path ran it), the ops aligned by provenance, and the first op whose
output differs while its inputs agree bit for bit.

Two JAX versions can trace the same function into different jaxprs (a primitive renamed, a helper
decomposed otherwise), so ops are not matched by index but by provenance: primitive, the user's line
that led to it, and the input and output types (``key``), aligned in program order as the longest
common subsequence (difflib). Ops with no partner are counted, never compared.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .localizer import bitwise_equal
from .program import OpInfo

__all__ = ["CapturedOp", "Departure", "align", "capture_ops", "first_departure"]


@dataclass(frozen=True)
class CapturedOp:
    """One op of a program and its outputs along one path (None where not captured)."""

    info: OpInfo
    outputs: tuple[Any, ...]

    @property
    def key(self) -> tuple:
        return (self.info.primitive, self.info.user_source or self.info.source, self.info.inputs, self.info.outputs)


def capture_ops(fn: Callable[..., Any], args: tuple, spec: str) -> list[CapturedOp]:
    """Every op of ``fn`` as this environment's JAX traces it, with its outputs along path ``spec`` here."""
    import jax

    from .program import flatten
    from .values import op_values

    program = flatten(fn, args)
    values = op_values(program, spec, jax.tree_util.tree_leaves(args))
    return [CapturedOp(op.info, tuple(values.values.get(v) if v is not None else None for v in op.outputs))
            for op in program.ops]


def align(a: Sequence[CapturedOp], b: Sequence[CapturedOp]) -> dict[int, int]:
    """Op index of ``a`` -> op index of ``b``, for the ops aligned by provenance."""
    matcher = difflib.SequenceMatcher(None, [o.key for o in a], [o.key for o in b], autojunk=False)
    return {i + k: j + k for i, j, n in matcher.get_matching_blocks() for k in range(n)}


def _same(x: Any, y: Any) -> bool:
    return x is not None and y is not None and bitwise_equal(x, y)


def _show(v: Any) -> str:
    v = np.asarray(v)
    return f"{float(v):.9g}" if v.dtype.kind == "f" or v.dtype.name == "bfloat16" else str(v.item())


@dataclass(frozen=True)
class Departure:
    """Where two environments' values part: ``op`` (of the path's program) is the first aligned op whose
    output differs; ``local`` where every input of it is an argument, a literal or an aligned op's output
    that agrees bit for bit (the op itself computes otherwise), else the divergence arrived with an input."""

    op: OpInfo
    base_op: OpInfo
    n_differ: int
    size: int
    local: bool
    aligned: int  # ops aligned
    path_ops: int
    base_ops: int
    example: tuple[str, str, str] | None = None  # (element, path value, baseline value)


def _inputs_agree(op: CapturedOp, path: Sequence[CapturedOp], base: Sequence[CapturedOp],
                  pairs: dict[int, int]) -> bool:
    for ref in op.info.operands:
        if not ref.startswith("op"):
            continue  # an argument (shared bit for bit), a literal or a constant
        index, _, out = ref[2:].partition(":")
        i, k = int(index), int(out or 0)
        j = pairs.get(i)
        if j is None or not _same(path[i].outputs[k], base[j].outputs[k]):
            return False
    return True


def first_departure(path: Sequence[CapturedOp], base: Sequence[CapturedOp]) -> Departure | None:
    """The first aligned op whose own inputs agree and whose output does not (else the first aligned op whose
    output differs at all); None where every aligned op agrees bit for bit."""
    pairs = align(path, base)
    first: Departure | None = None
    for i in sorted(pairs):
        p, b = path[i], base[pairs[i]]
        differing = [(k, x, y) for k, (x, y) in enumerate(zip(p.outputs, b.outputs))
                     if x is not None and y is not None and not _same(x, y)]
        if not differing:
            continue
        k, x, y = differing[0]
        x, y = np.asarray(x), np.asarray(y)
        diff = x != y if x.shape == y.shape else np.ones(x.shape, bool)
        at = np.unravel_index(int(np.argmax(diff)), x.shape) if x.shape == y.shape and x.size else ()
        example = ((str(list(map(int, at))), _show(x[at]), _show(y[at])) if x.shape == y.shape and x.size else None)
        local = _inputs_agree(p, path, base, pairs)
        found = Departure(p.info, b.info, int(diff.sum()), int(x.size), local, len(pairs), len(path), len(base),
                          example)
        if local:
            return found
        first = first or found
    return first
