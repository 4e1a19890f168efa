"""``well-conditioned``: blame found many small divergences amplified by an op of a recognised ill-conditioned
form (a one-pass variance): that form is rewritten in its well-conditioned one (``jaxparity.fixes.well_conditioned``)
and the path, the baseline and f64 re-run on it; confirmed when the two paths then agree within the fixed
program's own rounding noise."""

from __future__ import annotations

from typing import Any

from ...metrics import max_gaps
from ..causes import Cause
from ..context import Context, first_line
from ..measure import NARROWS
from ..verdicts import CauseVerdict, Fix, Status

__all__ = ["EVERY_SITE", "WELL_CONDITIONED", "rewritten"]

WELL_CONDITIONED = "well-conditioned model"
EVERY_SITE = "well-conditioned model, every site"


def rewritten(cause: Cause, ctx: Context) -> CauseVerdict:
    """Where blame found small divergences amplified by a recognised ill-conditioned form: rewrite that form
    (``fixes.well_conditioned``), re-run the path, the baseline and f64 on it, and judge the remaining
    difference against the fixed program's own rounding noise (the baseline's distance to f64)."""
    from ...fixes import REMEDIES

    blame = ctx.localization.blame if ctx.localization is not None else None
    amp = blame.amplifier if blame is not None else None
    if amp is None:
        return CauseVerdict(cause.id, cause.title, "not run", "", "no small divergence is amplified by an op "
                            "downstream")
    if amp.pattern is None:
        return measured(cause, ctx, amp)
    at = [amp.where] if ":" in amp.where else None
    # the amplifier's own form where the rewrite names it so (not every other form written at that line)
    forms = [f for f in REMEDIES if amp.pattern.startswith(f)] or None
    # at the amplifier's line first; then every site of that form (x − mean(x) inside jnp.var and again after it)
    scopes = [(at, WELL_CONDITIONED)] + ([(None, EVERY_SITE)] if at is not None and forms is not None else [])
    rank = {"confirmed": 0, "partly": 1, "refuted": 2, "not run": 3}
    tried: list[CauseVerdict] = []
    for where, label in scopes:
        tried.append(_rewritten_at(cause, ctx, amp, where, forms, label))
        if tried[-1].status == "confirmed":
            break
    return min(tried, key=lambda v: rank.get(v.status, 4))  # the first of the best


def _rewritten_at(cause: Cause, ctx: Context, amp: Any, at: list[str] | None, forms: list[str] | None,
                  label: str) -> CauseVerdict:
    """The amplifier's form rewritten at ``at`` (None: every site of ``forms``), re-run on the path, the baseline
    and f64 as the model change ``label``, and judged."""
    from ...fixes import rewrites, well_conditioned
    from ...paths.staging import reused

    what = f"rewrote #{amp.index} {amp.primitive} ({amp.where}) in its well-conditioned form" + (
        "" if at is not None else ", and every other site of that form")
    try:
        sites = rewrites(ctx.fn, ctx.args, at=at, forms=forms)
    except Exception as e:
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the program could not be rewritten ({first_line(e)})")
    if not sites:
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{amp.pattern} is not written in a form the "
                            "rewrite recognises there (masked or cross-device means are not)")
    fixed = reused(label, (id(ctx.fn), amp.where), ctx.fn, lambda: well_conditioned(ctx.fn, at=at, forms=forms))
    what += f" ({len(sites)} site{'s' if len(sites) > 1 else ''}: {', '.join(sites[:3])}); ran {ctx.path}, " \
            f"{ctx.baseline} and f64 on it"
    mine, theirs, ideal = (ctx.run(spec, fixed, label) for spec in (ctx.path.spec, ctx.baseline.spec, "f64"))
    ideal_before = ctx.run("f64")
    if isinstance(mine, str) or isinstance(theirs, str) or isinstance(ideal, str):
        failed = next(f"{spec}: {o}" for spec, o in zip((ctx.path.spec, ctx.baseline.spec, "f64"), (mine, theirs, ideal))
                      if isinstance(o, str))
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the rewritten program failed ({failed})")
    from ..judged import as_accurate, within_noise

    before, worst = max(max_gaps(ctx.path_out, ctx.base_out)), max(max_gaps(mine, theirs))
    mine_err, base_err = max_gaps(mine, ideal), max_gaps(theirs, ideal)
    # Rounding noise as the fix search and the triage judge it on the rewritten program: element by element (the path
    # no farther from the baseline than twice the baseline's own error there, or a few ULP), no value lost, and
    # within what correct implementations of its ops may differ by
    rerun = ctx.compare(mine, theirs)
    within = rerun.outcome == "parity" or as_accurate(ctx, rerun, mine, theirs, fixed) or \
        within_noise(ctx, fixed, rerun, mine, theirs) is not None
    were = ""
    if not isinstance(ideal_before, str):
        were = (f" (were {max(max_gaps(ctx.path_out, ideal_before)):.3g} and "
                f"{max(max_gaps(ctx.base_out, ideal_before)):.3g})")
    words = (f"on {ctx.path} the difference from {ctx.baseline} falls from {before:.3g} to {worst:.3g} (max abs); "
             f"{ctx.path} is then {max(mine_err):.3g} and {ctx.baseline} {max(base_err):.3g} from the f64 ideal{were}"
             f": {'within' if within else 'beyond'} the rewritten program's own rounding noise")
    if worst >= before:
        words = words.replace(" falls from ", " goes from ")
    status: Status = "confirmed" if within and worst < before else "partly" if worst < before / 2 else "refuted"
    remedy = (amp.remedy or "its well-conditioned form") + (" at every site of it" if at is None else "") + \
        ", or wrap the model in jaxparity.fixes.well_conditioned(fn)"
    proof = Fix("model change", remedy, f"{ctx.path} [{label}]", status == "confirmed",
                words + (NARROWS if status == "partly" else ""))
    return CauseVerdict(cause.id, cause.title, status, what, f"{amp.pattern} amplifies the small divergences; "
                        f"{proof.evidence}", cause.fix if status != "refuted" else None,
                        proof if status != "refuted" else None)


def measured(cause: Cause, ctx: Context, amp: Any) -> CauseVerdict:
    """An amplifier no rewrite recognises: confirmed from the measurements alone where every divergence that
    carries the output difference is rounding only (a sum within its error bound, an accurate math function on
    both sides) and the op downstream grows their relative difference by orders of magnitude: correct
    implementations differ that much there, and the program's form at that op is what makes it large."""
    from .noise import rounding_only

    loc = ctx.localization
    blame = loc.blame if loc is not None else None
    what = (f"checked the divergences that carry the output difference against their error bounds, and #{amp.index} "
            f"{amp.primitive} ({amp.where})'s growth of their relative difference")
    carriers = [(c, loc.local[c.divergence]) for c in blame.carriers] if blame is not None and loc is not None else []
    how = [(d, rounding_only(d, ctx)) for _, d in carriers]
    if not how or any(why is None for _, why in how):
        bad = [f"#{d.op.index} {d.op.primitive}" for d, why in how if why is None]
        return CauseVerdict(cause.id, cause.title, "refuted", what,
                            f"#{amp.index} {amp.primitive} grows the difference {amp.gain:,.0f}×, but "
                            + (f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not rounding alone" if bad else
                               "no divergence was measured to carry it"))
    shown = "; ".join(f"#{d.op.index} {d.op.primitive}: {why}" for d, why in how[:3])
    cond = ""
    if amp.condition is not None:
        cond = (f" (|a| + |b| is up to {amp.condition:,.0f}× |a {'−' if amp.primitive == 'sub' else '+'} b| there: "
                "the difference cancels)")
    return CauseVerdict(cause.id, cause.title, "confirmed", what,
                        f"the divergences that carry it are rounding only ({shown}); #{amp.index} {amp.primitive} at "
                        f"{amp.where} grows their relative difference {amp.gain:,.0f}×{cond}: correct "
                        "implementations of its inputs differ that much there", cause.fix)
