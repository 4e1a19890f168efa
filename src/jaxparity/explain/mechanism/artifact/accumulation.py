"""``narrow-accumulation``: a bf16/f16 dot whose path values are reproduced bit for bit by adding a block of
terms in float32 and rounding the running sum to the narrow dtype between blocks (IREE's matmul accumulates
into its bf16 output, tiled by its ``vector_reduction``, read from its own dispatch configuration). The fix,
an explicit float32 accumulator, is verified on both sides."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ...causes import Cause
from ...verdicts import CauseVerdict
from ..captured import differing_output as _differing_output
from ..captured import model_change as _model_change
from ..captured import named as _named
from ..captured import op_inputs as _op_inputs
from ..captured import where as _where
from ..captured import with_op as _with_op

__all__ = ["narrow_accumulation"]


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


def narrow_accumulation(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """A narrow (bf16/f16) dot whose path values are reproduced bit for bit by accumulating a block of
    terms in float32 and rounding the running sum to the narrow dtype between blocks; the block is the
    runtime's own reduction tile where its artifact says it (IREE's ``vector_reduction``), else each power
    of two is tried. The fix, an explicit float32 accumulator, is re-run on both sides."""
    from ....interpreter.accumulation import blocked_conv, blocked_dot_general
    from ....localize.localizer import _contraction_length

    blocked = {"dot_general": blocked_dot_general, "conv_general_dilated": blocked_conv}
    if ctx.path_vals is None and hasattr(ctx.path, "dispatches"):
        return _per_dispatch(cause, ctx)  # no op-level view: the runtime's own dispatches are the view
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
    # A flax layer's own dot or convolution takes the function as an attribute; another library's (Keras, a
    # Hugging Face FlaxConv1D calling lax.dot_general) does not: no flax advice there.
    flax = (f" (flax: the layer keeps its dtype and gets {d.op.primitive}=lambda *a, **k: jax.lax.{d.op.primitive}("
            f"*a, **k, preferred_element_type=jnp.float32).astype(jnp.{narrow}))"
            if (d.op.source or "").startswith("flax/") else "")
    remedy = (f"accumulate in float32 on every path: preferred_element_type=jnp.float32 on the {what_op} at {at}, "
              f"then .astype(jnp.{narrow}){flax}")
    one = _model_change(cause, ctx, what, seen, remedy, _with_op(ctx.program, d.op.index, wide),
                        "float32 accumulator", f"with a float32 accumulator at {at}", widened={d.op.index})
    others = [i for i in _narrow_contractions(ctx.program) if i != d.op.index]
    if one.proof is None or one.proof.verified or not others or one.proof.rerun is None:
        return one
    every = set(others) | {d.op.index}
    n = len(others)

    remedy_all = (f"accumulate in float32 on every path, at every {narrow} dot and convolution of the model (the "
                  f"{what_op} at {at} and {n} other{'s' if n != 1 else ''}: {ctx.path} accumulates them alike): "
                  f"preferred_element_type=jnp.float32, then .astype(jnp.{narrow}){flax}")
    every_fix = _model_change(cause, ctx, what, seen, remedy_all, _with_op(ctx.program, every, wide), "float32 accumulators",
                              f"with float32 accumulators at its {n + 1} {narrow} dots and convolutions", widened=every)
    if every_fix.proof is None or every_fix.proof.rerun is None:
        return one
    one_rerun, every_rerun = one.proof.rerun, every_fix.proof.rerun
    # parity first, then the smaller max abs, then fewer elements
    return min(((one, one_rerun), (every_fix, every_rerun)),
               key=lambda vr: (vr[1].outcome != "parity", vr[1].after[2], vr[1].after[0]))[0]


def _per_dispatch(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """Each dispatch on its own captured inputs (``dispatches.findings``): confirmed where some that differ are
    reproduced bit for bit only with their contraction adding a block of terms at a time in float32 and rounding
    the running sum to its narrow output between blocks. None where no dispatch shows it (the instrumented view
    and the other experiments decide)."""
    from .dispatches import accumulated, findings

    seen = findings(ctx)
    if not seen or not seen[0]:
        return None
    found, _ = seen
    hits = accumulated(found)
    if not hits:
        return None
    worst = max(hits, key=lambda f: (f.differ / max(f.size, 1), f.max_ulp))
    dots = [ctx.program.ops[i].info for i in worst.ops if ctx.program.ops[i].info.primitive in blocked_kinds]
    block = worst.reproduced_by.split(":")[1] if worst.reproduced_by else "?"
    at = dots[0].user_source or dots[0].source or "the op's line" if dots else "?"
    seen_ = (f"{ctx.path} adds the products of {', '.join(f'#{d.index} {d.primitive}' for d in dots)} ({at}) in float32 "
             f"{block} at a time and rounds the running sum to its narrow output between blocks: on the dispatch's own "
             f"captured inputs that reproduces what {worst.name} stores bit for bit ({worst.differ} of {worst.size} "
             f"elements differ from the declared ops, up to {worst.max_ulp} ULP)"
             + (f"; so in {len(hits) - 1} more dispatch{'es' if len(hits) > 2 else ''}" if len(hits) > 1 else ""))
    return CauseVerdict(cause.id, cause.title, "confirmed", f"{ctx.path}'s dispatches, each on its own captured inputs",
                        seen_, cause.runtime_fix or cause.fix)


blocked_kinds = ("dot_general", "conv_general_dilated")
