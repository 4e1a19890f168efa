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
    return two_executors(causes, ctx)


# Causes that say a runtime computes otherwise without saying which layer of it: two executions of its
# artifact tell the layer (a kernel's profile runs the op converted and computed: either may be at fault).
_UNPLACED = ("other-lowering", "unknown", "kernel-accuracy")


def two_executors(causes: list[CauseVerdict], ctx: Context) -> list[CauseVerdict]:
    """The layer at fault, from the whole program run by another executor of the same converted artifact
    (``Path.same_artifact``: ORT and onnx.reference; TFLite's kernel sets): where it gives the path's values,
    the conversion is at fault (two runtimes compute the converted model alike); where it gives the
    baseline's, the path's kernels are. Said on the cause that names no layer (a different lowering,
    unknown)."""
    other = ctx.path.same_artifact
    target = next((c for c in causes if c.cause in _UNPLACED and c.status == "confirmed"), None)
    if other is None or target is None:
        return causes
    outs = ctx.run(other)
    if isinstance(outs, str) or len(outs) != len(ctx.path_out):
        return causes
    converter = ctx.path.converter or "the converter"
    side = _sides_with(outs, ctx.path_out, ctx.base_out)
    if side == "path":
        layer, said = "converter", (f"{other} runs the same converted model to {ctx.path}'s values wherever "
                                    f"{ctx.path} departs from {ctx.baseline}: the conversion ({converter}) is at "
                                    f"fault, not {ctx.path}'s kernels")
        fix = (f"report the conversion to {converter}'s maintainers with this report (jaxparity reduce writes a "
               "standalone reproducer)")
    elif side == "baseline":
        layer, said = "kernel", (f"{other} runs the same converted model to {ctx.baseline}'s values wherever "
                                 f"{ctx.path} departs from them: {ctx.path}'s kernels are at fault, not the "
                                 "conversion")
        fix = f"report it to {ctx.path}'s maintainers with this report attached, or run {other}"
    else:
        return causes
    placed = dataclasses.replace(target, evidence=f"{target.evidence}; {said}", layer=layer,
                                 fix=fix if target.cause == "other-lowering" else target.fix)
    return [placed if c is target else c for c in causes]


def name_the_pass(causes: list[CauseVerdict]) -> list[CauseVerdict]:
    """Wrong code, where a re-run with a compiler pass disabled restores parity, names that pass: what
    the maintainers need first."""
    wrong = next((c for c in causes if c.cause == "wrong-code" and c.status == "confirmed"), None)
    passes = [c.experiment.removeprefix("re-ran ") for c in causes
              if c.status == "confirmed" and c.experiment.startswith("re-ran ") and "disable" in c.experiment]
    if wrong is None or not passes:
        return causes
    spec = passes[0].split(" ", 1)[0]
    name = spec.split("xla_disable_hlo_passes=", 1)[-1] if "xla_disable_hlo_passes=" in spec else spec
    head, sep, rest = wrong.evidence.partition("; ")
    named = dataclasses.replace(wrong, evidence=f"{head}, set off by XLA's {name} pass ({spec}, with it disabled, "
                                f"restores parity: name that pass in the report){sep}{rest}")
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
    layer = ("kernel" if "kernel is at fault" in note else "converter" if "gives the same values" in note else None)
    return [dataclasses.replace(c, evidence=c.evidence + note, layer=layer or c.layer) if c is wrong else c
            for c in causes]


def _sides_with(other: list, mine: list, theirs: list) -> str | None:
    """Which side a third execution gives, on the elements where ``mine`` departs from ``theirs`` beyond a math
    library's few ULP: "path" (it gives ``mine`` there), "baseline" (``theirs``), or None (neither, or no
    such element)."""
    import numpy as np

    from ...metrics import ulp_distance
    from .op_rules import MATH_LIBRARY_ULP

    def far(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a), np.asarray(b)
        u = ulp_distance(a, b)
        return (u != 0) if a.dtype.kind in "iub" else (u < 0) | (u > MATH_LIBRARY_ULP)

    sides = set()
    for o, m, t in zip(other, mine, theirs):
        o, m, t = np.asarray(o), np.asarray(m), np.asarray(t)
        if not (o.shape == m.shape == t.shape and o.dtype == m.dtype == t.dtype):
            return None
        try:
            departs = far(m, t)
        except Exception:  # noqa: BLE001 - outputs no ULP measure reads (strings, keys)
            return None
        if not departs.any():
            continue
        near_path, near_base = ~far(o, m)[departs], ~far(o, t)[departs]
        sides.add("path" if near_path.all() and not near_base.all() else
                  "baseline" if near_base.all() and not near_path.all() else None)
    return sides.pop() if len(sides) == 1 else None
