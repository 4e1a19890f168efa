"""Candidate semantics checked on one diverging op's own captured inputs.

A whole-program flag re-run can change several things at once (``xla_backend_optimization_level=0``
removes FMA contraction and also changes ``tanh``'s expansion), so it proves a fix, not a cause. The
evidence here is local: the diverging op's inputs, as the path computed them, run through each
candidate semantics; a candidate that reproduces the path's output bit for bit, while the declared
semantics reproduce the baseline's, is the mechanism.

- ``fma``: an ``add``/``sub`` fed by a ``mul`` computed as one fused multiply-add (the product not
  rounded), for float32 and narrower results. Exact: the product of two float32 is exact in float64,
  the sum is rounded to odd in float64 (TwoSum), and rounding that to the result's dtype is then
  correctly rounded (Boldo and Melquiond, "When double rounding is odd", 2005).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..metrics import ulp_distance
from ..rounding import is_float_dtype, round_to_dtype

__all__ = ["SemanticsMatch", "fma_candidates", "fused_multiply_add", "region_fma"]


@dataclass(frozen=True)
class SemanticsMatch:
    """One candidate semantics applied to the diverging op's captured inputs."""

    name: str  # "fma"
    description: str  # "#7 mul fused into #8 sub: round(a*b - c) once"
    reproduces_path: bool  # bit for bit
    reproduces_baseline: bool
    max_ulp_to_path: int


def fused_multiply_add(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """a*b + c rounded once to ``dtype`` (float32 or narrower inputs)."""
    a64, b64, c64 = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    with np.errstate(all="ignore"):
        p = a64 * b64  # exact: 24 + 24 significant bits fit in 53
        s = p + c64
        bp = s - p
        e = (p - (s - bp)) + (c64 - bp)  # TwoSum: s + e == p + c exactly
        odd = (s.view(np.int64) & 1) == 1
        toward = np.nextafter(s, np.where(e > 0, np.inf, -np.inf))
        s = np.where((e != 0) & ~odd & np.isfinite(s), toward, s)  # round to odd
    return round_to_dtype(s, dtype)


_FUSABLE = {"add": 1.0, "sub": -1.0}


def fma_candidates(op: Any, ins: list[Any], producer_of: Callable[[Any], tuple[Any, list[Any]] | None],
                   path_out: np.ndarray, baseline_out: np.ndarray) -> tuple[SemanticsMatch, ...]:
    """For an add/sub with a float32-or-narrower result, each way one of its operands' ``mul`` could
    have been fused into it, checked against the path's and the baseline's outputs."""
    name = op.info.primitive
    dtype = np.dtype(path_out.dtype)
    if name not in _FUSABLE or dtype.kind != "f" or dtype.itemsize > 4 or len(ins) != 2:
        return ()
    out = []
    for pos in (0, 1):
        got = producer_of(op.inputs[pos])
        if got is None:
            continue
        mul, operands = got
        if mul.info.primitive != "mul" or len(operands) != 2 or any(x is None for x in operands):
            continue
        a, b = operands
        other = np.asarray(ins[1 - pos])
        a, b = np.asarray(a), np.asarray(b)
        if name == "sub" and pos == 1:  # other - a*b = (-a)*b + other
            a = -a.astype(np.float64)
        elif name == "sub":  # a*b - other
            other = -other.astype(np.float64)
        try:
            fused = fused_multiply_add(*np.broadcast_arrays(a, b, other), dtype).reshape(path_out.shape)
        except ValueError:
            continue
        u = ulp_distance(fused, path_out)
        what = (f"#{mul.info.index} mul fused into #{op.info.index} {name}: "
                + ("round(a*b - c)" if name == "sub" and pos == 0 else "round(c - a*b)" if name == "sub"
                   else "round(a*b + c)") + " rounded once")
        out.append(SemanticsMatch("fma", what, bool(np.all(u == 0)), bool(np.all(ulp_distance(fused, baseline_out) == 0)),
                                  int(np.where(u < 0, np.iinfo(np.int64).max, u).max(initial=0))))
    return tuple(out)


def region_fma(program: Any, ins: list[Any], path_outs: list[Any], base_outs: list[Any]) -> tuple[SemanticsMatch, ...]:
    """Where observing a region's ops one by one hides the difference (the compiler fused them): run
    the whole region (a loop body, a branch) with the declared semantics except that every add/sub fed
    by a mul is one fused multiply-add; contracting the first product operand, or the second, as a
    backend chooses for ``a*b - c*d``. Compared with the region's outputs as the path computed them."""
    from ..interpreter import evaluate_eqn

    producers = {vid: op for op in program.ops for vid in op.outputs if vid is not None}
    if not any(op.info.primitive in _FUSABLE and any(
            not hasattr(r, "val") and r in producers and producers[r].info.primitive == "mul" for r in op.inputs)
               for op in program.ops):
        return ()
    out = []
    for prefer in (0, 1):
        def apply(op: Any, vals: list[Any], values: dict[int, Any]) -> list[Any]:
            declared = [np.asarray(x) for x in evaluate_eqn(op.eqn, vals, mode="declared")]
            if op.info.primitive not in _FUSABLE or declared[0].dtype.kind != "f" or declared[0].dtype.itemsize > 4:
                return declared
            for pos in (prefer, 1 - prefer):
                ref = op.inputs[pos]
                made = producers.get(ref) if not hasattr(ref, "val") else None
                if made is None or made.info.primitive != "mul":
                    continue
                a, b = (x.val if hasattr(x, "val") else values.get(x, program.consts.get(x)) for x in made.inputs)
                other = np.asarray(vals[1 - pos], dtype=np.float64)
                a = np.asarray(a, dtype=np.float64)
                if op.info.primitive == "sub":
                    a, other = (-a, other) if pos == 1 else (a, -other)
                try:
                    fused = fused_multiply_add(*np.broadcast_arrays(a, np.asarray(b, np.float64), other), declared[0].dtype)
                except ValueError:
                    return declared
                return [fused.reshape(declared[0].shape)]
            return declared

        values: dict[int, Any] = dict(program.consts)
        values.update(zip(program.arg_ids, ins))
        for op in program.ops:
            vals = [x.val if hasattr(x, "val") else values[x] for x in op.inputs]
            for vid, o in zip(op.outputs, apply(op, vals, values)):
                if vid is not None:
                    values[vid] = o
        got = [x.val if hasattr(x, "val") else values[x] for x in program.out_ids]
        worst, same_path, same_base, compared = 0, True, True, 0
        for g, p, b in zip(got, path_outs, base_outs):
            if p is None or not (np.asarray(p).dtype.kind == "c" or is_float_dtype(np.asarray(p).dtype)):
                continue  # bfloat16 and float8 are compared (numpy kind 'V'); integers hold no rounding
            compared += 1
            g = np.asarray(g).astype(np.asarray(p).dtype)
            u = ulp_distance(g, np.asarray(p))
            worst = max(worst, int(np.where(u < 0, np.iinfo(np.int64).max, u).max(initial=0)))
            same_path &= bool(np.all(u == 0))
            same_base &= b is not None and bool(np.all(ulp_distance(g, np.asarray(b)) == 0))
        if not compared:  # no output to reproduce: no evidence either way
            same_path = same_base = False
        which = "the first" if prefer == 0 else "the second"
        out.append(SemanticsMatch("fma", f"the region computed with every product feeding an add/sub fused into it "
                                  f"(one rounding; {which} product where both operands are products)",
                                  same_path, same_base, worst))
    return tuple(out)
