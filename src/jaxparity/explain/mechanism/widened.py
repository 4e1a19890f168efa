"""Excess precision decided on the op's own values (the ``widened`` op check): a widening convert whose
float32 outputs are not values of the declared narrow dtype, so the narrow result feeding it was never
rounded. The side that kept it is the one re-run with the flag: the path, or the baseline (jit as the
baseline of eager)."""

from __future__ import annotations

from typing import Any

from ..causes import Cause
from ..context import Context, describe
from ..verdicts import CauseVerdict
from .reruns import baseline_flag_proof, both_flag_proof, flag_proof

__all__ = ["widened_check", "widened_hits", "widened_side"]


def widened_hits(ctx: Context) -> list[Any]:
    """The divergences at a widening convert fed a narrow result never rounded, the carrier first."""
    loc = ctx.localization
    ranked = (loc.ranked + [d for d in loc.local if d.within_noise_bound]) if loc else []
    return [d for d in ranked if d.unrounded is not None and d.detail]


def widened_side(cause: Cause, ctx: Context) -> str | None:
    """Which side the op's own values show keeping excess precision ("path" or "baseline"), for the cause
    decided on them; None where no op shows it."""
    if cause.op_check != "widened":
        return None
    hits = widened_hits(ctx)
    return hits[0].unrounded_side if hits else None


def widened_check(cause: Cause, ctx: Context) -> CauseVerdict | None:
    """Excess precision on the op's own values. Confirmed there; the flag re-run then proves the fix (None
    where no op shows it: the re-run decides). Where the baseline is the side that kept it, the baseline is
    re-run with the flag, and the fix holds where it then gives the path's values."""
    hits = widened_hits(ctx)
    if not hits:
        return None
    d = hits[0]
    if d.unrounded_side == "baseline":
        proof, seen_rerun = baseline_flag_proof(cause, ctx)
    else:
        proof, seen_rerun = flag_proof(cause, ctx)
    if not proof.verified and (both := both_flag_proof(cause, ctx)) is not None and both[0].verified:
        proof, seen_rerun = both  # each side keeps it its own way: the flag on both (one jax.jit, two devices)
    more = f"; {len(hits) - 1} more such op{'s' if len(hits) > 2 else ''}" if len(hits) > 1 else ""
    u = d.unrounded
    narrow = u.outputs[0].split("[", 1)[0] if u.outputs else "narrow"
    who = f"in {ctx.baseline} (the baseline), " if d.unrounded_side == "baseline" else ""
    seen = (f"{who}#{d.op.index} {d.op.primitive} receives values that are not {narrow}: the {narrow} result of "
            f"#{u.index} {u.primitive} was never rounded{more}")
    return CauseVerdict(cause.id, cause.title, "confirmed", f"the values of {describe(d)}",
                        f"{seen}; {seen_rerun}", cause.fix, proof)
