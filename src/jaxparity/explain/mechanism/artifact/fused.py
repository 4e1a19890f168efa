"""``fused-kernel``: the tensor that holds the diverging op's output is made by one kernel whose inputs are
values from further up: the runtime computes several JAX ops as one (a ``reduce_window`` sum and a division as
one AVERAGE_POOL_2D). That region alone, on the runtime, must reproduce the path's values; it is then judged
against the error bound of its sums."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from ....rounding import is_float_dtype
from ...causes import Cause
from ...verdicts import CauseVerdict
from ..captured import differing_output as _differing_output
from ..captured import named as _named
from ..captured import where as _where
from .graph import ancestors, reaches_from, value_of

__all__ = ["fused_kernel", "fused_noise", "with_kernels"]


# Ops a fused region may hold for its error to be bounded by that of its sums: sums, scaling by
# constants, and ops that move or widen values without rounding.
_REDUCTIONS = {"reduce_sum", "reduce_window_sum", "dot_general", "conv_general_dilated", "cumsum"}


_LINEAR = _REDUCTIONS | {"add", "sub", "neg", "mul", "div", "convert_element_type", "broadcast_in_dim", "reshape",
                         "transpose", "squeeze", "expand_dims", "copy", "pad", "slice"}


def _fused_region(ctx: Any, d: Any, artifact: Any) -> tuple[Any, list[int], dict[int, np.ndarray], np.ndarray] | None:
    """The kernel that makes the tensor holding the op's output, the JAX ops it computes (those between the
    values its inputs hold and the op: more than the op itself, a fusion), the served model's own values of
    its inputs (value id -> array) and of its output. A tensor is found by the bits it holds, else by the name
    the converter gave it (``Artifact.named``: where returning every intermediate changed the values)."""
    found = _differing_output(ctx, d)
    if found is None:
        return None
    vid, mine, _ = found
    program = ctx.program
    out = next((t for t in artifact.holding(mine, constant=False) if artifact.producer(t) is not None), None)
    if out is None:
        out = artifact.named(program, d.op.index)
    kernel = artifact.producer(out) if out is not None else None
    if kernel is None:
        return None
    up = ancestors(program, d.op.index)
    # Each input tensor of the kernel is the value of an op upstream (or an argument of the case).
    by_value: dict[int, int] = {}
    candidates = [v for i in sorted(up) for v in program.ops[i].outputs if v is not None] + list(program.arg_ids)
    for t in kernel.inputs:
        if t < 0 or artifact.tensors.get(t) is None or artifact.tensors[t].constant:
            continue
        x = artifact.values.get(t)
        match = [v for v in candidates if (y := value_of(ctx, v)) is not None and y.dtype == x.dtype
                 and y.shape == x.shape and y.tobytes() == x.tobytes()]
        if not match:
            match = [v for i in sorted(up) if artifact.named(program, i) == t
                     for v in program.ops[i].outputs[:1] if v is not None]
        if not match:
            return None  # an input the program does not hold: the kernel's own intermediate
        by_value[t] = match[-1]  # the latest such value (a reshape of the same bits maps to the nearest)
    sources = set(by_value.values())
    producers = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
    stop = {producers[v] for v in sources if v in producers}
    region = [i for i in sorted(up) if i not in stop and reaches_from(program, i, sources)] + [d.op.index]
    served = {v: artifact.values[t] for t, v in by_value.items()}
    return (kernel, region, served, artifact.values[out]) if len(region) > 1 else None


def fused_kernel(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """Where the runtime computes several JAX ops as one kernel: that region alone on the runtime must give
    the path's values, and both sides on the same inputs (the baseline replays the region on the path's
    own) are judged against the error bound of its sums. The verdict stands for the divergence that
    carries the output difference (``Localization.lead``); for another one, what it found is kept for the
    noise verdict (``fused_noise``), which names every divergence."""
    lead = ctx.localization.lead if ctx.localization is not None else None
    found = None
    for d in _named(ctx.localization):
        verdict = _fused_at(cause, ctx, d)
        if verdict is None:
            continue
        if verdict.status == "noise":
            ctx.memo.setdefault("fused noise", {})[d.op.index] = verdict.evidence
        if d is lead or lead is None:
            return verdict
        found = found or (verdict if verdict.status != "noise" else None)
    return found


def fused_noise(ctx: Any, d: Any) -> str | None:
    """How a divergence is rounding only because the runtime computes it with its producers as one kernel
    within the error bound of its sums (found by ``fused-kernel``); None otherwise."""
    said = ctx.memo.get("fused noise", {}).get(d.op.index) if not d.within else None
    if said is None:
        return None
    kernel = re.search(r"as one (\S+) kernel", said)
    return f"one {kernel[1] if kernel else 'fused'} kernel of {ctx.path} with its producers, within the bound of its sums"


def _fused_at(cause: Cause, ctx: Any, d: Any) -> CauseVerdict | None:
    from ....localize.localizer import replayable
    from ....localize.region import make_region, run_region

    artifact = ctx.artifact()
    if artifact is None or ctx.path_vals is None or ctx.base_vals is None:
        return None
    fused = _fused_region(ctx, d, artifact)
    if fused is None:
        return None
    kernel, ops, served, served_out = fused
    program = ctx.program
    names = " → ".join(f"#{i} {program.ops[i].info.primitive}" for i in ops)
    seen = (f"{artifact.runtime} computes {names} ({d.op.user_source or d.op.source or 'unknown line'}) as one "
            f"{kernel.kind} kernel")
    what = f"the {kernel.kind} that makes {_where(d)}'s output in {artifact.runtime}, run alone on {ctx.path}"
    differing = _differing_output(ctx, d)
    if differing is None:  # found by _fused_region already
        return None
    vid, mine, base = differing
    position = [v for v in program.ops[d.op.index].outputs if v is not None].index(vid)
    own = {v: x for v, x in served.items() if (y := value_of(ctx, v)) is None or y.tobytes() != x.tobytes()}
    if own:  # the capture's values are not the served model's: judge the kernel on the served model's own
        vals = dataclasses.replace(ctx.path_vals, values={**ctx.path_vals.values, **own})
        mine = np.asarray(served_out).reshape(mine.shape)
        seen += (f" (read from {ctx.path}'s own run of its served model: the capture's values of its inputs are "
                 "not the served model's)")
    else:
        vals = ctx.path_vals
    try:
        region = make_region(program, vals, ops, d.op.index)
        alone = run_region(ctx.path.spec, region)
        exact = run_region("f64", region)
        # the baseline on the same inputs: its own replay where it can run a region, else its own values
        # where its inputs are the path's
        theirs = np.asarray(run_region(ctx.baseline.spec, region)[position]) if replayable(ctx.baseline) else (
            base if all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in
                        zip(region.values, make_region(program, ctx.base_vals, ops, d.op.index).values)) else None)
    except Exception as e:  # noqa: BLE001 - the region is evidence, not a requirement (RegionError, a runtime's)
        return CauseVerdict(cause.id, cause.title, "partly", what, f"{seen}; the region could not be run alone "
                            f"({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    if alone[position].tobytes() != mine.tobytes():
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{seen}, but that region alone on {ctx.path} "
                            "does not reproduce the path's values: the difference is not the kernel's alone")
    seen += f"; that region alone, as a one-kernel model on {ctx.path}, reproduces its values bit for bit"
    # the op is the kernel's on this path: the divergence tables say so (``LocalDivergence.kernel``)
    ctx.memo.setdefault("kernels", {})[d.op.index] = (kernel.kind, tuple(
        f"#{i} {program.ops[i].info.primitive}" for i in ops if i != d.op.index))
    bound = _region_bound(region, position, mine, theirs if theirs is not None else mine, program, ops)
    if bound is None or theirs is None:
        return CauseVerdict(cause.id, cause.title, "confirmed", what, seen + ": another order of operations "
                            "inside the kernel", cause.fix)
    limit, n = bound
    wide = np.asarray(exact[position], np.float64)
    off_mine, off_theirs = _off(mine, wide), _off(theirs, wide)
    errs = (f"from the exact result on the same inputs: {ctx.path} {float(off_mine.max(initial=0)):.3g}, "
            f"{ctx.baseline} {float(off_theirs.max(initial=0)):.3g}, bound up to {float(np.max(limit)):.3g}")
    mine_ok, theirs_ok = bool(np.all(off_mine <= limit)), bool(np.all(off_theirs <= limit))
    if mine_ok and theirs_ok:
        return CauseVerdict(cause.id, cause.title, "noise", what, f"{seen}; both sides are within the error bound "
                            f"of summing {n} terms ({errs}): another order of summation, neither wrong", cause.fix)
    who = str(ctx.path if not mine_ok else ctx.baseline)
    return CauseVerdict(cause.id, cause.title, "confirmed", what, f"{seen}; {who} is beyond the error bound of "
                        f"summing {n} terms ({errs}): {who} is wrong here",
                        "report it to the maintainers of " + who + " with this report (jaxparity reduce writes a "
                        "standalone reproducer)")


def _off(got: Any, exact: np.ndarray) -> np.ndarray:
    """|got − exact| per element: 0 where both are the same inf or both NaN, inf where one only is NaN."""
    got = np.asarray(got, np.float64)
    with np.errstate(invalid="ignore"):
        gap = np.abs(got - exact)
    same = (got == exact) | (np.isnan(got) & np.isnan(exact))
    return np.where(same, 0.0, np.where(np.isnan(gap), np.inf, gap))


def _region_bound(region: Any, position: int, mine: np.ndarray, base: Any, program: Any,
                  ops: list[int]) -> tuple[np.ndarray, int] | None:
    """Per element, how far any order of the region's sums may land from the exact result: 2·γ_n·Σ|terms|
    (Higham, Sec. 4.2; the region evaluated in float64 on the inputs' magnitudes) plus an ULP of each
    side's rounding; and n, the terms of its longest sum. None where the region holds an op beyond sums
    and scaling (no such bound then)."""
    import dataclasses

    import ml_dtypes

    from ....localize.localizer import _contraction_length, _unit_roundoff
    from ....localize.region import run_region

    if any(program.ops[i].info.primitive not in _LINEAR for i in ops):
        return None
    n = max((_contraction_length(program.ops[i]) for i in ops if program.ops[i].info.primitive in _REDUCTIONS),
            default=1)
    if n <= 1:
        return None
    dtype = np.dtype(mine.dtype)
    u = _unit_roundoff(np.dtype(np.float32) if dtype.itemsize < 4 else dtype)
    gamma = n * u / (1 - n * u)
    magnitudes = dataclasses.replace(region, values=tuple(np.abs(np.asarray(v)) if is_float_dtype(np.asarray(v).dtype)
                                                          else v for v in region.values))
    size = np.abs(np.asarray(run_region("f64", magnitudes)[position], np.float64))
    out_ulp = 2 * _unit_roundoff(dtype) * np.maximum(np.abs(mine.astype(np.float64)),
                                                     np.abs(np.asarray(base, np.float64)))
    # below the normal range each add errs by up to half the smallest subnormal, whatever the relative bound says
    tiny = n * float(ml_dtypes.finfo(np.dtype(np.float32) if dtype.itemsize < 4 else dtype).smallest_subnormal)
    return 2 * gamma * size + out_ulp + tiny, n


def with_kernels(loc: Any, kernels: dict[int, tuple[str, tuple[str, ...]]]) -> Any:
    """The localization with each divergence the runtime computes inside a fused kernel marked so (its op
    code and the ops fused with it, found by ``fused_kernel`` on the path's own artifact and kept in the
    context's memo under "kernels")."""
    if loc is None or not kernels:
        return loc
    local = tuple(dataclasses.replace(d, kernel=kernels[d.op.index][0], fused=kernels[d.op.index][1])
                  if not d.within and d.op.index in kernels else d for d in loc.local)
    return dataclasses.replace(loc, local=local)
