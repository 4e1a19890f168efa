"""``well-conditioned``: blame found many small divergences amplified by an op of a recognised ill-conditioned
form (a one-pass variance): that form is rewritten in its well-conditioned one (``jaxparity.fixes.well_conditioned``)
and the path, the baseline and f64 re-run on it; confirmed when the two paths then agree within the fixed
program's own rounding noise."""

from __future__ import annotations

from ...metrics import max_gaps
from ..causes import Cause
from ..context import Context, first_line
from ..measure import NARROWS
from ..verdicts import CauseVerdict, Fix, Status

__all__ = ["WELL_CONDITIONED", "rewritten"]

WELL_CONDITIONED = "well-conditioned model"


def rewritten(cause: Cause, ctx: Context) -> CauseVerdict:
    """Where blame found small divergences amplified by a recognised ill-conditioned form: rewrite that form
    (``fixes.well_conditioned``), re-run the path, the baseline and f64 on it, and judge the remaining
    difference against the fixed program's own rounding noise (the baseline's distance to f64)."""
    from ...fixes import rewrites, well_conditioned
    from ...paths.staging import reused

    blame = ctx.localization.blame if ctx.localization is not None else None
    amp = blame.amplifier if blame is not None else None
    if amp is None or amp.pattern is None:
        return CauseVerdict(cause.id, cause.title, "not run", "", "no small divergence is amplified by a recognised "
                            "ill-conditioned form")
    at = [amp.where] if ":" in amp.where else None
    what = f"rewrote #{amp.index} {amp.primitive} ({amp.where}) in its well-conditioned form"
    try:
        sites = rewrites(ctx.fn, ctx.args, at=at)
    except Exception as e:
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the program could not be rewritten ({first_line(e)})")
    if not sites:
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{amp.pattern} is not written in a form the "
                            "rewrite recognises there (masked or cross-device means are not)")
    fixed = reused(WELL_CONDITIONED, (id(ctx.fn), amp.where), ctx.fn, lambda: well_conditioned(ctx.fn, at=at))
    what += f" ({len(sites)} site{'s' if len(sites) > 1 else ''}: {sites[0]}); ran {ctx.path}, {ctx.baseline} and f64 on it"
    mine, theirs, ideal = (ctx.run(spec, fixed, WELL_CONDITIONED) for spec in (ctx.path.spec, ctx.baseline.spec, "f64"))
    ideal_before = ctx.run("f64")
    if isinstance(mine, str) or isinstance(theirs, str) or isinstance(ideal, str):
        failed = next(f"{spec}: {o}" for spec, o in zip((ctx.path.spec, ctx.baseline.spec, "f64"), (mine, theirs, ideal))
                      if isinstance(o, str))
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the rewritten program failed ({failed})")
    before, worst = max(max_gaps(ctx.path_out, ctx.base_out)), max(max_gaps(mine, theirs))
    # Rounding noise: the path is then about as far from f64 as the baseline is (a factor 2), output by output.
    mine_err, base_err = max_gaps(mine, ideal), max_gaps(theirs, ideal)
    within = all(m <= 2 * b for m, b in zip(mine_err, base_err))
    were = ""
    if not isinstance(ideal_before, str):
        were = (f" (were {max(max_gaps(ctx.path_out, ideal_before)):.3g} and "
                f"{max(max_gaps(ctx.base_out, ideal_before)):.3g})")
    words = (f"on {ctx.path} the difference from {ctx.baseline} falls from {before:.3g} to {worst:.3g} (max abs); "
             f"{ctx.path} is then {max(mine_err):.3g} and {ctx.baseline} {max(base_err):.3g} from the f64 ideal{were}"
             f": {'within' if within else 'beyond'} the rewritten program's own rounding noise")
    status: Status = "confirmed" if within and worst < before else "partly" if worst < before / 2 else "refuted"
    remedy = (amp.remedy or "its well-conditioned form") + ", or wrap the model in jaxparity.fixes.well_conditioned(fn)"
    proof = Fix("model change", remedy, f"{ctx.path} [{WELL_CONDITIONED}]", status == "confirmed",
                words + (NARROWS if status == "partly" else ""))
    return CauseVerdict(cause.id, cause.title, status, what, f"{amp.pattern} amplifies the small divergences; "
                        f"{proof.evidence}", cause.fix if status != "refuted" else None,
                        proof if status != "refuted" else None)
