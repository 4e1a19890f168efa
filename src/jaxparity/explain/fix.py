"""Stage 6, fix: the fixes the confirmed causes proved (each verified by its re-run), a cause's flag said in the
terms of the cause shown, the model-side fix where a narrow rounding was skipped (``round_like_declared``, re-run
on both sides), each verified fix with its measured run-time cost; and the closest partial fix, whose remainder
the pipeline explains next."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..paths import make_path
from .causes import CAUSES
from .context import Context
from .measure import OUTCOMES, distance
from .mechanism.widened import widened_side
from .verdicts import CauseVerdict, Fix

__all__ = ["MAX_PEEL", "closest_partial", "verify_fixes", "with_cost"]

MAX_PEEL = 2  # causes peeled after the first: a fix that only partly restores parity is applied, the rest explained


def verify_fixes(ctx: Context, causes: list[CauseVerdict]) -> list[Fix]:
    """The fixes of the confirmed causes, in the table's order, each with its cost where it is verified."""
    from ..report.format import explaining_cause, is_rerun, short_title

    fixes = []
    serving = ctx.path.xla_option_kind == "serving flag"
    loc = ctx.localization
    main = explaining_cause(causes, loc.lead if loc is not None else None)
    # A cause shown on the diverging op's own values: a flag re-run that restores parity proves it, and
    # the fix shown is that cause's (not the generic text of the flag's own cause, e.g. algsimp's x * (1/c)).
    shown = main if main is not None and not is_rerun(main) and main.cause != "unknown" else None
    for verdict in causes:
        if verdict.status == "confirmed" and verdict.proof is not None:
            fixes.append(verdict.proof)
            continue
        if verdict.status != "confirmed" or not verdict.experiment.startswith("re-ran "):
            continue
        spec = verdict.experiment.removeprefix("re-ran ").split(" with ")[0]
        description = verdict.fix or ""
        cause = next((c for c in CAUSES if c.id == verdict.cause), None)
        flags = [f"{k}={v}" for k, v in cause.options] if cause is not None else []
        if shown is not None and shown.cause != verdict.cause and flags:
            if shown.fix and all(f in shown.fix for f in flags):
                description = shown.fix
            else:
                how = (f"serve with XLA_FLAGS={' '.join('--' + f for f in flags)}" if serving
                       else f"compile with {', '.join(flags)}")
                description = (f"{how}: with it {ctx.path} matches {ctx.baseline} (it turns off the "
                               f"{short_title(verdict.title)} behind this)")
        fixes.append(Fix("serving flag" if serving else "compile option", description, spec,
                         True, verdict.evidence, rerun=verdict.rerun))
    narrow = {"excess-precision", "narrow-rounding-skipped"}
    if any(v.cause in narrow and v.status in ("confirmed", "partly") for v in causes):
        if ctx.path.has("observed"):  # outputs from a file cannot be re-run
            fixes.append(Fix("serving flag", "XLA_FLAGS=--xla_allow_excess_precision=false on the serving system",
                             None, False, f"{ctx.path} cannot be re-run from here: set the flag on the system that "
                             "produced it and compare again"))
        fixes.append(_rounded_like_declared(ctx))
    return [with_cost(ctx, f) for f in fixes]


def _rounded_like_declared(ctx: Context) -> Fix:
    """``round_like_declared(fn)`` re-run on the path (on the system that stands in for it, where its outputs
    were read from a file) and, where the baseline is the side that skipped the rounding, on the baseline."""
    from ..fixes import round_like_declared
    from ..paths.staging import reused

    # Outputs from a file cannot be re-run: the model-side fix is shown on the path that stands in for it.
    target = ctx.path.stand_in or ctx.path.spec
    # One wrapper per model while compile_once() is active: a sweep worker compiles it once.
    fixed = reused("fixed model", (id(ctx.fn),), ctx.fn, lambda: round_like_declared(ctx.fn))
    outs = ctx.run(target, fixed)
    # where the baseline is the side that skipped the rounding, it runs the fixed model too
    theirs = (ctx.run(ctx.baseline, fixed) if any(widened_side(c, ctx) == "baseline" for c in CAUSES)
              else ctx.base_out)
    if isinstance(outs, str) or isinstance(theirs, str):
        failed, where = (outs, target) if isinstance(outs, str) else (theirs, str(ctx.baseline))
        return Fix("model change", "jaxparity.fixes.round_like_declared(fn)", None, False,
                   f"the fixed model failed on {where}: {failed}")
    if theirs is ctx.base_out:
        rerun, result = ctx.measured(outs)
    else:
        rerun = ctx.compare(outs, theirs)
        result = next(k for k, v in OUTCOMES.items() if v == rerun.outcome)
    (n, worst, gap), before = rerun.after, rerun.before
    return Fix("model change", "wrap the model with jaxparity.fixes.round_like_declared(fn): it "
               "inserts lax.reduce_precision where the program declares a bf16/f16 rounding, so "
               "every compiler keeps it; no flag needed", f"{target} [fixed model]", n == 0,
               f"{target} on the fixed model " + (
                   ("equals " + str(ctx.baseline) if theirs is ctx.base_out else
                    f"equals {ctx.baseline} on the fixed model") if n == 0 else
                   f"still differs from {ctx.baseline} in {n} elements (max {worst} ULP, max abs {gap:.3g}; "
                   f"before: {before[0]}, max {before[1]} ULP, max abs {before[2]:.3g}){result}"),
               rerun=rerun)


def with_cost(ctx: Context, fix: Fix) -> Fix:
    """A verified fix with its run-time cost: the fixed path (or fixed model) against the path as it was,
    each warm, timed interleaved (``execution.timing``), where the path can time a call apart from
    compiling it (jit, export). A cost within the timing's own spread is reported as 0."""
    from ..execution.timing import relative_cost

    if not fix.verified or not fix.spec:
        return fix
    spec, _, label = fix.spec.partition(" [")
    fixed_fn = ctx.models.get(label.removesuffix("]"), ctx.fn) if label else ctx.fn
    try:
        after = make_path(spec).warm_call(fixed_fn, ctx.args)
        before = make_path(ctx.path.spec).warm_call(ctx.fn, ctx.args) if after is not None else None
        cost = relative_cost(after, before) if after is not None and before is not None else None
    except Exception:  # the cost is extra: a fix stays verified without it
        return fix
    if cost is None:
        return fix  # not timed here, or a call this short is timing noise, not a cost
    return dataclasses.replace(fix, cost=round(cost.ratio, 3) if cost.measurable else 0.0)


def fixed_side(ctx: Context, spec: str) -> str:
    """Which side a fix's re-run changes: "baseline" where it runs on the baseline's device and not the path's
    (the accelerator's matmul precision, where the baseline computed there and the path on the host), else
    "path"."""
    try:
        device = make_path(spec).device()
        return "baseline" if device == ctx.baseline.device() != ctx.path.device() else "path"
    except Exception:  # a spec that does not parse here: the path's, as every other fix
        return "path"


def closest_partial(ctx: Context, causes: Sequence[CauseVerdict], fixes: Sequence[Fix],
                    depth: int) -> tuple[str, list[np.ndarray], str] | None:
    """The closest partial fix (a re-run that moved the path closer to the baseline without reaching it), as
    the spec that applies it, its outputs and the side it changes (``fixed_side``): what remains after it is
    explained next. None when a fix restores parity, none moved it, or ``MAX_PEEL`` causes have been peeled."""
    if depth >= MAX_PEEL or any(f.verified for f in fixes):
        return None
    # The explaining causes' own fixes first (the fix the short explanation shows, ◐), then the re-runs of
    # causes that only partly explain: of two that narrow as far, the one the reader was shown is peeled.
    specs = [v.proof.spec for v in causes if v.proof is not None and not v.proof.verified and v.proof.spec
             and "[" not in v.proof.spec]  # a model change is not a path to explain
    specs += [v.experiment.removeprefix("re-ran ") for v in causes
              if v.status == "partly" and v.experiment.startswith("re-ran ")]
    before = distance(ctx.path_out, ctx.base_out)[0]
    best: tuple[int, str, list[np.ndarray], str] | None = None
    proofs = {v.proof.spec: v.proof for v in causes if v.proof is not None and v.proof.spec}
    for spec in dict.fromkeys(specs):
        outs = ctx.runs.get(spec)
        if not isinstance(outs, list):
            continue
        side = fixed_side(ctx, spec)
        if side == "baseline":  # the baseline re-run: the path against it, as the proof's own re-run measured
            rerun = proofs[spec].rerun if spec in proofs else None
            n = distance(ctx.path_out, outs)[0]
            narrows = rerun is not None and rerun.outcome == "narrows"
        else:  # a fix that narrows the difference (in every measure), as its sentence says
            n = distance(outs, ctx.base_out)[0]
            narrows = ctx.measured(outs)[0].outcome == "narrows"
        if 0 < n <= before and narrows and (best is None or n < best[0]) and not _only_rounding(ctx, outs, side):
            best = (n, spec, outs, side)
    return None if best is None else best[1:]


def _only_rounding(ctx: Context, outs: list[np.ndarray], side: str) -> bool:
    """The re-run moved its side by no more than correct implementations of the program's ops may differ by (a
    host flag that moves a result by 1 ULP): no partial fix, and nothing to peel after it (``explain.noise``)."""
    from .noise import within_rounding

    try:
        return within_rounding(ctx.program, ctx.flat_args, ctx.base_out if side == "baseline" else ctx.path_out,
                               outs) is not None
    except Exception:  # noqa: BLE001 - unjudged: peeled as before
        return False
