"""Rounding noise, decided soundly (``noise-bound``): every divergence that carries the output difference is a
sum within the error bound of two summation orders, two accurate math libraries, one fused kernel within the
bound of its sums, or a loop as accurate on both sides; the per-op values are the program's; and the outputs
are not too far apart to be rounding."""

from __future__ import annotations

from typing import Any

from ...localize.localizer import Localization
from ...metrics import max_gaps
from ..blame import BLAMED
from ..causes import Cause
from ..context import Context
from ..measure import distance
from ..verdicts import CauseVerdict
from .artifact.fused import fused_noise
from .op_rules import MATH, MATH_LIBRARY_ULP

__all__ = ["NOISE_OUTPUT_ULP", "POWER_ULP", "noise", "rounding_only"]

# Beyond this many ULP at an output, a difference is not called rounding noise, whatever the local
# evidence: the real divergence is elsewhere, or was not captured.
NOISE_OUTPUT_ULP = 2**16

# x**n computed as a few products, each rounded (XLA: repeated squaring), or by one correctly rounded pow:
# within this many ULP of the correctly rounded power for the exponents models use (n up to 4 or so).
POWER_ULP = 8


def rounding_only(d: Any, ctx: Context | None = None) -> str | None:
    """How a local divergence is rounding and nothing more, or None: a reduction within the error bound of
    two summation orders, an elementary function both sides compute within a math library's few ULP, an
    op the runtime computes with its producers as one kernel within the bound of its sums (``fused_noise``),
    or a loop whose result is as accurate on the path as on the baseline (``ElementEvidence.as_accurate``)."""
    if d.within_noise_bound:
        return "a sum within its error bound"
    if ctx is not None and (fused := fused_noise(ctx, d)):
        return fused
    ev = d.elements
    if ev is not None and ev.as_accurate():
        return (f"a loop both sides compute as accurately (against its exact result on the same inputs: "
                f"{ev.path_error:.3g} and {ev.baseline_error:.3g})")
    if (d.op.primitive in MATH and ev is not None and ev.path_ulp is not None and ev.baseline_ulp is not None
            and not ev.flushes and not ev.implementation_defined
            and max(ev.path_ulp, ev.baseline_ulp) <= MATH_LIBRARY_ULP):
        return f"both within {max(ev.path_ulp, ev.baseline_ulp)} ULP of the correctly rounded {d.op.primitive}"
    if (d.op.primitive == "integer_pow" and ev is not None and ev.path_ulp is not None and ev.baseline_ulp is not None
            and not ev.flushes and max(ev.path_ulp, ev.baseline_ulp) <= POWER_ULP):
        return (f"both within {max(ev.path_ulp, ev.baseline_ulp)} ULP of the correctly rounded power (x**n as products, "
                "each rounded, or as one pow)")
    return None


def carried_noise(cause: Cause, ctx: Context, loc: Localization) -> CauseVerdict | None:
    """Where blame measured which divergences carry the output difference, the noise verdict is judged on
    those (the others carry none of it) when together they reproduce most of it. Where they reproduce
    less (the rest arises where per-op values cannot be seen, e.g. inside another runtime's fused kernels),
    every divergence found must be rounding only and the outputs within twice the model's own rounding
    noise (the baseline's distance to f64), and the verdict says how much the divergences account for."""
    b = loc.blame
    if b is None or not b.carriers:
        return None
    what = "checked each divergence that carries the output difference against its error bound"
    blamed = b.together >= BLAMED
    named = [(c, loc.local[c.divergence]) for c in b.carriers]
    how = [(f"#{d.op.index} {d.op.primitive} ({max(c.alone, c.needed):.0%})", rounding_only(d, ctx)) for c, d in named]
    if not blamed:  # every divergence found, not only those that carry part of it
        what = "checked every local divergence against its error bound"
        how += [(f"#{d.op.index} {d.op.primitive}", rounding_only(d, ctx)) for d in loc.local
                if all(d is not n for _, n in named)]
    how.sort(key=lambda x: x[1] is not None)  # what is not rounding alone first
    shown = "; ".join(f"{who}: {why or 'not rounding alone'}" for who, why in how[:3]) + \
        (f"; {len(how) - 3} more" if len(how) > 3 else "")
    bad = sum(why is None for _, why in how)
    if bad:
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{bad} of the {len(how)} divergences "
                            f"{'that carry the output difference ' if blamed else ''}are not rounding alone "
                            f"({shown})")
    _, out_ulp = distance(ctx.path_out, ctx.base_out)
    unsound = []
    if loc.perturbed:
        unsound.append("observing every op removed the difference, so the per-op values are not the program's")
    if out_ulp > NOISE_OUTPUT_ULP:
        unsound.append(f"the outputs differ by {out_ulp} ULP, more than rounding noise of sums grows to here")
    if not blamed:
        ideal = ctx.run("f64")
        if isinstance(ideal, str) or not all(g <= 2 * f for g, f in zip(max_gaps(ctx.path_out, ctx.base_out),
                                                                         max_gaps(ctx.base_out, ideal))):
            unsound.append(f"the divergences found reproduce only {b.together:.0%} of the output difference and "
                           "the outputs are not within twice the model's own rounding noise")
    floor = "" if unsound else ", and the outputs are within twice the model's own rounding noise"
    others = len(loc.local) - len(named)
    if blamed:
        found = (f"the {len(named)} divergences that carry the output difference (together {b.together:.0%} of "
                 f"it) are rounding only: {shown}" + (f"; the other {others} each carry under 5% of it alone" if others else ""))
    else:
        found = (f"all {len(how)} local divergences are rounding only ({shown}); together they reproduce "
                 f"{b.together:.0%} of the output difference, the rest arises where per-op values cannot be "
                 f"seen{floor}")
    if unsound:
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{found}; but {'; and '.join(unsound)}: "
                            "not established as noise")
    # Elementary functions among them (exp, tanh within a few ULP): two math libraries, not only two orders.
    math = any(why is not None and "ULP of the correctly rounded" in why for _, why in how)
    title = cause.title.replace("reduction order", "reduction order and math libraries", 1) if math else cause.title
    return CauseVerdict(cause.id, title, "noise", what, found, cause.fix)


def noise(cause: Cause, ctx: Context) -> CauseVerdict:
    """Expected rounding noise only when it is sound: every local divergence is a reduction within its
    bound, every op was checked (a divergence among unchecked ops would go unseen), the per-op values
    show the compiled program's difference, and the outputs are not too far apart to be noise."""
    loc = ctx.localization
    what = "checked each local divergence against the error bound of its reduction"
    unseen = ctx.memo.get("outputs within noise")
    if loc is None and unseen:  # no op-level view, but the outputs are within the model's own noise
        gaps = max_gaps(ctx.path_out, ctx.base_out)
        ideal = ctx.run("f64")
        floor = max_gaps(ctx.base_out, ideal) if not isinstance(ideal, str) else None
        sizes = (f" ({ctx.path} is up to {max(gaps):.3g} from {ctx.baseline}, {ctx.baseline} up to {max(floor):.3g} "
                 "from the f64 ideal)" if gaps and floor else "")
        return CauseVerdict(cause.id, "rounding noise, judged at the outputs only", "noise",
                            "the outputs against twice the model's own rounding noise",
                            f"the outputs are within twice the model's own rounding noise{sizes}; {unseen}",
                            "compare with a tolerance (the smallest passing --ulp / --atol is printed); no op-level "
                            "view shows which ops round otherwise")
    if loc is None or not loc.local:
        return CauseVerdict(cause.id, cause.title, "not run", "noise bound", "no per-op values for this path")
    carried = carried_noise(cause, ctx, loc)
    if carried is not None:
        return carried
    reductions = [d for d in loc.local if d.op.primitive in (cause.primitives or ())]
    if not (reductions and len(reductions) == len(loc.local) and all(d.within_noise_bound for d in reductions)):
        inside = sum(d.within_noise_bound for d in reductions)
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{len(loc.local) - inside} of {len(loc.local)} "
                            "local divergences are not reductions within their error bound")
    worst = max(reductions, key=lambda d: d.max_abs)
    found = (f"all {len(reductions)} local divergences found are reductions within their bound (largest: "
             f"{worst.op.primitive} at {worst.op.user_source or worst.op.source}, difference {worst.max_abs:.3g} <= "
             f"bound {worst.noise_bound:.3g})")
    _, out_ulp = distance(ctx.path_out, ctx.base_out)
    unsound = []
    if loc.unchecked:
        unsound.append(f"{loc.unchecked} ops could not be checked, so a divergence among them would go unseen")
    if loc.perturbed:
        unsound.append("observing every op removed the difference, so the per-op values are not the program's")
    if out_ulp > NOISE_OUTPUT_ULP:
        unsound.append(f"the outputs differ by {out_ulp} ULP, more than rounding noise of sums grows to here")
    if unsound:
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{found}; but {'; and '.join(unsound)}: "
                            "not established as noise, the real divergence may lie elsewhere")
    return CauseVerdict(cause.id, cause.title, "noise", what, found, cause.fix)
