"""The judges a change's re-run is held to, wherever it is made (the fix search, a cause's own fix): the two sides
then agree, or stay apart only by rounding, element by element and by the triage's own judge on the changed
program, with no value one side loses entirely."""

from __future__ import annotations

from typing import Any

import numpy as np

from .context import Context

__all__ = ["NEAR_ULP", "as_accurate", "lost_values", "within_noise"]

NEAR_ULP = 4  # ULP apart that any two roundings of the same math may be, whatever the baseline's own error


def within_noise(ctx: Context, fixed: Any, rerun: Any, mine: Any, theirs: Any) -> Any:
    """The triage's own judgement (``noise.within_rounding``) of a change that brought the two sides closer, on the
    rewritten program: a ``Rounding`` where what is left is no more than correct implementations of its ops may
    differ by; None where it is more, the change moved them no closer, or the program cannot be judged."""
    from ..localize.program import flatten
    from .noise import within_rounding

    if rerun.outcome != "narrows":
        return None
    ideal = ctx.run("f64")
    if not isinstance(ideal, str) and lost_values(mine, theirs, ideal):
        return None
    try:
        program = ctx.program if fixed is None else flatten(fixed, ctx.args)
        return within_rounding(program, ctx.flat_args, mine, theirs)
    except Exception:  # noqa: BLE001 - no judgement: the stricter element-wise one above stands
        return None


def lost_values(mine: Any, theirs: Any, ideal: Any) -> bool:
    """Does one side lose a value entirely where the other keeps it: 0 where the math, rounded to the dtype, and
    the other side are not (a subnormal flushed upstream)? That is no rounding, however small against the output."""
    from ..rounding import round_to_dtype

    for m, t, f in zip(mine, theirs, ideal):
        m, t, f = np.asarray(m), np.asarray(t), np.asarray(f)
        if m.shape != t.shape or t.shape != f.shape or m.dtype.kind not in "fV" or t.dtype != m.dtype:
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            wm, wt, wf = (x.astype(np.float64) for x in (m, t, f))
            representable = round_to_dtype(np.where(np.isfinite(wf), wf, 0.0), m.dtype).astype(np.float64) != 0
            if np.any((wm != wt) & ((wm == 0) != (wt == 0)) & representable):
                return True
    return False


def as_accurate(ctx: Context, rerun: Any, mine: Any, theirs: Any, fixed: Any = None) -> bool:
    """A change after which the paths stay apart only by rounding: the difference narrowed, and at every element
    where they still differ, the path is no further from the baseline than twice the baseline's own distance to
    the f64 ideal there, or a few ULP (``NEAR_ULP``): one implementation's error, element by element, not a
    maximum over the output that a large value's rounding would let a small value's wrong result hide under.
    And the triage's own judge agrees (``within_noise`` on ``fixed``, the changed function; the case's own program
    where the change is a setting): a few ULP everywhere can still be beyond what correct implementations of the
    program may differ by, and then a compare of the changed case would say so."""
    from ..metrics import ulp_distance

    if rerun.outcome != "narrows":
        return False
    ideal = ctx.run("f64")
    if isinstance(ideal, str) or len(ideal) != len(mine):
        return False
    for m, t, f in zip(mine, theirs, ideal):
        m, t, f = np.asarray(m), np.asarray(t), np.asarray(f)
        if m.shape != t.shape or t.shape != f.shape or m.dtype.kind not in "fV" or t.dtype != m.dtype:
            if not (m.shape == t.shape and m.tobytes() == t.tobytes()):
                return False
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            u = ulp_distance(m, t)
            wm, wt, wf = (x.astype(np.float64) for x in (m, t, f))
            own = np.abs(wt - wf)
            # an inf is never a few ULP from the largest float, nor a baseline that is inf a floor for anything
            same_kind = np.isfinite(wm) == np.isfinite(wt)
            near = (u >= 0) & (u <= NEAR_ULP) & same_kind
            within = same_kind & (np.abs(wm - wt) <= 2 * np.where(np.isfinite(own), own, 0.0))
        if not np.all(near | within):
            return False
    if lost_values(mine, theirs, ideal):
        return False
    return within_noise(ctx, fixed, rerun, mine, theirs) is not None
