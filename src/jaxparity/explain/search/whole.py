"""Changes that bind the program otherwise without changing its math, for paths whose converter lowers a whole
library call its own way: each call the converter replaced (read from its artifact) computed from JAX's own
primitives, and the whole program bound primitive by primitive."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..context import Context
from ..mechanism.captured import bound, with_op
from ..verdicts import Fix
from .candidates import Candidate
from .rerun import as_accurate, both, rerun_candidate

__all__ = ["bound_plainly", "said_bound", "whole_calls"]


# Nothing changed but that every op is bound primitive by primitive (a converter then sees no whole call).
_PLAIN = Candidate("the program bound primitive by primitive", "", "formulation", lambda op, ins: bound(op, ins))


def bound_plainly(ctx: Context) -> Fix:
    """The model with nothing changed but that every op is bound primitive by primitive, re-run: a converter that
    lowers a library call whole (LogSoftmax for jax.nn.log_softmax) then converts its primitives one by one."""
    plain = _PLAIN
    lines = sorted({op.info.user_source for op in ctx.program.ops if op.info.user_source})
    at = ", ".join(lines) or "the model"
    fix = rerun_candidate(ctx, plain, set(), "the program bound primitive by primitive rewritten", at, None)
    if not fix.verified:
        return dataclasses.replace(fix, description=f"write the library calls at {at} out from JAX's own primitives "
                                   "(the program bound primitive by primitive, nothing else changed)")
    converter = ctx.path.converter or "the converter"
    return dataclasses.replace(fix, description=(
        f"write the library calls at {at} out from JAX's own primitives: bound primitive by primitive, with nothing "
        f"else changed, the model agrees ({converter} lowers a whole call its own way otherwise)"))


def said_bound(ctx: Context, fixes: list[Fix]) -> list[Fix]:
    """Every model change is re-run as the program bound primitive by primitive: where the path's converter lowers
    a library call whole and binding the program so alone changes the path's outputs, the re-run measured that
    too, so each verified model change says it (applied by hand, it is then the same model that was re-run)."""
    if not ctx.path.converter or not any(f.verified and f.kind == "model change" for f in fixes):
        return fixes
    plain = _PLAIN
    outs = ctx.run(ctx.path, with_op(ctx.program, set(), plain.instead), "the program bound primitive by primitive "
                   "rewritten")
    if isinstance(outs, str) or all(np.asarray(a).tobytes() == np.asarray(b).tobytes()
                                    for a, b in zip(outs, ctx.path_out)):
        return fixes
    lines = sorted({op.info.user_source for op in ctx.program.ops if op.info.user_source})
    at = f" at {', '.join(lines[:3])}" if lines else ""
    converter = ctx.path.converter
    words = (f", with the library calls{at} written out from JAX's own primitives too ({converter} lowers a whole call "
             f"its own way, and that alone changes {ctx.path}'s outputs: the re-run measured the two together)")
    return [dataclasses.replace(f, description=f.description + words)
            if f.verified and f.kind == "model change" and words not in f.description else f for f in fixes]


def whole_calls(ctx: Context, tried: list[Fix]) -> Fix | None:
    """The calls the path's converter replaced whole by its own lowering (``Artifact.converted``: jax2onnx's
    plugins for ``jax.nn.log_sigmoid``...), each computed from JAX's own primitives instead: the call hidden
    from the converter while the model is converted, so it converts the primitives one by one."""
    import importlib

    from ...localize.program import lines_calling

    artifact = ctx.artifact()
    converted = list(dict.fromkeys(name for name, _ in getattr(artifact, "converted", ()) or ()))
    converter = ctx.path.converter or "the converter"
    for qual in converted:
        module, _, attr = qual.rpartition(".")
        try:
            owner = importlib.import_module(module)
            original = getattr(owner, attr)
        except Exception:  # noqa: BLE001 - a call this environment cannot name
            continue
        lines = lines_calling(ctx.program, attr)
        at = f" (at {', '.join(lines)})" if lines else ""
        label = f"{qual} from its primitives rewritten"
        fixed = _hidden(ctx.fn, owner, attr, original)
        description = (f"compute {qual}{at} from JAX's own primitives, not {converter}'s lowering of the whole call: "
                       f"bind it before the model is converted ({attr} = {qual} at import, then call {attr}(...)), "
                       "or write it out")
        outs = both(ctx, fixed, label)
        if isinstance(outs, str):
            tried.append(Fix("model change", description, None, False, f"{qual} from its primitives: {outs}",
                             ran=True))
            continue
        rerun = ctx.compare(outs[0], outs[1])
        said = (f"{converter} converted {qual} whole; computed from its primitives, {ctx.path} and {ctx.baseline} "
                f"were re-run")
        if rerun.outcome == "parity" or as_accurate(ctx, rerun, outs[0], outs[1], fixed):
            words = (f"{said}: they agree (were {rerun.before[0]} elements apart)" if rerun.outcome == "parity" else
                     f"{said}: {rerun.before[0]} → {rerun.after[0]} elements differ, within the rewritten program's "
                     "own rounding noise")
            return Fix("model change", description, f"{ctx.path} [{label}]", True, words, rerun=rerun)
        tried.append(Fix("model change", description, None, False,
                         f"{said}: they still differ in {rerun.after[0]} elements (were {rerun.before[0]})",
                         rerun=rerun))
    return None


def _hidden(fn: Any, owner: Any, attr: str, original: Any) -> Any:
    """``fn`` with ``owner.attr`` replaced, while it runs, by a plain function that calls the original: a
    converter that intercepts the attribute sees a function it does not know, and traces through it."""

    def plain(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    def fixed(*args: Any) -> Any:
        saved = getattr(owner, attr)
        setattr(owner, attr, plain)
        try:
            return fn(*args)
        finally:
            setattr(owner, attr, saved)

    return fixed
