"""The search's numerically stable forms (``fixes.conditioning``): what is written at the carrying op's line, or
at the lines that read its result, computed in its stable form (a max-shifted softmax or log-sum-exp, a two-pass
variance, a sum of logs, log1p, expm1) and re-run on the path and the baseline. It holds as every candidate does
(parity, rounding noise by the element-wise or the triage's judge), or, where both sides were far from the f64
ideal, when it brings both near it: neither was right (``toward_ideal``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import Context
from ..verdicts import Fix

__all__ = ["conditioned", "form_lines", "toward_ideal"]


def form_lines(ctx: Context, ops: list[Any]) -> list[str]:
    """The lines where a numerically stable form may replace what the carrying ops compute: the first line, for
    each op, of it and the ops that read its result (``lines_downstream``) that has a recognised form."""
    from ...fixes import forms_at
    from ...localize.program import lines_downstream

    found: list[str] = []
    for op in ops:
        for line in lines_downstream(ctx.program, op):
            try:
                if ":" in line and forms_at(ctx.fn, ctx.args, at=[line]):
                    if line not in found:
                        found.append(line)
                    break
            except Exception:  # noqa: BLE001 - no form recognised there
                continue
    return found


def conditioned(ctx: Context, line: str) -> Fix | None:
    """The numerically stable form of what is written at ``line`` (``fixes.conditioning``: a max-shifted
    softmax or log-sum-exp, a two-pass variance, a log of a product as a sum of logs, log1p, expm1), re-run on
    the path and the baseline and judged as every candidate is; None where nothing at that line has one."""
    from ...fixes import forms_at, well_conditioned

    try:
        forms = forms_at(ctx.fn, ctx.args, at=[line])
    except Exception:  # noqa: BLE001 - no form recognised: the other candidates follow
        return None
    if not forms:
        return None
    # each form alone first (the smallest change that holds), then all of them together
    tries = [[f] for f in forms] + ([forms] if len(forms) > 1 else [])
    fix: Fix | None = None
    for chosen in tries:
        label = f"well-conditioned at {line}" + ("" if chosen == forms else f": {', '.join(chosen)}")
        fixed = well_conditioned(ctx.fn, at=[line], forms=chosen if len(tries) > 1 else None)
        fix = _judged(ctx, fixed, chosen, line, label)
        if fix.verified:
            return fix
    return fix


def _judged(ctx: Context, fixed: Any, forms: list[str], line: str, label: str) -> Fix:
    """``fixed`` (the forms at ``line`` rewritten) re-run on the path and the baseline, judged as every candidate
    is."""
    from ...fixes import REMEDIES
    from .rerun import as_accurate, both, within_noise

    description = "; ".join(REMEDIES.get(f, f) for f in forms) + f" (at {line})"
    outs = both(ctx, fixed, label)
    if isinstance(outs, str):
        return Fix("model change", description, None, False, f"{', '.join(forms)}: the rewritten model failed {outs}",
                   ran=True)
    measured = ctx.compare(outs[0], outs[1])
    (n0, u0, _), (n1, u1, _) = measured.before, measured.after
    said = f"re-ran {ctx.path} and {ctx.baseline} with the {' and '.join(forms)} at {line} in its stable form"
    if measured.outcome == "parity":
        return Fix("model change", description, f"{ctx.path} [{label}]", True,
                   f"{said}: they agree (were {n0} elements apart)", rerun=measured, ran=True)
    if as_accurate(ctx, measured, outs[0], outs[1], fixed):
        return Fix("model change", description, f"{ctx.path} [{label}]", True,
                   f"{said}: {n0} → {n1} elements differ, max {u0} → {u1} ULP, within the rewritten program's own "
                   "rounding noise", rerun=measured, ran=True)
    judged = within_noise(ctx, fixed, measured, outs[0], outs[1])
    if judged is not None:
        return Fix("model change", description, f"{ctx.path} [{label}]", True,
                   f"{said}: {n0} → {n1} elements differ, max {u0} → {u1} ULP: within the rounding noise the triage "
                   f"judges by (at most {judged.share:.0%} of what correct implementations of the rewritten "
                   "program's ops may differ by)", rerun=measured, ran=True)
    toward = toward_ideal(ctx, outs[0], outs[1])
    if toward is not None:
        return Fix("model change", description, f"{ctx.path} [{label}]", True,
                   f"{said}: {n0} → {n1} elements differ, max {u0} → {u1} ULP; {toward}", rerun=measured, ran=True)
    return Fix("model change", description, None, False,
               f"{said}: they still differ in {n1} elements, max {u1} ULP (were {n0}, max {u0} ULP)",
               rerun=measured, ran=True)


def toward_ideal(ctx: Context, mine: Any, theirs: Any) -> str | None:
    """Where both sides were far from the f64 ideal on an output (``toward.LOST`` of its scale, or NaN/inf where it
    is a number) and with the change both are near it, ten times nearer at least: the change moves every side
    toward the math, and neither was right before. The words, or None."""
    from ..toward import LOST, NEARER
    from ..verdicts import TOWARD

    ideal = ctx.run("f64")
    if isinstance(ideal, str) or len(ideal) != len(mine):
        return None

    def err(x: Any, f: np.ndarray) -> float:
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(np.asarray(x, np.float64) - f)
        return float(np.where(np.isnan(d) & ~np.isnan(f), np.inf, np.nan_to_num(d, nan=0.0)).max(initial=0.0))

    said = None
    for k, f in enumerate(ideal):
        f = np.asarray(f, np.float64)
        if f.dtype.kind != "f" or np.asarray(mine[k]).dtype.kind not in "fV":
            continue
        scale = float(np.abs(f[np.isfinite(f)]).max(initial=0.0))
        if not scale:
            continue
        before = (err(ctx.path_out[k], f), err(ctx.base_out[k], f))
        after = (err(mine[k], f), err(theirs[k], f))
        if min(before) < LOST * scale:
            continue  # one side was near the ideal: a change is judged against it, not toward the ideal
        if not all(a < LOST * scale and a * NEARER <= b for a, b in zip(after, before)):
            return None
        said = (f"{TOWARD}: {ctx.path} {after[0]:.3g} and {ctx.baseline} {after[1]:.3g} from it, were "
                f"{before[0]:.3g} and {before[1]:.3g} where it reaches {scale:.3g}: neither was right")
    return said
