"""A cause decided by the known variants of the diverging op (``interpreter.variants``): each variant run on
the op's own captured inputs; the one that reproduces the path's values wherever the path departs from the
baseline (beyond a math library's few ULP) is the mechanism named, with the elements it shows, and its
model-side rewrite, which gives one result under every variant, is re-run on the path and the baseline.
"Wrong code" is said only where no variant reproduces the values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...rounding import is_float_dtype
from ..causes import Cause
from ..context import Context, first_line
from ..verdicts import CauseVerdict
from .captured import differing_output, model_change, named, op_inputs, show, where, with_op
from .op_rules import MATH_LIBRARY_ULP

__all__ = ["decide_variant", "known_variants"]


def _departs(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Where the path departs from the baseline by more than rounding: every differing element of an integer
    or boolean, beyond a math library's few ULP for floats."""
    from ...localize.localizer import values_equal
    from ...metrics import ulp_distance

    if values_equal(mine, theirs):
        return np.zeros(mine.shape, bool)
    u = ulp_distance(mine, theirs)
    if mine.dtype.kind in "iub":
        return u != 0
    return (u < 0) | (u > MATH_LIBRARY_ULP)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit, but a NaN is a NaN whatever its sign and payload (no runtime promises those)."""
    if a.dtype.kind == "c" or is_float_dtype(a.dtype):  # bfloat16, float8: numpy kind 'V'
        nan = np.isnan(a) & np.isnan(b)
        return a[~nan].tobytes() == b[~nan].tobytes() and bool(np.all(np.isnan(a) == np.isnan(b)))
    return a.tobytes() == b.tobytes()


def decide_variant(cause: Cause, ctx: Any) -> CauseVerdict | None:
    from ...interpreter import evaluate_eqn
    from ...interpreter.variants import VARIANTS

    if ctx.path_vals is None or ctx.base_vals is None or ctx.localization is None:
        return None
    for d in named(ctx.localization):
        variants = VARIANTS.get(d.op.primitive, ())
        found = differing_output(ctx, d) if variants else None
        if found is None:
            continue
        vid, mine, theirs = found
        op = ctx.program.ops[d.op.index]
        position = [v for v in op.outputs if v is not None].index(vid)
        ins = [np.asarray(x) for x in op_inputs(ctx, d)]
        try:
            declared = np.asarray(evaluate_eqn(op.eqn, ins, mode="declared")[position])
        except Exception:  # noqa: BLE001 - the reference cannot run this op: no variant can be judged
            continue
        far = _departs(mine, theirs)
        if not far.any():
            continue
        for v in variants:
            params = dict(op.eqn.params)
            got = v.compute(params, ins, declared)
            if got is None or got.shape != mine.shape or got.dtype != mine.dtype:
                continue
            unknown = np.zeros(mine.shape, bool)
            if v.undetermined is not None:
                undetermined = v.undetermined(params, ins, declared)
                if undetermined is None or not (far & undetermined).any():
                    continue  # the variant's own elements are not where the path departs
                unknown = undetermined
            known = far & ~unknown
            if not _same_bits(got[known], mine[known]):
                continue
            i = tuple(int(k) for k in np.argwhere(far & unknown if v.undetermined is not None else far)[0])
            return _verified(cause, ctx, d, v, f"each known variant of {d.op.primitive} on the captured inputs of "
                             f"{where(d)}", _seen(ctx, d, v, ins, i, mine, theirs, declared, far, unknown))
    return None


def _seen(ctx: Any, d: Any, v: Any, ins: list[np.ndarray], i: tuple[int, ...], mine: np.ndarray,
          theirs: np.ndarray, declared: np.ndarray, far: np.ndarray, unknown: np.ndarray) -> str:
    """What the variant shows: one element, its inputs and each side's value, and how many it reproduces."""
    op = ctx.program.ops[d.op.index]
    at = v.inputs_words(dict(op.eqn.params), ins, i) if v.inputs_words is not None else None
    at = at or "(" + ", ".join(show(np.broadcast_to(x, mine.shape)[i]) if x.ndim else show(x) for x in ins) + ")"
    n = int(far.sum())
    elements = f"{n} element{'s' if n != 1 else ''}"
    seen = (f"{ctx.path} {v.does}: at element {list(i)}, {at} gives {show(mine[i])} on {ctx.path}, where "
            f"{d.op.primitive} declares {show(declared[i])} ({ctx.baseline}: {show(theirs[i])}); ")
    if v.undetermined is not None:
        return seen + (f"all {elements} where it departs are where {v.name} leave the value to memory, and it "
                       f"agrees bit for bit elsewhere")
    where_ = f"the {elements}" if n == 1 else f"all {elements}"
    return seen + f"the {v.name} reproduces {ctx.path}'s values in {where_} where it departs"


def _verified(cause: Cause, ctx: Any, d: Any, variant: Any, what: str, seen: str) -> CauseVerdict:
    """The variant's rewrite in place of the op, re-run on the path and the baseline."""
    remedy = f"{variant.fix} (at {d.op.user_source or d.op.source or 'the op'})"
    if variant.rewrite is None:
        return CauseVerdict(cause.id, cause.title, "confirmed", what, seen, remedy)

    def instead(op: Any, ins: list[Any]) -> list[Any]:
        kw = {k: op.eqn if k == "eqn" else op.eqn.params[k] for k in variant.takes}
        return [variant.rewrite(*ins, **kw)]

    return model_change(cause, ctx, what, seen, remedy, with_op(ctx.program, d.op.index, instead),
                        f"{variant.name} rewritten", "with the rewrite")


def known_variants(cause: Cause, ctx: Context) -> CauseVerdict:
    """Decided by the op's known variants on its own inputs (``decide_variant``)."""
    try:
        verdict = decide_variant(cause, ctx)
    except Exception as e:  # evidence, never the end of the explanation
        return CauseVerdict(cause.id, cause.title, "not run", "the diverging op's known variants",
                            f"the variants could not be run ({first_line(e)})")
    if verdict is None:
        return CauseVerdict(cause.id, cause.title, "not run", "the diverging op's known variants",
                            "no diverging op has a known variant that reproduces its values")
    return verdict
