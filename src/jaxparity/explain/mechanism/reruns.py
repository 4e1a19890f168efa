"""Causes decided by re-running the program: the path with a cause's XLA options (``recompile``), JAX's own
jit with the path's XLA settings (``same-compiler``), the highest matmul precision (``matmul-precision``);
and the re-runs that prove a fix for a cause decided on an op's own values."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...localize.localizer import localize, replayable
from ...localize.values import op_values
from ...paths import Path, xla_twin
from ..causes import Cause
from ..context import Context, describe
from ..measure import NARROWS, OUTCOMES, distance, narrowing, ulp_comparable
from ..verdicts import CauseVerdict, Fix, Rerun, Status

__all__ = ["PRECISION_REST", "baseline_flag_proof", "both_flag_proof", "flag_proof", "matmul_precision", "recompile", "same_compiler",
           "with_options"]

PRECISION_REST = 0.01  # the share of a difference a highest-precision re-run may leave and still explain it


def with_options(path: Path, cause: Cause) -> Path:
    """``path`` with the cause's XLA options, as they reach its runtime."""
    for key, value in cause.options:
        path = path.with_xla_option(key, value)
    return path


def _fix_kind(path: Path) -> Any:
    return path.xla_option_kind or "compile option"


def recompile(cause: Cause, ctx: Context, at_op: bool = True) -> CauseVerdict:
    """Re-run the path with the cause's flags; where that does not restore parity and ``at_op``, judge the
    cause at the op that carries the error (``at_the_op``)."""
    spec = with_options(ctx.path, cause).spec
    outs = ctx.run(spec)
    if isinstance(outs, str):  # a re-run that fails tests nothing: the cause stands untested, never refuted
        return CauseVerdict(cause.id, cause.title, "not run", f"re-ran {spec}", f"the re-run failed ({outs})")
    rerun, result = ctx.measured(outs)
    seen = ctx.seen(rerun, spec)
    status: Status = ("confirmed" if result == ": parity restored" else "partly" if result == NARROWS and rerun.shrinks
                      else "refuted")
    if status != "confirmed" and at_op:  # judged at the op it names: the flag may fix that op and leave noise elsewhere
        found = at_the_op(cause, ctx, spec)
        if found is not None:
            d, gone = found
            proof = Fix(_fix_kind(ctx.path), cause.fix, spec, False, seen + result, rerun=rerun)
            return CauseVerdict(cause.id, cause.title, "confirmed", f"the values of {describe(d)} re-run with {spec}",
                                gone, cause.fix, proof)
    return CauseVerdict(cause.id, cause.title, status, f"re-ran {spec}", seen + result,
                        cause.fix if status != "refuted" else None, rerun=rerun)


def at_the_op(cause: Cause, ctx: Context, spec: str) -> tuple[Any, str] | None:
    """Where a flag's whole-program re-run does not restore parity: does the divergence that carries the
    output error (``Localization.lead``) stop departing on its own under the flag? Then the cause is
    confirmed at that op (the rest is another divergence), with what the re-run showed; None otherwise."""
    loc = ctx.localization
    d = loc.lead if loc is not None else None
    if d is None or d.within or ctx.base_vals is None or not replayable(ctx.baseline):
        return None
    if cause.primitives is not None and d.op.primitive not in cause.primitives:
        return None
    try:
        again = localize(ctx.program, op_values(ctx.program, spec, ctx.flat_args), ctx.base_vals, ctx.flat_args,
                         ctx.baseline.spec)
    except Exception:  # no per-op values under the flag: the whole-program re-run stands
        return None
    if any(x.op.index == d.op.index and not x.within for x in again.local):
        return None
    where = d.op.user_source or d.op.source or "unknown line"
    return d, (f"with {spec}, #{d.op.index} {d.op.primitive} ({where}) no longer departs from {ctx.baseline} on its "
               f"own inputs ({d.n_differ} of {d.size} elements did without it); {len(again.local)} other op"
               f"{'s' if len(again.local) != 1 else ''} still depart{'s' if len(again.local) == 1 else ''}, "
               "so the whole program does not reach parity with it")


def flag_proof(cause: Cause, ctx: Context, unless: str = "") -> tuple[Fix, str]:
    """The whole-program re-run with the cause's flags, as the proof (or not) of its fix, for a cause
    already decided on an op's own evidence; and what the re-run showed."""
    rerun = recompile(cause, ctx, at_op=False)
    restored = rerun.status == "confirmed"
    spec = rerun.experiment.removeprefix("re-ran ")
    proof = Fix(_fix_kind(ctx.path), cause.fix, spec, restored, rerun.evidence + ("" if restored else unless),
                rerun=rerun.rerun)
    return proof, rerun.evidence


def baseline_flag_proof(cause: Cause, ctx: Context) -> tuple[Fix, str]:
    """The baseline re-run with the cause's flags, against the path's outputs: the fix where the baseline
    is the side that departs from the declared semantics."""
    from ...metrics import max_gaps

    spec = with_options(ctx.baseline, cause).spec
    kind = _fix_kind(ctx.baseline)
    outs = ctx.run(spec)
    if isinstance(outs, str):
        seen = f"the re-run of the baseline failed ({outs})"
        return Fix(kind, cause.fix, spec, False, seen), seen
    before = (*distance(ctx.path_out, ctx.base_out), max(max_gaps(ctx.path_out, ctx.base_out), default=0.0))
    after = (*distance(ctx.path_out, outs), max(max_gaps(ctx.path_out, outs), default=0.0))
    ulp = ulp_comparable((ctx.path_out, ctx.base_out), (ctx.path_out, outs))
    result = narrowing(before, after, distance(outs, ctx.base_out)[0] > 0, ulp)
    ideal = ctx.ideal_errors(ctx.path_out, outs)
    rerun = Rerun(before, after, OUTCOMES[result], ideal, across_zero=not ulp)
    seen = ctx.seen(rerun, f"from {spec}", result, against="in")
    return Fix(kind, cause.fix, spec, after[0] == 0, seen, rerun=rerun), seen


def both_flag_proof(cause: Cause, ctx: Context) -> tuple[Fix, str] | None:
    """Both sides re-run with the cause's flags, against each other: the fix where each side keeps excess
    precision its own way (jit on a TPU and on the host, one program: the option set on the user's jax.jit
    reaches both). None where the baseline takes no XLA options, or the re-runs fail."""
    from ...metrics import max_gaps

    if not (ctx.baseline.has("takes_xla_options") and ctx.path.has("takes_xla_options")):
        return None
    mine, theirs = with_options(ctx.path, cause).spec, with_options(ctx.baseline, cause).spec
    outs, base = ctx.run(mine), ctx.run(theirs)
    if isinstance(outs, str) or isinstance(base, str):
        return None
    before = (*distance(ctx.path_out, ctx.base_out), max(max_gaps(ctx.path_out, ctx.base_out), default=0.0))
    after = (*distance(outs, base), max(max_gaps(outs, base), default=0.0))
    ulp = ulp_comparable((ctx.path_out, ctx.base_out), (outs, base))
    result = narrowing(before, after, distance(outs, ctx.path_out)[0] > 0, ulp)
    rerun = Rerun(before, after, OUTCOMES[result], ctx.ideal_errors(outs, base), across_zero=not ulp)
    seen = ctx.seen(rerun, f"{mine} against {theirs} (the flags on both sides)", result)
    return Fix(_fix_kind(ctx.path), cause.fix, mine, after[0] == 0, seen, rerun=rerun), seen


def same_compiler(cause: Cause, ctx: Context) -> CauseVerdict:
    """JAX's own jit with the path's XLA settings (``paths.xla_twin``): where it agrees with the baseline and
    the path does not, the path's runtime lowers or runs the program otherwise."""
    jit = xla_twin(ctx.path).spec
    outs = ctx.run(jit)
    if isinstance(outs, str):
        return CauseVerdict(cause.id, cause.title, "not run", f"ran {jit}", f"it failed ({outs})")
    jit_vs_base = distance(outs, ctx.base_out)
    jit_vs_path = distance(outs, ctx.path_out)
    if jit_vs_base[0] == 0 and jit_vs_path[0] > 0:
        return CauseVerdict(cause.id, cause.title, "confirmed", f"ran {jit} with the same XLA settings",
                            f"{jit} agrees with {ctx.baseline}; {ctx.path} does not", cause.fix)
    return CauseVerdict(cause.id, cause.title, "refuted", f"ran {jit} with the same XLA settings",
                        f"{jit} gives {ctx.path}'s numbers" if jit_vs_path[0] == 0 else
                        f"{jit} differs from both {ctx.baseline} and {ctx.path}")


def matmul_precision(cause: Cause, ctx: Context) -> CauseVerdict:
    """Re-run the path with matmul precision 'highest': as the path option ``jax_default_matmul_precision``
    where the path takes JAX options (a spec the user can run), else under ``jax.default_matmul_precision``."""
    import jax

    from ...execution.crashes import attempt, crashed_before
    from ...execution.inprocess import run_in_process
    from ...paths import make_path

    outs: list[np.ndarray] | str
    if "jax_*" in ctx.path.options_help:
        spec = ctx.path.with_option("jax_default_matmul_precision", "highest").spec
        what = f"re-ran {spec}"
        outs = ctx.run(spec)
    else:
        spec, what = f"{ctx.path} [matmul precision highest]", "re-ran with jax.default_matmul_precision('highest')"
        if (how := crashed_before(spec)) is not None:
            return CauseVerdict(cause.id, cause.title, "not run", what,
                                f"the re-run {how.removeprefix('hung: ')} in an earlier worker (that re-run is skipped)")
        with jax.default_matmul_precision("highest"), attempt(spec):
            r = run_in_process(make_path(ctx.path.spec), ctx.fn, ctx.args)
        outs = [a for _, a in r.outputs] if r.status == "ok" and r.outputs else f"{r.status}: {r.message}"
    if isinstance(outs, str):  # a re-run that fails tests nothing: the cause stands untested, never refuted
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the re-run failed ({outs})")
    rerun, result = ctx.measured(outs)
    before, after = rerun.before, rerun.after
    seen = (f"{ctx.path} differs from {ctx.baseline} in {before[0]} elements (max abs {before[2]:.3g}); with the "
            f"highest precision in {after[0]} (max abs {after[2]:.3g}){result}")
    status: Status
    if after[0] == 0:
        status = "confirmed"
    elif rerun.outcome == "narrows" and after[2] <= PRECISION_REST * before[2]:
        # a float32 matmul summed in another order still differs by a few ULP: what is left is that order
        status = "confirmed"
        seen += (f": the reduced precision carried {1 - after[2] / before[2]:.1%} of the difference; what is left is "
                 "float32 summed in another order")
    else:
        status = "partly" if rerun.outcome == "narrows" else "refuted"
    proof = Fix("compile option", cause.fix, spec, after[0] == 0, seen, rerun=rerun)
    return CauseVerdict(cause.id, cause.title, status, what, seen, cause.fix if status != "refuted" else None,
                        proof if status != "refuted" else None, rerun=rerun)
