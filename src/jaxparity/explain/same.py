"""A path compiled by XLA whose outputs are another such path's bit for bit (export and savedmodel often give
jit's values: one program through one compiler pipeline) shares that path's mechanism: its explanation is the other's — per-op view, blame, causes and their
experiments — and only what is its own is run again: each fix, said in this path's terms (a compile option
as a serving flag where the path takes XLA's options in its serving process's XLA_FLAGS) and re-run on it,
with its cost. Explaining it again from the start would repeat every capture and re-run of the other (the
larger part of an explanation of a real model) to find the same values."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..paths import Path, make_path
from ..paths.base import parse_xla_flags
from .context import Context
from .every_path import WHOLE_MODEL_CHANGES
from .explanation import PathExplanation
from .fix import _rounded_like_declared, fixed_side, with_cost
from .sentence import summarize
from .verdicts import Fix

__all__ = ["explained_as", "on_path"]

def explained_as(host: PathExplanation, ctx: Context, path: Path, path_out: Sequence[np.ndarray]) -> PathExplanation:
    """``path``'s explanation where its outputs ``path_out`` are bit for bit those of ``host`` (explained with
    ``ctx``): ``host``'s, with each fix re-run on ``path``."""
    mine = dataclasses.replace(ctx, path=path, path_out=list(path_out), device=path.device(), notes=[],
                               runs=_baseline_runs(ctx), ahead={}, models=dict(ctx.models), memo={})
    fixes, dropped = [], []
    for fix in host.fixes:
        moved = _moved(fix, ctx, mine)
        if moved is None:
            dropped.append(fix.spec or fix.description)
        else:
            fixes.append(moved)
    note = (f"explained as {host.path}: {path} gives {host.path}'s values bit for bit, so {host.path}'s per-op view, "
            f"causes and experiments stand for it; its fixes were re-run on {path}")
    if dropped:
        note += f" (not {', '.join(dropped)}: no such change reaches {path.name})"
    remainder = None if host.remainder is None else dataclasses.replace(
        host.remainder, notes=host.remainder.notes + (f"what remains on {host.path}, explained there",))
    return summarize(dataclasses.replace(host, path=str(path), summary="", fixes=tuple(fixes), same_values=host.path,
                                         notes=(note, *host.notes), remainder=remainder))


def _baseline_runs(ctx: Context) -> dict:
    """The re-runs of ``ctx`` that did not run its path: the baseline's (of the model and of model changes)
    and the f64 ideal, which the other path's fixes are measured against too."""
    base = str(ctx.baseline)
    return {k: v for k, v in ctx.runs.items() if k == "f64" or k == base or k.startswith(base + " [")}


def on_path(spec: str, host: Path, path: Path) -> str | None:
    """A re-run spec of ``host`` (its path with more options) said for ``path``: XLA options as they reach it
    (``Path.with_xla_option``), JAX options where it takes them; None where an option does not reach it."""
    try:
        changed = make_path(spec)
    except Exception:
        return None
    if changed.name != host.name:
        return None
    out = path
    for key, value in changed.options.items():
        if host.options.get(key) == value:
            continue
        try:
            if key == "XLA_FLAGS":
                before = parse_xla_flags(host.options.get("XLA_FLAGS", ""))
                for flag, v in parse_xla_flags(value).items():
                    if before.get(flag) != v:
                        out = out.with_xla_option(flag, v)
            elif key.startswith("xla_") and host.xla_option_kind is not None:
                out = out.with_xla_option(key, value)
            elif key.startswith("jax_") and "jax_*" in path.options_help:
                out = out.with_option(key, value)
            else:
                return None
        except Exception:  # an option this path does not take
            return None
    return out.spec


def _moved(fix: Fix, host: Context, ctx: Context) -> Fix | None:
    """``fix`` (verified or not on the host's path) re-run on ``ctx.path``; None where it cannot be said there."""
    if not fix.spec:
        return fix  # advice without a re-run: the same for both
    spec, _, label = fix.spec.partition(" [")
    label = label.removesuffix("]")
    if fixed_side(host, spec) == "baseline":
        return fix  # a change of the baseline's side: the same against the same outputs
    if label:
        if label == "fixed model":
            return with_cost(ctx, _rounded_like_declared(ctx))
        if label not in WHOLE_MODEL_CHANGES:
            return None  # a change found at the host's op: ``every_path`` re-runs it on this path
        return with_cost(ctx, _model_change(fix, label, ctx))
    target = on_path(spec, host.path, ctx.path)
    if target is None:
        return None
    outs = ctx.run(target)
    kind = ctx.path.xla_option_kind or fix.kind
    if isinstance(outs, str):
        return Fix(kind, fix.description, target, False, f"the re-run failed ({outs})")
    rerun, result = ctx.measured(outs)
    return with_cost(ctx, Fix(kind, fix.description, target, rerun.after[0] == 0, ctx.seen(rerun, str(target), result),
                              rerun=rerun))


def _model_change(fix: Fix, label: str, ctx: Context) -> Fix:
    """A whole-model change of the host's (its model kept in ``ctx.models``) re-run on this path, against the
    baseline's run of it where the host's was measured so."""
    model = ctx.models.get(label)
    if model is None:
        return dataclasses.replace(fix, verified=False, evidence=f"{fix.evidence} (not re-run on {ctx.path})")
    outs = ctx.run(ctx.path, model, label)
    theirs = ctx.runs.get(f"{ctx.baseline} [{label}]", ctx.base_out)
    if isinstance(outs, str) or isinstance(theirs, str):
        return Fix(fix.kind, fix.description, None, False, f"the changed model failed: {outs if isinstance(outs, str) else theirs}")
    rerun = ctx.compare(outs, theirs) if theirs is not ctx.base_out else ctx.measured(outs)[0]
    n = rerun.after[0]
    return Fix(fix.kind, fix.description, f"{ctx.path} [{label}]", n == 0,
               f"{ctx.path} on the changed model " + (f"equals {ctx.baseline}" if n == 0 else
                                                      f"still differs from {ctx.baseline} in {n} elements"),
               rerun=rerun)
