"""Re-running a candidate change as the whole program, on the path and on the baseline: it holds where they
then agree, or stay apart only by what two roundings of the same math may (element by element)."""

from __future__ import annotations

from typing import Any


from ..context import Context
from ..judged import NEAR_ULP, as_accurate, within_noise
from ..mechanism.captured import with_op
from ..verdicts import Fix
from .candidates import Candidate

__all__ = ["NEAR_ULP", "as_accurate", "both", "recipe", "rerun_candidate", "within_noise"]

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
