"""Which layer is at fault, once the causes are decided: the compiler pass that sets off wrong code, the
converter or the runtime's kernel (from another runtime of the same converted artifact), and the fix that
reaches the runtime that was found (XLA's flags do nothing in another runtime)."""

from __future__ import annotations

import dataclasses

from ..causes import CAUSES
from ..context import Context, first_line
from ..verdicts import CauseVerdict

__all__ = ["at_fault"]


def at_fault(causes: list[CauseVerdict], ctx: Context, keep: dict) -> list[CauseVerdict]:
    """``causes`` with the layer at fault said where the evidence tells it, and "unknown" added where no
    cause explains the divergence."""
    causes = name_the_pass(causes)
    if ctx.path.has("other_compiler"):  # XLA's flags do nothing in another runtime: its own fix, where the table has one
        by_id = {c.id: c for c in CAUSES}
        causes = [dataclasses.replace(c, fix=by_id[c.cause].runtime_fix) if c.cause in by_id and
                  by_id[c.cause].runtime_fix and c.fix else c for c in causes]
    causes = converter_or_runtime(causes, ctx, keep)
    if not any(c.status in ("confirmed", "partly", "noise") for c in causes):
        causes.append(CauseVerdict("unknown", "unknown", "confirmed", "every applicable experiment above",
                                   "no known cause's experiment restored parity or reproduced the numbers"))
    return causes


def name_the_pass(causes: list[CauseVerdict]) -> list[CauseVerdict]:
    """Wrong code, where a re-run with a compiler pass disabled restores parity, names that pass: what
    the maintainers need first."""
    wrong = next((c for c in causes if c.cause == "wrong-code" and c.status == "confirmed"), None)
    passes = [c.experiment.removeprefix("re-ran ") for c in causes
              if c.status == "confirmed" and c.experiment.startswith("re-ran ") and "disable" in c.experiment]
    if wrong is None or not passes:
        return causes
    named = dataclasses.replace(wrong, evidence=f"{wrong.evidence}; {passes[0]} restores parity: name that pass in "
                                "the report")
    return [named if c is wrong else c for c in causes]


def converter_or_runtime(causes: list[CauseVerdict], ctx: Context, keep: dict) -> list[CauseVerdict]:
    """Wrong code on a path whose converted artifact another runtime also runs (``Path.same_artifact``: onnx
    and onnx-ref): the op alone on that other runtime decides between the conversion and the kernel."""
    from ...localize.loops.descend import frame_key
    from ...localize.region import differs, make_region, run_region

    other = ctx.path.same_artifact
    wrong = next((c for c in causes if c.cause in ("wrong-code", "semantic-variant") and c.status == "confirmed"),
                 None)
    d = ctx.localization.lead if ctx.localization is not None else None
    if other is None or wrong is None or d is None or frame_key(d.within) not in keep:
        return causes
    program, path_vals, _ = keep[frame_key(d.within)]
    try:
        region = make_region(program, path_vals, [d.op.index], d.op.index)
        mine, theirs = run_region(ctx.path.spec, region), run_region(other, region)
    except Exception as e:
        note = f"; {other} could not run the op alone to tell the converter from the runtime ({first_line(e)})"
    else:
        how = "wrongly" if wrong.cause == "wrong-code" else "so"
        note = (f"; {other} gives the same values on the op alone: "
                f"{ctx.path.same_artifact_agrees(d.op.primitive, how)}" if not differs(mine, theirs) else
                f"; {other} gives other values on the same converted op: {ctx.path}'s kernel is at fault, not the "
                "converter")
    return [dataclasses.replace(c, evidence=c.evidence + note) if c is wrong else c for c in causes]
