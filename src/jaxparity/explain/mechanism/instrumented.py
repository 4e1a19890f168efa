"""Causes read from per-op values that are not the program's. Where returning every intermediate changes the
path's outputs (another compiler fuses the instrumented module otherwise), no op-level conclusion is drawn
from its per-op values (``blame``). Yet the causes the runtime's own artifact decides reproduce a kernel's
values bit for bit on the op's captured inputs (with the served model's own dispatch configuration where its
artifact gives one: IREE's reduction tile): evidence of how that runtime computes such an op, if seen in
another module than the one it serves. Where nothing else explained the divergence, those causes are decided
on the instrumented view, and their evidence says where they were seen."""

from __future__ import annotations

import dataclasses

from ..causes import CAUSES
from ..context import Context
from ..verdicts import CauseVerdict
from .decide import applies
from .rules import run_experiment

__all__ = ["on_instrumented"]

_CATCH_ALL = ("unknown", "other-lowering")


def on_instrumented(ctx: Context, causes: list[CauseVerdict]) -> list[CauseVerdict]:
    """``causes`` with the artifact's causes decided on the instrumented per-op view (``Context.instrumented``),
    where the program's own view is missing and no cause was confirmed otherwise; the first confirmed one
    replaces its verdict, its evidence saying where it was seen."""
    if ctx.instrumented is None or any(c.status in ("confirmed", "noise") and c.cause not in _CATCH_ALL
                                       for c in causes):
        return causes
    localization, values = ctx.instrumented
    inner = dataclasses.replace(ctx, localization=localization, path_vals=values)
    together = localization.blame.together if localization.blame is not None else None
    share = f"; they reproduce {together:.0%} of its output difference" if together is not None else ""
    out = list(causes)
    for i, verdict in enumerate(out):
        cause = next((c for c in CAUSES if c.id == verdict.cause), None)
        if cause is None or cause.experiment != "artifact" or applies(cause, inner) is not None:
            continue
        try:
            found = run_experiment(cause, inner)
        except Exception:  # noqa: BLE001 - evidence, never the end of the explanation
            continue
        if found.status == "confirmed":
            seen = (f"seen in the per-op values of the module that returns every intermediate ({ctx.path} computes "
                    f"it otherwise than the model it serves{share}): ")
            out[i] = dataclasses.replace(found, evidence=seen + found.evidence)
            break
    return out
