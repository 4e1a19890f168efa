"""Causes decided on what the runtime really runs: the path's own artifact (``Path.artifact``: a TFLite
flatbuffer read back, with every tensor's value in one run of it), the op's own captured values, and
the op (or the fused region) run alone by that same runtime.

- ``stored-constant``: the diverging op computes a constant (no input of the case reaches it), and the
  runtime's artifact holds the path's value as a stored constant: the converter wrote the constant
  otherwise (TFLite stores -inf as -3.4028235e38). The fix is a model change every runtime stores
  alike (a finite fill), verified by re-running the path and the baseline on it.
- ``narrow-accumulation``: a bf16/f16 dot whose path values are reproduced bit for bit by adding a block
  of terms in float32 and rounding the running sum to the narrow dtype between blocks (IREE's matmul
  accumulates into its bf16 output, tiled by its ``vector_reduction``, read from its own dispatch
  configuration). The fix, an explicit float32 accumulator, is verified on both sides.
- ``converter-decomposition``: one JAX op written by the converter as several kernels (jax2onnx's erfc
  as 1 - Erf), found between the tensors that hold the op's inputs and output in the runtime's own run,
  each kernel's value at the example element shown; the artifact's other runtime (``Path.same_artifact``)
  tells the converter from the runtime.
- ``kernel-attribute``: the first kernel of the runtime's own run whose inputs hold the baseline's values
  and whose output does not (localized on the served model itself, not on a second conversion), re-run
  with each other value of its attributes the path knows (``Path.kernel_variants``): the value that
  brings the path to the baseline is what the converter chose otherwise (Resize's exclude_outside).
- ``fused-kernel``: the tensor that holds the diverging op's output is made by one kernel whose inputs
  are values from further up: the runtime computes several JAX ops as one (a ``reduce_window`` sum and a
  division as one AVERAGE_POOL_2D). That region alone, on the runtime, must reproduce the path's
  values; it is then judged against the error bound of its sums.

Each rule returns a verdict, or None when no divergence offers that evidence.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
from jax.extend.core import Literal

from ..metrics import max_gaps
from ..paths.artifact import MOVES
from ..rounding import is_float_dtype
from .captured import bound as _bound
from .captured import model_change as _model_change
from .captured import differing_output as _differing_output
from .captured import named as _named
from .captured import op_inputs as _op_inputs
from .captured import show as _show
from .captured import where as _where
from .captured import with_op as _with_op
from .causes import Cause
from .op_evidence import MATH_LIBRARY_ULP, constant_only
from .verdicts import CauseVerdict, Fix

__all__ = ["ARTIFACT_RULES", "fused_noise", "kept_wide"]

# Ops a fused region may hold for its error to be bounded by that of its sums: sums, scaling by
# constants, and ops that move or widen values without rounding.
_REDUCTIONS = {"reduce_sum", "reduce_window_sum", "dot_general", "conv_general_dilated", "cumsum"}
_LINEAR = _REDUCTIONS | {"add", "sub", "neg", "mul", "div", "convert_element_type", "broadcast_in_dim", "reshape",
                         "transpose", "squeeze", "expand_dims", "copy", "pad", "slice"}


def _jnp_constant(value: float, dtype: str) -> str:
    """How the model writes the stored value: 'jnp.finfo(jnp.float32).min' for -FLT_MAX."""
    try:
        info = np.finfo(np.dtype(dtype))
    except (TypeError, ValueError):
        return repr(value)
    if value == float(info.min):
        return f"jnp.finfo(jnp.{dtype}).min"
    if value == float(info.max):
        return f"jnp.finfo(jnp.{dtype}).max"
    return f"{value:.9g}"


def _stored_constant(cause: Cause, ctx: Any) -> CauseVerdict | None:
    loc = ctx.localization
    for d in _named(loc):
        if not constant_only(d):
            continue
        found = _differing_output(ctx, d) if ctx.path_vals is not None and ctx.base_vals is not None else None
        if found is None:
            continue
        vid, mine, theirs = found
        artifact = ctx.artifact()
        tensors = artifact.holding(mine, constant=True) if artifact is not None else []
        what = f"the constant {_where(d)} computes, against {artifact.runtime if artifact else ctx.path}'s own"
        if artifact is not None and not tensors:
            continue  # the artifact computes it: not a stored constant
        declared = _show(theirs) if d.declared_side in ("baseline", "both") else None
        held = (f"{artifact.runtime} stores it as the constant {artifact.describe(tensors[0])}" if tensors else
                f"{ctx.path} gives {_show(mine)}")
        seen = (f"{_where(d)} takes no input of the case (it computes a constant); {held}, where the program "
                f"declares {declared or _show(theirs)}: the converter wrote the constant otherwise")
        # The model change: write the constant as the runtime stores it, so every path computes with it.
        at = d.op.user_source or d.op.source
        differ = mine != theirs
        olds, news = np.unique(np.asarray(theirs)[differ]), np.unique(np.asarray(mine)[differ])
        if at is None or olds.size != 1 or news.size != 1:
            return CauseVerdict(cause.id, cause.title, "confirmed", what, seen, cause.fix)
        old, new = float(olds[0]), float(news[0])
        written = _jnp_constant(new, str(np.asarray(mine).dtype))
        remedy = (f"write the constant as every runtime stores it: {written} in place of {old!r} at {at} "
                  f"({'a finite fill: ' if math.isinf(old) else ''}the model then computes with the value "
                  f"{ctx.path} already uses)")
        return _model_change(cause, ctx, what, seen, remedy, _with_constant(ctx.program, d.op.index, old, new),
                             "stored constant", f"with {written} at {at}")
    return None


def _with_constant(program: Any, index: int, declared: float, stored: float) -> Callable[..., tuple]:
    """The case's program with op ``index`` giving ``stored`` where it gave ``declared``: the model written
    with the constant as the runtime stores it."""
    import jax.numpy as jnp

    def stored_as_the_runtime_does(op: Any, ins: list[Any]) -> list[Any]:
        return [jnp.where(o == declared, jnp.asarray(stored, o.dtype), o) if jnp.issubdtype(o.dtype, jnp.inexact)
                else o for o in _bound(op, ins)]

    return _with_op(program, index, stored_as_the_runtime_does)


def _ancestors(program: Any, index: int) -> set[int]:
    """Indices of the ops whose outputs ``program.ops[index]`` reads, transitively."""
    producers = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
    seen: set[int] = set()
    stack = [index]
    while stack:
        for ref in program.ops[stack.pop()].inputs:
            if not isinstance(ref, Literal) and ref in producers and producers[ref] not in seen:
                seen.add(producers[ref])
                stack.append(producers[ref])
    return seen


def _value_of(ctx: Any, vid: int) -> np.ndarray | None:
    for table in (ctx.path_vals.values, ctx.path_vals.args):
        if vid in table:
            return np.asarray(table[vid])
    return None


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
    up = _ancestors(program, d.op.index)
    # Each input tensor of the kernel is the value of an op upstream (or an argument of the case).
    by_value: dict[int, int | None] = {}
    candidates = [v for i in sorted(up) for v in program.ops[i].outputs if v is not None] + list(program.arg_ids)
    for t in kernel.inputs:
        if t < 0 or artifact.tensors.get(t) is None or artifact.tensors[t].constant:
            continue
        x = artifact.values.get(t)
        match = [v for v in candidates if (y := _value_of(ctx, v)) is not None and y.dtype == x.dtype
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
    region = [i for i in sorted(up) if i not in stop and _reaches_from(program, i, sources)] + [d.op.index]
    served = {v: artifact.values[t] for t, v in by_value.items()}
    return (kernel, region, served, artifact.values[out]) if len(region) > 1 else None


def _reaches_from(program: Any, index: int, sources: set[int]) -> bool:
    """Does op ``index`` read (transitively) one of the values ``sources``?"""
    producers = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
    stack, seen = [index], set()
    while stack:
        i = stack.pop()
        for ref in program.ops[i].inputs:
            if isinstance(ref, Literal):
                continue
            if ref in sources:
                return True
            j = producers.get(ref)
            if j is not None and j not in seen:
                seen.add(j)
                stack.append(j)
    return False


def _fused_kernel(cause: Cause, ctx: Any) -> CauseVerdict | None:
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
    from ..localize.localizer import replayable
    from ..localize.region import make_region, run_region

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
    vid, mine, base = _differing_output(ctx, d)
    position = [v for v in program.ops[d.op.index].outputs if v is not None].index(vid)
    own = {v: x for v, x in served.items() if (y := _value_of(ctx, v)) is None or y.tobytes() != x.tobytes()}
    if own:  # the capture's values are not the served model's: judge the kernel on the served model's own
        vals = dataclasses.replace(ctx.path_vals, values={**ctx.path_vals.values, **own})
        mine = np.asarray(served_out).reshape(mine.shape)
        seen += (f" (read from {ctx.path}'s own run of its served model: the capture's values of its inputs are "
                 "not the served model's)")
    else:
        vals = ctx.path_vals
    try:
        region = make_region(program, vals, ops, d.op.index)
        alone = run_region(ctx.path, region)
        exact = run_region("f64", region)
        # the baseline on the same inputs: its own replay where it can run a region, else its own values
        # where its inputs are the path's
        theirs = np.asarray(run_region(ctx.baseline, region)[position]) if replayable(ctx.baseline) else (
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
    off_mine = np.abs(mine.astype(np.float64) - wide)
    off_theirs = np.abs(np.asarray(theirs, np.float64) - wide)
    errs = (f"from the exact result on the same inputs: {ctx.path} {float(off_mine.max(initial=0)):.3g}, "
            f"{ctx.baseline} {float(off_theirs.max(initial=0)):.3g}, bound up to {float(np.max(limit)):.3g}")
    mine_ok, theirs_ok = bool(np.all(off_mine <= limit)), bool(np.all(off_theirs <= limit))
    if mine_ok and theirs_ok:
        return CauseVerdict(cause.id, cause.title, "noise", what, f"{seen}; both sides are within the error bound "
                            f"of summing {n} terms ({errs}): another order of summation, neither wrong", cause.fix)
    who = ctx.path if not mine_ok else ctx.baseline
    return CauseVerdict(cause.id, cause.title, "confirmed", what, f"{seen}; {who} is beyond the error bound of "
                        f"summing {n} terms ({errs}): {who} is wrong here",
                        "report it to the maintainers of " + who + " with this report (jaxparity reduce writes a "
                        "standalone reproducer)")


def _region_bound(region: Any, position: int, mine: np.ndarray, base: Any, program: Any,
                  ops: list[int]) -> tuple[np.ndarray, int] | None:
    """Per element, how far any order of the region's sums may land from the exact result: 2·γ_n·Σ|terms|
    (Higham, Sec. 4.2; the region evaluated in float64 on the inputs' magnitudes) plus an ULP of each
    side's rounding; and n, the terms of its longest sum. None where the region holds an op beyond sums
    and scaling (no such bound then)."""
    import dataclasses

    from ..localize.localizer import _contraction_length, _unit_roundoff
    from ..localize.region import run_region

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
    return 2 * gamma * size + out_ulp, n


def _tensor_type(shape: tuple[int, ...], dtype: str) -> str:
    """'tensor<32x64xbf16>': how MLIR writes a JAX value's type."""
    short = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64"}.get(dtype, dtype)
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{short}>"


def _reduction_tiles(artifact: Any, out_type: str) -> list[tuple[int, Any]]:
    """(reduction tile, kernel) of the artifact's contractions that accumulate into a buffer of the op's
    output type: how many terms the kernel adds before it stores the running sum in that buffer."""
    found = []
    for k in artifact.kernels if artifact is not None else ():
        acc = k.attributes.get("accumulator", "")
        tile = k.attributes.get("vector_reduction")
        if acc != out_type or tile is None:
            continue
        sizes = [int(t) for t in re.findall(r"\d+", tile) if int(t) > 0]
        if sizes:
            found.append((sizes[-1], k))
    return found


def _narrow_accumulation(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """A narrow (bf16/f16) dot whose path values are reproduced bit for bit by accumulating a block of
    terms in float32 and rounding the running sum to the narrow dtype between blocks; the block is the
    runtime's own reduction tile where its artifact says it (IREE's ``vector_reduction``), else each power
    of two is tried. The fix, an explicit float32 accumulator, is re-run on both sides."""
    from ..interpreter.accumulation import blocked_conv, blocked_dot_general
    from ..localize.localizer import _contraction_length

    blocked = {"dot_general": blocked_dot_general, "conv_general_dilated": blocked_conv}
    if ctx.path_vals is None or ctx.base_vals is None:
        return None
    for d in _named(ctx.localization):
        op = ctx.program.ops[d.op.index]
        if d.op.primitive not in blocked or not d.op.outputs or not d.op.outputs[0].startswith(("bfloat16", "float16")):
            continue
        found = _differing_output(ctx, d)
        if found is None:
            continue
        _, mine, theirs = found
        dtype = mine.dtype
        lhs, rhs = (np.asarray(x) for x in _op_inputs(ctx, d))
        n = _contraction_length(op)
        artifact = ctx.artifact()
        tiles = _reduction_tiles(artifact, _tensor_type(mine.shape, dtype.name))
        tried = [t for t, _ in tiles] or [2 ** i for i in range(int(math.log2(max(n, 1))) + 1) if 2 ** i < n]
        what = f"accumulation in blocks, on the captured inputs of {_where(d)}"
        for block in dict.fromkeys(tried):
            got = blocked[d.op.primitive](op.eqn.params, lhs, rhs, dtype, block)
            if got is None or got.astype(dtype).tobytes() != mine.tobytes():
                continue
            kernel = next((k for t, k in tiles if t == block), None)
            said = (f" (its {kernel.kind} in {kernel.attributes['dispatch']} accumulates into its "
                    f"{kernel.attributes['accumulator']} output: vector_reduction = {kernel.attributes['vector_reduction']})"
                    if kernel is not None else f" (a block of {block} found by trying each power of two)")
            ev = d.elements
            side = (f"; {ctx.baseline} accumulates all {n} in float32 and rounds once"
                    + (f" (it is {ev.baseline_ulp} ULP from the correctly rounded result, {ctx.path} up to {ev.path_ulp})"
                       if ev is not None and ev.path_ulp is not None and ev.baseline_ulp is not None else ""))
            seen = (f"{ctx.path} adds the {n} products of {_where(d)} in float32 {block} at a time and rounds the running "
                    f"sum to {dtype.name} between blocks{said}: that reproduces its values bit for bit{side}")
            return _verified_accumulator(cause, ctx, d, what, seen)
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"no block size ({', '.join(map(str, tried))}) "
                            f"reproduces {ctx.path}'s values of {_where(d)}")
    return None


def _narrow_contractions(program: Any) -> list[int]:
    """The program's dots and convolutions that give a narrow (bf16/f16) result without a wider
    preferred_element_type: every one a runtime may accumulate in its narrow output."""
    found = []
    for op in program.ops:
        if op.info.primitive not in ("dot_general", "conv_general_dilated") or not op.info.outputs:
            continue
        preferred = op.eqn.params.get("preferred_element_type")
        if op.info.outputs[0].startswith(("bfloat16", "float16")) and (
                preferred is None or np.dtype(preferred).itemsize < 4):
            found.append(op.info.index)
    return found


def _verified_accumulator(cause: Cause, ctx: Any, d: Any, what: str, seen: str) -> CauseVerdict:
    """The dot with an explicit float32 accumulator, cast back after, re-run on the path and the baseline;
    where that alone does not restore parity and the program has other narrow dots and convolutions (the
    runtime accumulates them alike), all of them rewritten so, re-run too: the closer of the two is said."""
    def wide(op: Any, ins: list[Any]) -> list[Any]:
        params = dict(op.eqn.params, preferred_element_type=np.dtype(np.float32))
        return [op.eqn.primitive.bind(*ins, **params).astype(op.eqn.outvars[0].aval.dtype)]

    at = d.op.user_source or d.op.source or "the op's line"
    what_op = "dot" if d.op.primitive == "dot_general" else "convolution"
    narrow = d.op.outputs[0].split('[')[0]
    flax = (f"flax: the layer keeps its dtype and gets {d.op.primitive}=lambda *a, **k: jax.lax.{d.op.primitive}(*a, "
            f"**k, preferred_element_type=jnp.float32).astype(jnp.{narrow})")
    remedy = (f"accumulate in float32 on every path: preferred_element_type=jnp.float32 on the {what_op} at {at}, "
              f"then .astype(jnp.{narrow}) ({flax})")
    one = _model_change(cause, ctx, what, seen, remedy, _with_op(ctx.program, d.op.index, wide),
                        "float32 accumulator", f"with a float32 accumulator at {at}")
    others = [i for i in _narrow_contractions(ctx.program) if i != d.op.index]
    if one.proof is None or one.proof.verified or not others or one.proof.rerun is None:
        return one
    every = set(others) | {d.op.index}
    n = len(others)

    remedy_all = (f"accumulate in float32 on every path, at every {narrow} dot and convolution of the model (the "
                  f"{what_op} at {at} and {n} other{'s' if n != 1 else ''}: {ctx.path} accumulates them alike): "
                  f"preferred_element_type=jnp.float32, then .astype(jnp.{narrow}) ({flax})")
    every_fix = _model_change(cause, ctx, what, seen, remedy_all, _with_op(ctx.program, every, wide), "float32 accumulators",
                              f"with float32 accumulators at its {n + 1} {narrow} dots and convolutions")
    if every_fix.proof is None or every_fix.proof.rerun is None:
        return one
    def worse(v: CauseVerdict) -> tuple:  # parity first, then the smaller max abs, then fewer elements
        return (v.proof.rerun.outcome != "parity", v.proof.rerun.after[2], v.proof.rerun.after[0])

    return min((one, every_fix), key=worse)


def _between(artifact: Any, start: set[int], end: int) -> list[Any] | None:
    """The kernels that compute tensor ``end`` from the tensors ``start`` (and stored constants), in the
    artifact's order; None where ``end`` depends on another computed tensor."""
    chain: dict[int, Any] = {}
    stack = [end]
    while stack:
        t = stack.pop()
        if t in start or (artifact.tensors.get(t) is not None and artifact.tensors[t].constant):
            continue
        k = artifact.producer(t)
        if k is None:
            return None
        if k.index not in chain:
            chain[k.index] = k
            stack.extend(i for i in k.inputs if i >= 0)
    return [chain[i] for i in sorted(chain)]


def _path_far(d: Any) -> bool:
    """The path, not the baseline, is far from the op's correctly rounded result: wrong where the baseline is
    right, or beyond a math library's few ULP and many times the baseline's distance."""
    ev = d.elements
    if ev is None or ev.path_ulp is None or ev.baseline_ulp is None:
        return False
    return ev.wrong_side() == "path" or (ev.path_ulp > MATH_LIBRARY_ULP and ev.path_ulp > 16 * max(ev.baseline_ulp, 1))


def _same_fault(other: str, path: str, alone: np.ndarray, mine: np.ndarray, theirs: np.ndarray) -> str:
    """Where the path departs from the baseline, does the artifact's other runtime, on the op alone, err as
    the path does (nearer its values than the baseline's: the converter's doing) or not (the kernels')?"""
    from ..localize.localizer import values_equal
    from ..metrics import ulp_distance

    if alone.shape != mine.shape or alone.dtype != mine.dtype:
        return f"{other} gives another kind of value on the op alone"
    differ = ulp_distance(mine, theirs) != 0
    to_path = ulp_distance(alone[differ], mine[differ])
    to_base = ulp_distance(alone[differ], theirs[differ])
    worst = lambda u: int(np.where(u < 0, np.iinfo(np.int64).max, u).max(initial=0))  # noqa: E731
    if values_equal(alone, mine):
        return f"{other} runs the same kernels to the same values: the converter's decomposition is at fault, not {path}'s kernels"
    if worst(to_path) < worst(to_base):
        return (f"{other} runs the same kernels to within {worst(to_path)} ULP of {path}'s values where {path} departs "
                f"(and {worst(to_base)} from the baseline's): the converter's decomposition is at fault, not {path}'s "
                "kernels")
    return f"{other} gives the baseline's values on the same kernels: {path}'s kernels are at fault"


def _decomposed(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """One JAX op that the converter wrote as several kernels (jax2onnx's erfc as 1 - Erf): found between
    the tensors that hold the op's inputs and its output in the runtime's own run; each kernel's value at
    the example element shown; the same kernels on the other runtime of that artifact (onnx-ref for onnx)
    tell the converter from the runtime."""
    from ..localize.region import make_region, run_region
    from ..paths import make_path

    artifact = ctx.artifact()
    if artifact is None or not artifact.values or ctx.path_vals is None or ctx.base_vals is None:
        return None
    for d in _named(ctx.localization):
        found = _differing_output(ctx, d)
        if found is None:
            continue
        _, mine, theirs = found
        outs = artifact.holding(mine, constant=False)
        ins = [x for x in _op_inputs(ctx, d) if x is not None and np.asarray(x).size > 1]
        starts = {t for x in ins for t in artifact.holding(np.asarray(x))}
        chain = next((c for t in outs if (c := _between(artifact, starts, t)) is not None), None)
        computing = [k for k in chain or () if k.kind not in MOVES]
        if len(computing) < 2 or d.within_noise_bound or not _path_far(d):
            continue  # one kernel that computes (the others move values), rounding noise, or not the path's error
        kinds_ = [k.kind for k in chain]
        names = " → ".join(kinds_ if len(kinds_) <= 6 else [*kinds_[:3], "…", *kinds_[-2:]])
        seen = (f"the converter writes {_where(d)} as {len(chain)} kernels of {artifact.runtime}: {names}")
        ex = d.elements.example if d.elements is not None else None
        if ex is not None and mine.ndim and len(ex.index) == mine.ndim:
            steps = []
            for k in (chain if len(chain) <= 6 else [*chain[:3], *chain[-2:]]):
                x = artifact.values.get(k.outputs[0])
                if x is not None and x.shape == mine.shape:
                    steps.append(f"{k.kind} gives {_show(x[tuple(ex.index)])}")
            shown = ", ".join(f"{v:.9g}" if isinstance(v, float) else str(v) for v in ex.inputs if v is not None)
            correct = f", where the correctly rounded result is {_show(np.asarray(ex.correct))}" if ex.correct is not None else ""
            seen += (f"; at element {list(ex.index)}{f' (inputs {shown})' if shown else ''}: {', '.join(steps)}"
                     f"{correct} ({ctx.baseline} {_show(np.asarray(ex.baseline))})")
        what = f"{artifact.runtime}'s kernels for {_where(d)}, and the op alone on the artifact's other runtime"
        other = make_path(ctx.path).same_artifact
        if other is not None:
            try:
                region = make_region(ctx.program, ctx.path_vals, [d.op.index], d.op.index)
                position = [v for v in ctx.program.ops[d.op.index].outputs if v is not None].index(found[0])
                theirs_alone = np.asarray(run_region(other, region)[position])
            except Exception as e:  # noqa: BLE001 - evidence, not a requirement
                seen += f"; {other} could not run the op alone ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
            else:
                seen += "; " + _same_fault(other, ctx.path, theirs_alone, mine, np.asarray(theirs))
        wrong = d.elements.wrong_side() if d.elements is not None else None
        if wrong == "baseline":
            seen += f"; {ctx.baseline} is the side farther from the correctly rounded result"
        return CauseVerdict(cause.id, cause.title, "confirmed", what, seen, cause.fix)
    return None


def _first_diverging_kernel(ctx: Any, artifact: Any) -> tuple[Any, list[int], int, list[int]] | None:
    """Localized on the runtime's own run of its artifact, against the baseline's per-op values: the first
    kernel (in the artifact's order) whose inputs all hold values of the baseline (or stored constants) and
    whose output holds none. Returns the kernel, the value ids its inputs hold, the value id its output
    stands for (a case output by position, else the baseline value of that shape nearest to it) and the
    JAX ops between: what the kernel computes in the program's terms."""
    import hashlib

    def digest(a: np.ndarray) -> tuple:  # a value by its bits, without keeping them
        return a.shape, a.dtype.name, hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).digest()

    program, base = ctx.program, ctx.base_vals
    pool: dict[tuple, int] = {}
    for vid, x in [*zip(program.arg_ids, ctx.flat_args), *program.consts.items(), *base.values.items()]:
        pool.setdefault(digest(np.asarray(x)), vid)
    outputs = {t: program.out_ids[i] for i, t in enumerate(artifact.outputs)
               if i < len(program.out_ids) and not isinstance(program.out_ids[i], Literal)}
    for k in artifact.kernels:
        key = lambda t: digest(artifact.values[t])  # noqa: E731
        if any(t >= 0 and t not in artifact.values for t in (*k.inputs, *k.outputs)):
            return None  # a value the run did not keep: no kernel-level view past it
        ins = [pool.get(key(t)) for t in k.inputs if t >= 0 and not artifact.tensors[t].constant]
        if any(v is None for v in ins):
            continue  # fed by a value the baseline never has: downstream of the first departure
        departs = [t for t in k.outputs if key(t) not in pool]
        if not departs:
            continue
        t = departs[0]
        vid = outputs.get(t)
        if vid is None:
            x = artifact.values[t].astype(np.float64)
            near = [(float(np.nanmax(np.abs(np.asarray(y, np.float64) - x), initial=0.0)), v) for v, y in base.values.items()
                    if np.asarray(y).shape == x.shape and np.asarray(y).dtype == artifact.values[t].dtype]
            if not near:
                return None
            vid = min(near)[1]
        producers = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
        if vid not in producers:
            return None
        index = producers[vid]
        sources = set(ins)
        region = [i for i in sorted(_ancestors(program, index)) if _reaches_from(program, i, sources)
                  and not any(v in sources for v in program.ops[i].outputs)] + [index]
        return k, list(ins), vid, region
    return None


def _kernel_attribute(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """The kernel where the served model departs, run with each other value of its attributes that the path
    knows (``Path.kernel_variants``: Resize's exclude_outside, cubic_coeff_a...): the value with which the
    path meets the baseline, at parity or within the model's own rounding noise, is the mechanism (the
    converter chose the other one), and setting it on the converted model is the fix, verified by that run."""
    from ..paths import make_path

    artifact = ctx.artifact()
    if artifact is None or not artifact.values or ctx.base_vals is None:
        return None
    path = make_path(ctx.path)
    if not any(path.kernel_variants(k) for k in artifact.kernels):
        return None  # no kernel of this artifact has other semantics to try
    first = _first_diverging_kernel(ctx, artifact)
    if first is None:
        return None
    kernel, _, vid, region = first
    variants = path.kernel_variants(kernel)
    if not variants:
        return None
    ops = [ctx.program.ops[i].info for i in region]
    lines = sorted({o.user_source or o.source or "?" for o in ops})
    covers = (f"#{ops[0].index} {ops[0].primitive}" if len(ops) == 1 else
              f"#{ops[0].index}..#{ops[-1].index} ({len(ops)} ops)") + f" at {', '.join(lines[:2])}"
    settings = ", ".join(f"{a}={v}" for a, v in kernel.attributes.items())
    seen = (f"{artifact.runtime} computes {covers} as one {kernel.kind} kernel ({settings}); it is where {ctx.path} "
            f"departs from {ctx.baseline}: its inputs hold {ctx.baseline}'s values, its output does not")
    what = f"each other attribute value of that {kernel.kind} on the served model, re-run on {ctx.path}"
    ideal = ctx.run("f64")
    noise = max(max_gaps(ctx.base_out, ideal)) if not isinstance(ideal, str) else 0.0
    tried = []
    for words, spec in variants:
        outs = ctx.run(spec)
        if isinstance(outs, str):
            tried.append((math.inf, words, spec, None))
            continue
        tried.append((max(max_gaps(outs, ctx.base_out), default=0.0), words, spec, ctx.compare(outs, ctx.base_out)))
    gap, words, spec, rerun = min(tried, key=lambda x: x[0])
    before = max(max_gaps(ctx.path_out, ctx.base_out), default=0.0)
    if rerun is None or not (rerun.outcome == "parity" or gap <= 2 * noise) or gap >= before:
        shown = "; ".join(f"{sp.split('set_attribute=', 1)[-1]}: max abs {g:.3g}" for g, _, sp, _ in tried[:4])
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{seen}; no other attribute value brings it to "
                            f"{ctx.baseline} ({shown}; before: {before:.3g})")
    same = path.same_artifact
    if same is not None:
        other = ctx.run(same)
        if not isinstance(other, str) and max(max_gaps(other, ctx.path_out), default=0.0) <= 2 * noise < before:
            seen += (f"; {same} runs the same converted model to {ctx.path}'s values (within the model's rounding "
                     "noise): the converter's choice of attribute, not the runtime's kernel")
    state = (f"at parity with {ctx.baseline}" if rerun.outcome == "parity" else
             f"within the model's own rounding noise of {ctx.baseline} (max abs {before:.3g} → {gap:.3g}; "
             f"{ctx.baseline} is {noise:.3g} from f64)")
    setting = spec.split("set_attribute=", 1)[1]
    evidence = f"with {setting} ({words}) {ctx.path} is {state}"
    remedy = (f"set {setting} on the converted model (the path option set_attribute={setting}; in the model file: "
              f"that attribute on its {kernel.kind} nodes), and report the converter's choice to its maintainers")
    proof = Fix("runtime option", remedy, spec, True, evidence, rerun=rerun)
    return CauseVerdict(cause.id, cause.title, "confirmed", what, f"{seen}; {evidence}", remedy, proof)


# Elementwise arithmetic a compiler may keep in float32 across ops where the program declares bf16/f16.
_ELEMENTWISE = {"add", "sub", "mul", "div", "neg", "sqrt", "rsqrt", "max", "min", "abs", "square", "integer_pow"}


def kept_wide(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """Narrow (bf16/f16) arithmetic kept in float32 across ops, rounded once where the result is stored: the
    elementwise narrow ops that feed the diverging one, run as a region in float32 on the values entering
    it (the path's own) and rounded once, must reproduce the path's values bit for bit; the longest such
    region is named, with the runtime's own note where it printed one (IREE: iree-convert-bf16-arith-to-f32)."""
    import jax
    import jax.numpy as jnp

    from ..localize.region import make_region
    from ..rounding import round_to_dtype

    if ctx.path_vals is None or ctx.base_vals is None or ctx.localization is None:
        return None
    program = ctx.program
    producers = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
    for d in _named(ctx.localization):
        if d.op.primitive not in _ELEMENTWISE or not d.op.outputs or not d.op.outputs[0].startswith(("bfloat16", "float16")):
            continue
        found = _differing_output(ctx, d)
        if found is None:
            continue
        _, mine, _ = found
        chain = [d.op.index]  # the narrow elementwise ops upstream, nearest first
        frontier = [d.op.index]
        while frontier and len(chain) < 12:
            i = frontier.pop()
            for ref in program.ops[i].inputs:
                j = producers.get(ref) if not isinstance(ref, Literal) else None
                if j is None or j in chain:
                    continue
                op = program.ops[j].info
                if op.primitive in _ELEMENTWISE and op.outputs and op.outputs[0].startswith(("bfloat16", "float16")):
                    chain.append(j)
                    frontier.append(j)
        for size in range(len(chain), 0, -1):
            ops = sorted(chain[:size])
            try:
                region = make_region(program, ctx.path_vals, ops, d.op.index)
            except Exception:  # noqa: BLE001 - a region that cannot be cut is no evidence
                continue
            wide = [jnp.asarray(np.asarray(v).astype(np.float32)) if np.asarray(v).dtype.kind in "fV" or
                    np.asarray(v).dtype.name == "bfloat16" else jnp.asarray(v) for v in region.values]
            sub = region.sub_program()
            with jax.default_device(jax.devices("cpu")[0]):
                values = sub.evaluate(wide, lambda op, ins: _bound_wide(op, ins))
            out = np.asarray(sub.outputs(values)[0], np.float64)
            got = round_to_dtype(out, mine.dtype)
            if got.tobytes() != mine.tobytes():
                continue
            names = " → ".join(f"#{i} {program.ops[i].info.primitive}" for i in ops)
            said = next((n for n in ctx.notes if "bf16 arithmetic ops (" in n), None)  # a dispatch's own line
            seen = (f"{ctx.path} computes {names} ({d.op.user_source or d.op.source or 'unknown line'}) in float32 and "
                    f"rounds to {mine.dtype.name} once, where the program rounds after every op: on the values entering "
                    f"them that reproduces its values bit for bit")
            if said:
                seen += f" (its own note: {said.removeprefix('IREE: ')})"
            return CauseVerdict(cause.id, cause.title, "confirmed", f"the region {names} computed in float32 on "
                                f"{ctx.path}'s own inputs", seen, cause.runtime_fix or cause.fix)
    return None


def _bound_wide(op: Any, ins: list[Any]) -> list[Any]:
    """The op on float32 values: an elementwise narrow op bound on wide inputs (its narrow constants
    widened too, exactly) computes in float32."""
    import jax.numpy as jnp

    wide = [jnp.asarray(x).astype(jnp.float32) if jnp.asarray(x).dtype in (jnp.bfloat16, jnp.float16) else x
            for x in ins]
    return _bound(op, wide)


ARTIFACT_RULES: dict[str, Callable[[Cause, Any], CauseVerdict | None]] = {
    "stored-constant": _stored_constant,
    "fused-kernel": _fused_kernel,
    "narrow-accumulation": _narrow_accumulation,
    "converter-decomposition": _decomposed,
    "kernel-attribute": _kernel_attribute,
}
