"""Re-running a candidate change as the whole program, on the path and on the baseline: it holds where they
then agree, or stay apart only by what two roundings of the same math may (element by element)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import Context
from ..mechanism.captured import with_op
from ..verdicts import Fix
from .candidates import Candidate

__all__ = ["NEAR_ULP", "as_accurate", "both", "recipe", "rerun_candidate", "within_noise"]

NEAR_ULP = 4  # ULP apart that any two roundings of the same math may be, whatever the baseline's own error


def both(ctx: Context, fixed: Any, label: str) -> tuple[Any, Any] | str:
    """The changed model's outputs on the path and on the baseline, or where and why it failed."""
    mine = ctx.run(ctx.path, fixed, label)
    if isinstance(mine, str):
        return f"on {ctx.path}: {mine}"
    theirs = ctx.run(ctx.baseline, fixed, label)
    if isinstance(theirs, str):
        return f"on {ctx.baseline}: {theirs}"
    return mine, theirs


def recipe(ops: list[int], cand: Candidate, trigger: str | None, cands: list[Candidate]) -> dict | None:
    """How ``--write-fixed`` applies the candidate again (``fixes.searched``): by name among the candidates the
    op and the trigger's words give; None for a remap of captured values, which no name rebuilds."""
    if not any(c is cand for c in cands):
        return None
    return {"ops": ops, "candidate": cand.name, "trigger": trigger}


def rerun_candidate(ctx: Context, cand: Candidate, index: int | set[int], label: str, line: str, trigger: Any,
          recipe: dict | None = None) -> Fix:
    """The candidate in place of op ``index``, re-run as the whole program on the path and the baseline. The
    recipe is kept whatever the outcome (``jaxparity reduce`` applies a narrowing change to the op it isolates,
    and says what the whole case measured for one it finds again)."""
    fixed = with_op(ctx.program, index, cand.instead)
    description = f"{cand.code} (at {line})"
    outs = both(ctx, fixed, label)
    if isinstance(outs, str):
        return Fix("model change", description, None, False, f"{cand.name}: the rewritten model failed {outs}",
                   recipe=recipe, ran=True)
    measured = ctx.compare(outs[0], outs[1])
    (n0, u0, _), (n1, u1, _) = measured.before, measured.after
    said = f"re-ran {ctx.path} and {ctx.baseline} with {cand.name}"
    guard = (f"; it changes the result where {trigger.predicate} ({trigger.differing} elements), by design"
             if cand.kind == "guard" and trigger is not None else "")
    if measured.outcome == "parity":
        return Fix("model change", description, f"{ctx.path} [{label}]", True,
                   f"{said}: they agree (were {n0} elements apart){guard}", rerun=measured, recipe=recipe)
    if as_accurate(ctx, measured, outs[0], outs[1], fixed):
        p0, p1, _, b1 = measured.ideal or (0.0, 0.0, 0.0, 0.0)
        return Fix("model change", description, f"{ctx.path} [{label}]", True,
                   f"{said}: {n0} → {n1} elements differ, max {u0} → {u1} ULP, within the rewritten program's own "
                   f"rounding noise: {ctx.path}'s max abs error against the f64 ideal {p0:.3g} → {p1:.3g}, "
                   f"{ctx.baseline}'s {b1:.3g}{guard}", rerun=measured, recipe=recipe)
    judged = within_noise(ctx, fixed, measured, outs[0], outs[1])
    if judged is not None:
        return Fix("model change", description, f"{ctx.path} [{label}]", True,
                   f"{said}: {n0} → {n1} elements differ, max {u0} → {u1} ULP: within the rounding noise the triage "
                   f"judges by (at most {judged.share:.0%} of what correct implementations of the rewritten "
                   f"program's ops may differ by){guard}", rerun=measured, recipe=recipe)
    return Fix("model change", description, None, False,
               f"{cand.name}: {said}: they still differ in {n1} elements, max {u1} ULP (were {n0}, max {u0} ULP)",
               rerun=measured, recipe=recipe)


def within_noise(ctx: Context, fixed: Any, rerun: Any, mine: Any, theirs: Any) -> Any:
    """The triage's own judgement (``noise.within_rounding``) of a change that brought the two sides closer, on the
    rewritten program: a ``Rounding`` where what is left is no more than correct implementations of its ops may
    differ by; None where it is more, the change moved them no closer, or the program cannot be judged."""
    from ...localize.program import flatten
    from ..noise import within_rounding

    if rerun.outcome != "narrows":
        return None
    try:
        program = ctx.program if fixed is None else flatten(fixed, ctx.args)
        return within_rounding(program, ctx.flat_args, mine, theirs)
    except Exception:  # noqa: BLE001 - no judgement: the stricter element-wise one above stands
        return None


def as_accurate(ctx: Context, rerun: Any, mine: Any, theirs: Any, fixed: Any = None) -> bool:
    """A change after which the paths stay apart only by rounding: the difference narrowed, and at every element
    where they still differ, the path is no further from the baseline than twice the baseline's own distance to
    the f64 ideal there, or a few ULP (``NEAR_ULP``): one implementation's error, element by element, not a
    maximum over the output that a large value's rounding would let a small value's wrong result hide under.
    And the triage's own judge agrees (``within_noise`` on ``fixed``, the changed function; the case's own program
    where the change is a setting): a few ULP everywhere can still be beyond what correct implementations of the
    program may differ by, and then a compare of the changed case would say so."""
    from ...metrics import ulp_distance

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
    return within_noise(ctx, fixed, rerun, mine, theirs) is not None
