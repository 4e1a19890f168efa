"""The mechanism stage's driver: each known cause in the table's order, not run (and why not) or decided by
its rule (``rules.run_experiment``); the whole-program re-runs a cause will ask for started ahead."""

from __future__ import annotations

import os
from typing import Any

from ...paths import Path
from ..causes import CAUSES, Cause
from ..context import Context, first_line
from ..verdicts import CauseVerdict
from .reruns import with_options
from .rules import run_experiment
from .widened import widened_side

__all__ = ["applies", "decide_causes", "start_ahead"]

# Experiments that re-run the whole program: not needed once another cause explains the divergence.
_RERUNS = ("recompile", "same-compiler", "matmul-precision")


def runs_on(path: Path, cause: Cause) -> bool:
    """Can ``cause`` occur on ``path`` (it has one of the capabilities the cause names)?"""
    return bool(path.capabilities & set(cause.runs_on))


def applies(cause: Cause, ctx: Context) -> str | None:
    """Why the cause cannot be behind this divergence, or None when its experiment should run. A cause the
    op's own values place on the baseline's side (excess precision kept by jit as the baseline of eager)
    applies where it applies to the baseline."""
    if not runs_on(ctx.path, cause) and not (widened_side(cause, ctx) == "baseline" and runs_on(ctx.baseline, cause)):
        return f"not applicable to the {ctx.path.name} path"
    if ctx.device not in cause.devices:
        return f"does not occur on {ctx.device}"
    if cause.dtypes is not None and not ctx.dtypes & set(cause.dtypes):
        return f"the program has no {'/'.join(cause.dtypes)} values"
    if cause.primitives is not None and ctx.localization is not None and ctx.localization.local:
        prims = {d.op.primitive for d in ctx.localization.local}
        if not prims & set(cause.primitives) and cause.experiment != "recompile":
            return f"no local divergence in {', '.join(cause.primitives)}"
    return None


def decide_causes(ctx: Context) -> list[CauseVerdict]:
    """Each known cause in the table's order: not run (why not), or its experiment's verdict."""
    causes: list[CauseVerdict] = []
    explained_by: str | None = None
    for cause in CAUSES:
        reason = applies(cause, ctx)
        # A documented option or a known mechanism that explains it is not wrong code; disabling a
        # whole pass (algsimp) can restore parity either way, so wrong code is still judged then.
        documented = cause.id == "wrong-code" and explained_by not in (None, "algebraic-rewrite")
        if reason is None and explained_by and (cause.experiment in _RERUNS or documented):
            reason = f"not needed: {explained_by} already explains it"
        if reason is not None:
            causes.append(CauseVerdict(cause.id, cause.title, "not run", "", reason))
            continue
        try:
            verdict = run_experiment(cause, ctx)
        except Exception as e:  # one experiment that fails is said, and never takes the explanation down
            verdict = CauseVerdict(cause.id, cause.title, "not run", cause.experiment,
                                   f"the experiment failed ({first_line(e)})")
        causes.append(verdict)
        # op evidence names a cause, not a full fix; a variant or the artifact that reproduces the values is the
        # mechanism whether or not its fix held
        # (a highest-precision re-run that leaves only another summation order is the mechanism too)
        restores = verdict.proof is None or verdict.proof.verified or cause.experiment in (
            "variants", "artifact", "matmul-precision", "device-arithmetic")
        # A fingerprint of subnormal flushing and an amplifier downstream do not explain the divergence alone.
        partial = verdict.cause == "amplification" or (verdict.cause == "denormal-flush"
                                                       and verdict.experiment.startswith("candidate"))
        # rounding noise established on every divergence that carries the difference explains it too: a
        # whole-program "another lowering" re-run then adds nothing
        if (verdict.status == "confirmed" and not partial and restores) or verdict.status == "noise":
            explained_by = explained_by or verdict.cause
    return causes


def start_ahead(ctx: Context, pool: Any) -> None:
    """The first flag re-runs the causes ask for, as many as there are cores, started now where they are
    independent of this process: a savedmodel re-run under other XLA_FLAGS is a serving process of its own
    (TensorFlow's import, its load and compile of the model: seconds each), converted here now and served
    from ``pool``'s threads while the experiments before them run here. Another path's serving processes are
    only started (``Path.prestart``)."""
    paths: dict[str, Path] = {}
    for cause in CAUSES:
        if (cause.experiment == "recompile" and cause.options and applies(cause, ctx) is None
                and runs_on(ctx.path, cause)):  # not a cause applied to the baseline's side
            path = with_options(ctx.path, cause)
            paths.setdefault(path.spec, path)
    ahead = list(paths.values())[:os.cpu_count() or 1]  # at most that many started for nothing
    try:
        if ahead and ctx.path.overlaps:
            ctx.run_ahead(ahead, pool)
            return
        for path in ahead[:max(1, (os.cpu_count() or 1) - 1)]:
            path.prestart()
    except Exception:  # noqa: BLE001 - a head start, never a failure
        pass
