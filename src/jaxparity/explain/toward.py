"""After the verdicts, for the program: where every path, the baseline too, is far from the f64 ideal, no runtime
is right, and two of them agreeing within rounding noise says little. This stage says where the program loses its
digits and verifies the change that moves every path toward the ideal.

- *Far*: on some output, every compared path's max abs error against the f64 ideal is at least ``LOST`` of the
  output's scale (its largest |ideal|), the baseline's too (``far``, read from the comparison alone).
- *Where*: the program is run op by op as eager computes it and in float64 (the interpreter), and the op whose
  output's distance from float64 grows most over its inputs' (norm-wise, at least ``blame.AMPLIFIES`` times) is
  where the digits go: a subtraction of nearly equal sums, a log of an overflowing sum. An error that only
  accumulates (a long sum, a narrow dtype the program declares) has no such op, and nothing is said.
- *Toward*: that op's recognised ill-conditioned form is rewritten in its well-conditioned form
  (``fixes.well_conditioned``, the math unchanged), every compared path re-run on it and judged against the
  original program's f64 ideal: verified where every path is then near it, ten times nearer than before at least.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..verdict import Lost

__all__ = ["LOST", "far", "toward_ideal", "task"]

LOST = 0.01  # an output off the f64 ideal by this share of its scale: far from it
NEARER = 10  # a change toward the ideal brings every path at least this many times nearer


def far(result: Any) -> tuple[int, str, float, tuple[tuple[str, float], ...]] | None:
    """The first output on which every compared path that ran, the baseline first, is at least ``LOST`` of the
    output's scale from the f64 ideal: (its flat index, name, scale, each path's max abs error); None otherwise."""
    ran = [p for p in result.paths if p.status == "ok" and not p.reference and p.leaves]
    base = next((p for p in ran if p.spec == result.baseline), None)
    if base is None or len(ran) < 2:
        return None
    ran = [base] + [p for p in ran if p is not base]
    for k, leaf in enumerate(base.leaves):
        e = leaf.error_vs_f64
        if e is None or not e.ideal_scale or not np.isfinite(e.ideal_scale):
            continue
        errors = []
        for p in ran:
            mine = next((lf.error_vs_f64 for lf in p.leaves if lf.name == leaf.name), None)
            if mine is None:
                break
            errors.append((p.spec, float(mine.max_abs) if not np.isnan(mine.max_abs) else float("inf")))
        else:
            if min(err for _, err in errors) >= LOST * e.ideal_scale:
                return k, leaf.name, float(e.ideal_scale), tuple(errors)
    return None


def task(case: Any, k: int, name: str, scale: float, errors: Sequence[tuple[str, float]]) -> Lost | None:
    """``toward_ideal`` as a worker task (``Worker.task``): on the case the worker holds."""
    return toward_ideal(case.fn, case.args, k, name, scale, tuple(errors))


def toward_ideal(fn: Callable[..., Any], args: tuple, k: int, name: str, scale: float,
                 errors: tuple[tuple[str, float], ...]) -> Lost | None:
    """Where output ``k`` (``name``) of every path in ``errors`` is far from the f64 ideal (``far``): the op where
    the program loses its digits, and its well-conditioned form re-run on every path; None where no op amplifies
    the error (it accumulates, or the program's declared dtype is that narrow)."""
    import jax

    from ..localize.program import flatten, lines_downstream
    from .verdict.divergence import carrier_at

    program = flatten(fn, args)
    flat_args = jax.tree_util.tree_leaves(args)
    site = _where_lost(program, flat_args)
    if site is None:
        return None
    op, how = program.ops[site[0]], site[1]
    lost = Lost(name, scale, errors, carrier_at(op.info, "loses the digits"), how)
    change, model, tried = _change(fn, args, lines_downstream(program, op))
    if model is None or change is None:
        return _replace(lost, tried=tried)
    first = _measured(fn, args, k, lost, errors, change, model)
    if first.verified or first.change is None:
        return first
    # the same forms at every site of them (x − mean(x) written again after jnp.var's own): said so where that holds
    everywhere = _everywhere(fn, args, lines_downstream(program, op))
    if everywhere is None:
        return first
    second = _measured(fn, args, k, lost, errors, *everywhere)
    return second if second.verified else first


def _measured(fn: Callable[..., Any], args: tuple, k: int, lost: Lost, errors: tuple[tuple[str, float], ...],
              change: str, model: Callable[..., Any]) -> Lost:
    """``lost`` with ``change`` (``model``) re-run on every path of ``errors`` against the f64 ideal."""
    from ..execution.inprocess import run_in_process
    from ..paths import make_path

    def error(spec: str, f: Callable[..., Any]) -> float | str:
        r = run_in_process(make_path(spec), f, args)
        if r.status != "ok" or not r.outputs or len(r.outputs) <= k:
            return f"{r.status}: {(r.message or '').splitlines()[0][:120] if r.message else ''}"
        got = np.asarray(r.outputs[k][1], np.float64)
        with np.errstate(invalid="ignore"):
            gap = np.abs(got - ideal)
        # NaN (or the same inf) where the ideal has it too is no distance; NaN against a number is infinitely far
        gap = np.where((got == ideal) | (np.isnan(got) & np.isnan(ideal)), 0.0, np.where(np.isnan(gap), np.inf, gap))
        return float(np.max(gap, initial=0.0))

    ideal_run = run_in_process(make_path("f64"), fn, args)
    if ideal_run.status != "ok" or not ideal_run.outputs:
        return _replace(lost, change=change, tried=f"the f64 ideal did not run ({ideal_run.message})")
    ideal = np.asarray(ideal_run.outputs[k][1], np.float64)
    after, failed = [], []
    for spec, _ in errors:
        got = error(spec, model)
        if isinstance(got, str):
            failed.append(f"{spec} ({got})")
        else:
            after.append((spec, got))
    before = dict(errors)
    near = [s for s, e in after if e < LOST * lost.scale and e * NEARER <= before[s]]
    verified = not failed and len(near) == len(errors)
    why_not: str | None = None
    if not verified:
        worst = max(after, key=lambda se: se[1] / max(before[se[0]], 1e-300), default=None)
        why_not = "; ".join(x for x in (
            f"it failed on {', '.join(failed)}" if failed else "",
            f"{worst[0]} is still {worst[1]:.2g} from it (was {before[worst[0]]:.2g})" if worst and worst[0] not in near
            else "") if x)
    return _replace(lost, change=change, apply="jaxparity.fixes.well_conditioned(fn)", verified=verified,
                    after=tuple(after), tried=why_not)


def _replace(lost: Lost, **kw: Any) -> Lost:
    import dataclasses

    return dataclasses.replace(lost, **kw)


def _where_lost(program: Any, flat_args: Sequence[Any]) -> tuple[int, str] | None:
    """(the op where the program loses its digits, how), on eager's per-op values against the interpreter's
    float64 ones: the first op whose result overflows (inf or NaN where float64 has a number, from finite
    inputs), else the op whose output's distance from float64 grows most over its inputs' (``blame.amplifier_of``,
    norm-wise); None where neither is found."""
    from ..localize.blame import amplifier_of
    from ..localize.localizer import OpDrift
    from ..localize.values import program_values
    from ..rounding import is_float_dtype

    mine = program_values(program, "eager", flat_args).values
    ideal = program_values(program, "f64", flat_args).values
    drift = []
    for op in program.ops:
        worst = 0.0
        for vid in op.outputs:
            if vid is None or vid not in mine or vid not in ideal:
                continue
            a = np.asarray(mine[vid])
            if not (is_float_dtype(a.dtype) and a.size):
                continue
            with np.errstate(invalid="ignore", over="ignore"):
                b = np.asarray(ideal[vid], np.float64)
                if a.shape == b.shape and _overflows(op, a, b, mine):
                    k = int(np.argmax(~np.isfinite(a) & np.isfinite(b)))
                    return op.info.index, (f"#{op.info.index} {op.info.primitive} overflows: "
                                           f"{a.ravel()[k]} where float64 gives {b.ravel()[k]:.3g}")
                d = np.abs(a.astype(np.float64) - b)
                finite = np.isfinite(d) & np.isfinite(b)
                size = float(np.sqrt(np.sum(np.where(finite, b, 0.0) ** 2)))
                moved = float(np.sqrt(np.sum(np.where(finite, d, 0.0) ** 2)))
            if size > 0:
                worst = max(worst, moved / size)
        drift.append(OpDrift(op.info.index, op.info.name_stack, 0.0, 0.0, 0, worst))
    amp = amplifier_of(program, drift, mine, -1)
    if amp is None:
        return None
    how = (f"{amp.pattern}: " if amp.pattern else "") + f"its inputs' distance from float64 grows {amp.gain:,.0f}× there"
    if amp.condition is not None:
        how += f" (|a| + |b| is up to {amp.condition:,.0f}× |a {'−' if amp.primitive == 'sub' else '+'} b|)"
    return amp.index, how


def _overflows(op: Any, a: np.ndarray, b: np.ndarray, values: dict[int, Any]) -> bool:
    """Inf or NaN in eager's result where float64's is a number, from inputs that are all finite."""
    if not (~np.isfinite(a) & np.isfinite(b)).any():
        return False
    for ref in op.inputs:
        x = values.get(ref) if isinstance(ref, int) else None
        if x is not None and np.asarray(x).dtype.kind == "f" and not np.isfinite(np.asarray(x)).all():
            return False
    return True


def _form_line(fn: Callable[..., Any], args: tuple, lines: list[str]) -> list[str] | None:
    """The first of ``lines`` where a recognised form is written, as ``at=`` takes it; None where none has one."""
    from ..fixes import forms_at

    return next(([line] for line in lines if ":" in line and forms_at(fn, args, at=[line])), None)


def _everywhere(fn: Callable[..., Any], args: tuple, lines: list[str]) -> tuple[str, Callable[..., Any]] | None:
    """The forms ``_change`` finds at ``lines``, rewritten at every site of them; None where that is no other
    change (they are written nowhere else)."""
    from ..fixes import REMEDIES, forms_at, rewrites, well_conditioned

    at = _form_line(fn, args, lines)
    if at is None:
        return None
    try:
        forms = forms_at(fn, args, at=at)
        if len(rewrites(fn, args, forms=forms)) <= len(rewrites(fn, args, at=at, forms=forms)):
            return None
    except Exception:  # noqa: BLE001 - the line's own change was said
        return None
    return ("; ".join(REMEDIES.get(f, f) for f in forms) + " at every site of it",
            well_conditioned(fn, forms=forms))


def _change(fn: Callable[..., Any], args: tuple, lines: list[str]) -> tuple[str | None, Callable[..., Any] | None, str]:
    """The stable form of what is written at ``lines`` (the first of them with one: ``fixes.conditioning``), its
    change in the user's terms and the model with it; or why none."""
    from ..fixes import REMEDIES, forms_at, well_conditioned

    at = _form_line(fn, args, lines) or ([lines[0]] if lines else None)
    try:
        forms = forms_at(fn, args, at=at)
    except Exception as e:  # noqa: BLE001 - said, as what was tried
        return None, None, f"the program could not be rewritten ({type(e).__name__}: {e})"
    if not forms:
        return None, None, ("no numerically stable form of what is written there is known to jaxparity (a max-shifted "
                            "softmax or log-sum-exp, a two-pass variance, a sum of logs, log1p, expm1)")
    return "; ".join(REMEDIES.get(f, f) for f in forms), well_conditioned(fn, at=at), ""
