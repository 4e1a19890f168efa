"""``kernel-accuracy``: the carrying op's kernel, as the path's runtime computes it, run alone over the op's
captured inputs and a sweep of its domain (every decade of magnitude with both signs, near zero, subnormals, the
dtype's edges, infinities and NaN), against the correctly rounded result: its accuracy profile.

The profile says what kind of kernel it is, not only that it differs: accurate to a few ULP everywhere (a math
library), accurate in absolute terms only (its error stays near one ULP of 1 while the result shrinks, so the
relative error reaches 100%), an input interval where it exceeds a few ULP, subnormal inputs or results flushed to
zero, results that overflow or saturate, NaN where the result is a number. The baseline's kernel is profiled on
the same points: which side is wrong, measured. Confirmed where the kernel alone gives the path's own values of
the op on its captured inputs and is beyond a math library's error there (the mechanism is that kernel, not its
context); refuted where the kernel alone is accurate on them (the path's values come from elsewhere: a fusion, a
conversion of more than this op).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...localize.elements import UNARY_MATH
from ...metrics import ulp_distance
from ...rounding import round_to_dtype
from ..causes import Cause
from ..context import Context
from ..verdicts import CauseVerdict, Status
from .captured import op_inputs, where

__all__ = ["PROFILED", "Profile", "kernel_accuracy", "profile", "sweep"]

PROFILED = UNARY_MATH  # math functions of one float input: kernels a runtime approximates its own way
ACCURATE = 4  # ULP from the correctly rounded result: what an accurate math library keeps to
MERGE = 3  # accurate points between two runs of inaccurate ones that still make one interval (a lucky rounding)
MOSTLY = 0.75  # two runs and what parts them are one interval where this share of its points is beyond ACCURATE


def sweep(dtype: Any, captured: np.ndarray | None = None) -> np.ndarray:
    """The points a kernel is profiled on: ``captured`` (the op's own inputs, up to 20,000 of them), every decade
    of the dtype's range at six mantissas with both signs, dense grids over [-100, 100] and [-1, 1], subnormals,
    the dtype's edges, ±0, ±inf and NaN; sorted, unique, NaN last."""
    info = np.finfo(dtype)
    lo, hi = int(np.floor(np.log10(float(info.smallest_subnormal)))), int(np.ceil(np.log10(float(info.max))))
    mags = np.array([m * 10.0 ** e for e in range(lo, hi + 1) for m in (1, 1.5, 2, 3, 5, 7)], np.float64)
    mags = mags[(mags <= float(info.max)) & (mags >= float(info.smallest_subnormal))]
    edges = np.array([float(info.smallest_subnormal), float(info.smallest_normal), float(info.max), float(info.eps),
                      1 - float(info.epsneg), 1 + float(info.eps)], np.float64)
    grid = np.concatenate([np.linspace(-100, 100, 2001), np.linspace(-1, 1, 401), mags, -mags, edges, -edges,
                           [0.0, np.inf, -np.inf]])
    points = round_to_dtype(grid, dtype)
    if captured is not None:
        flat = np.asarray(captured).astype(dtype, copy=False).ravel()
        points = np.concatenate([points, flat[:20_000]])
    finite = np.unique(points[~np.isnan(points.astype(np.float64))])
    neg_zero = np.array([-0.0], dtype)
    return np.concatenate([finite, neg_zero, np.array([np.nan], dtype)])


@dataclass(frozen=True)
class Profile:
    """One kernel's accuracy over the sweep: where it is beyond ``ACCURATE`` ULP, and how."""

    points: int
    max_ulp: int  # over the finite results of both
    within: int  # ULP it keeps to outside the intervals below
    abs_only: bool  # beyond ACCURATE ULP only where the result is small: within a few ULP of 1 absolutely
    max_abs: float  # largest absolute error where it is beyond ACCURATE ULP
    max_rel: float  # largest relative error there
    # (first, last input, reaches the lowest, the highest, mirrored: |x| in [first, last] on both signs)
    intervals: tuple[tuple[float, float, bool, bool, bool], ...]
    example: tuple[float, float, float] | None  # (x, its result, the correctly rounded one) at the worst point
    flush_in: bool = False  # subnormal inputs computed as zero
    flush_out: bool = False  # subnormal results returned as zero
    overflow: str | None = None  # "inf where the result is finite for x ≥ 88.7", or the reverse
    nans: str | None = None  # "NaN for x = inf where the result is 1"

    @property
    def accurate(self) -> bool:
        return self.max_ulp <= ACCURATE and not (self.flush_in or self.flush_out or self.overflow or self.nans)

    def interval_words(self) -> str:
        said = []
        for a, b, low, high, mirrored in self.intervals[:3]:
            x = "|x|" if mirrored else "x"
            said.append("every x" if low and high else f"x ≤ {b:.3g}" if low else f"{x} ≥ {a:.3g}" if high
                        else f"{x} = {a:.3g}" if a == b else f"{x} in [{a:.3g}, {b:.3g}]")
        more = len(self.intervals) - 3
        return " and ".join(said) + (f" (and {more} more interval{'s' if more > 1 else ''})" if more > 0 else "")

    def words(self, who: str, primitive: str, brief: bool = False) -> str:
        """"onnx's logistic, run alone on 3,412 points: accurate to 1.5e-07 absolute, not relative: for x ≤ -16.6
        its relative error reaches 100% (e.g. …); within 1 ULP elsewhere". ``brief``: what it found only, with no
        example (the other side's, said after the path's)."""
        head = f"{who}'s {primitive}, run alone on {self.points:,} points of its domain (its captured inputs among them)"
        if self.accurate:
            return f"{head}: within {self.max_ulp} ULP of the correctly rounded result on every one"
        parts = []
        if self.max_ulp > ACCURATE and self.intervals:
            ex = ""
            if self.example is not None and not brief:
                x, got, want = self.example
                ex = f"; e.g. x = {x:.8g} gives {got:.8g} where the correctly rounded result is {want:.8g}"
            rel = (f"its relative error reaches {self.max_rel:.0%}" if 0.01 <= self.max_rel < 10 else
                   f"up to {self.max_ulp:,} ULP")
            if self.abs_only:
                parts.append(f"accurate to {self.max_abs:.2g} absolute, not relative: for {self.interval_words()} "
                             f"{rel} ({self.max_ulp:,} ULP){ex}")
            else:
                parts.append(f"beyond {ACCURATE} ULP for {self.interval_words()}: {rel}"
                             + (f" ({self.max_ulp:,} ULP)" if 0.01 <= self.max_rel < 10 else "") + ex
                             + _range_reduction(self.intervals, primitive))
        if self.flush_in:
            parts.append("subnormal inputs are computed as zero")
        if self.flush_out:
            parts.append("subnormal results are returned as zero")
        if self.overflow:
            parts.append(self.overflow)
        if self.nans:
            parts.append(self.nans)
        said = "; ".join(parts) + (f"; within {self.within} ULP elsewhere" if self.intervals else
                                     f"; within {self.within} ULP of the correctly rounded result on the normal results")
        return said if brief else f"{head}: {said}"


def profile(got: np.ndarray, want: np.ndarray, x: np.ndarray, at_zero: tuple[Any, Any] | None = None) -> Profile:
    """The profile of a kernel that gave ``got`` on the sweep ``x`` where the correctly rounded results are
    ``want`` (one dtype). ``at_zero``: (its result, the correctly rounded one) at +0, to tell a flushed subnormal."""
    got, want, x = np.asarray(got), np.asarray(want), np.asarray(x)
    gw, ww, xw = (a.astype(np.float64) for a in (got, want, x))
    info = np.finfo(want.dtype)
    # a subnormal result is said as flushed or not (``flush_out``): its ULP count is no measure of a kernel's accuracy
    normal = np.abs(ww) >= float(info.smallest_normal)
    both = np.isfinite(gw) & np.isfinite(ww) & (normal | (ww == 0))
    ulps = np.where(both, ulp_distance(got, want), 0)
    bad = both & (ulps > ACCURATE)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.abs(gw - ww)
        rel = np.where(ww != 0, err / np.abs(ww), np.where(err > 0, 1.0, 0.0))
    tiny = 4 * float(info.eps) * np.fmax(1.0, np.abs(ww))
    abs_only = bool(bad.any() and (err[bad] <= tiny[bad]).all() and (np.abs(ww[bad]) < 1).all())
    order = np.argsort(xw, kind="stable")
    finite_x = order[np.isfinite(xw[order])]
    # a NaN for a number (or the reverse) is beyond any ULP count: its inputs belong to the intervals too
    nan_for_number = np.isfinite(xw) & (np.isnan(gw) != np.isnan(ww))
    intervals = _runs(finite_x, bad | nan_for_number, xw, np.abs(xw) < float(info.smallest_normal))
    k = int(np.argmax(np.where(bad, ulps, -1))) if bad.any() else None
    example = (float(xw[k]), float(gw[k]), float(ww[k])) if k is not None else None
    sub_in = np.isfinite(xw) & (xw != 0) & (np.abs(xw) < float(info.smallest_normal))
    flush_in = False
    if at_zero is not None and sub_in.any():
        g0, w0 = (np.asarray(v).astype(np.float64) for v in at_zero)
        flush_in = bool(((gw[sub_in] == g0) & (ww[sub_in] != w0)).any())
    sub_out = np.isfinite(ww) & (ww != 0) & (np.abs(ww) < float(info.smallest_normal))
    flush_out = bool((sub_out & (gw == 0)).any())
    return Profile(len(x), int(ulps.max(initial=0)), int(np.where(bad, 0, ulps).max(initial=0)), abs_only,
                   float(err[bad].max(initial=0.0)), float(rel[bad].max(initial=0.0)), intervals, example,
                   flush_in, flush_out, _overflow(gw, ww, np.where(sub_in & flush_in, np.nan, xw)), _nans(gw, ww, xw))


def _runs(order: np.ndarray, bad: np.ndarray, x: np.ndarray, neutral: np.ndarray
          ) -> tuple[tuple[float, float, bool, bool, bool], ...]:
    """The input intervals (in ``order``) over which ``bad`` holds: runs of it, two neighbouring runs one interval
    where the span they cover is mostly (``MOSTLY``) bad or only ``MERGE`` good points part them (a lucky rounding
    where the error flickers about the bound; ``neutral`` points, zeros and subnormals, count for neither), and an
    interval and its mirror image across zero as one (``|x| in [a, b]``); largest (by points) first: (first,
    last, reaches the lowest input, the highest, mirrored)."""
    b = bad[order].astype(np.int64)
    counted = (~neutral[order]).astype(np.int64)
    cum_bad, cum_counted = np.concatenate([[0], np.cumsum(b)]), np.concatenate([[0], np.cumsum(counted)])
    runs: list[list[int]] = []
    for pos in np.flatnonzero(b):
        if runs and cum_counted[pos] - cum_counted[runs[-1][1] + 1] == 0:
            runs[-1][1] = int(pos)
        else:
            runs.append([int(pos), int(pos)])
    merged: list[list[int]] = []
    for run in runs:
        if merged:
            first, z = merged[-1][0], run[1]
            bad_n = cum_bad[z + 1] - cum_bad[first]
            good = (cum_counted[z + 1] - cum_counted[first]) - bad_n
            gap = (cum_counted[run[0]] - cum_counted[merged[-1][1] + 1])
            if gap <= MERGE or bad_n >= MOSTLY * (bad_n + good):
                merged[-1][1] = run[1]
                continue
        merged.append(run)
    runs = merged
    last = len(order) - 1
    found = [(float(x[order[i]]), float(x[order[j]]), i == 0, j == last, j - i) for i, j in runs]
    out: list[tuple[float, float, bool, bool, bool, int]] = []
    used: set[int] = set()
    for k, (a, b, low, high, n) in enumerate(found):
        if k in used:
            continue
        mirror = next((j for j, (c, d, *_) in enumerate(found) if j != k and j not in used and b < 0 < c
                       and _mirrors(-b, -a, c, d)), None)
        if mirror is None:
            out.append((a, b, low, high, False, n))
            continue
        used |= {k, mirror}
        c, d, _, hi, m = found[mirror]
        out.append((max(-b, c), min(-a, d), False, hi, True, n + m))  # what holds on both signs
    out.sort(key=lambda r: -r[5])
    return tuple(r[:5] for r in out)


def _mirrors(a: float, b: float, c: float, d: float) -> bool:
    """[a, b] and [c, d] (magnitudes) are one interval's two signs: the same bounds within 5%, or, for runs over
    three decades or more (a range reduction's), within a factor of 10."""
    if _near(a, c) and _near(b, d):
        return True
    wide = min(b / a, d / c) >= 1e3
    return wide and max(a, c) <= 10 * min(a, c) and max(b, d) <= 10 * min(b, d)


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= 0.05 * max(abs(a), abs(b))


def _overflow(got: np.ndarray, want: np.ndarray, x: np.ndarray) -> str | None:
    over = np.isinf(got) & np.isfinite(want) & np.isfinite(x)
    if over.any():
        xs = x[over]
        return f"inf where the result is finite, for x in [{xs.min():.3g}, {xs.max():.3g}]"
    short = np.isfinite(got) & np.isinf(want) & np.isfinite(x)
    if short.any():
        xs = x[short]
        return f"a finite value where the result overflows to inf, for x in [{xs.min():.3g}, {xs.max():.3g}]"
    return None


def _nans(got: np.ndarray, want: np.ndarray, x: np.ndarray) -> str | None:
    extra = np.isnan(got) & ~np.isnan(want)
    if extra.any():
        i = int(np.argmax(extra))
        what = "is a number" if np.isfinite(want[i]) else "is not NaN"
        return (f"NaN where the result {what} ({_points(int(extra.sum()))}, e.g. x = {x[i]:.3g} gives NaN where the "
                f"correctly rounded result is {want[i]:.3g})")
    lost = ~np.isnan(got) & np.isnan(want)
    if lost.any():
        i = int(np.argmax(lost))
        return f"a number where the result is NaN ({_points(int(lost.sum()))}, e.g. x = {x[i]:.3g} gives {got[i]:.3g})"
    return None


def _range_reduction(intervals: tuple[tuple[float, float, bool, bool, bool], ...], primitive: str) -> str:
    """A periodic function beyond a few ULP from some |x| up to the largest tested: its range reduction."""
    if primitive not in ("sin", "cos", "tan"):
        return ""
    far = [a for a, b, _, _, mirrored in intervals if mirrored and a >= 10 and b >= 1e4]
    return f" (its range reduction is accurate only below |x| ≈ {min(far):.3g})" if far else ""


def _points(n: int) -> str:
    return f"{n:,} point{'' if n == 1 else 's'}"


def _run_alone(spec: str, op: Any, x: np.ndarray) -> np.ndarray | str:
    """The op alone on ``x`` (one array), as path ``spec`` runs a program: converted, compiled or served there."""
    from ...execution.crashes import attempt
    from ...execution.inprocess import run_in_process
    from ...localize.program import bind_op
    from ...paths import make_path

    def alone(v: Any) -> Any:
        return bind_op(op, [v])[0]

    with attempt(f"{spec} [{op.info.primitive} alone]"):
        r = run_in_process(make_path(spec), alone, (x,))
    if r.status != "ok" or not r.outputs:
        return f"{r.status}: {(r.message or '').splitlines()[0] if r.message else ''}"
    return np.asarray(r.outputs[0][1])


def _correctly_rounded(op: Any, x: np.ndarray) -> np.ndarray:
    from ...interpreter import evaluate_eqn

    with np.errstate(all="ignore"):
        exact = np.asarray(evaluate_eqn(op.eqn, [x], mode="f64")[0], np.float64)
    return round_to_dtype(exact, x.dtype)


def _targets(ctx: Context) -> list[tuple[Any, np.ndarray, np.ndarray | None, str]]:
    """(op, its input, the path's own values of it or None, where) for the math functions to profile: the first
    carrying divergence at one, with the path's captured input; where the path's per-op view is not its program's
    (returning every intermediate changes what it runs), each such op of the program, up to three, on the
    baseline's input to it."""
    from ...localize.localizer import _read, arg_values

    if ctx.localization is not None and ctx.path_vals is not None:
        found = next((d for d in ctx.localization.carrying if not d.within and d.op.primitive in PROFILED), None)
        if found is None:
            return []
        op = ctx.program.ops[found.op.index]
        ins = op_inputs(ctx, found)
        vid = op.outputs[0] if op.outputs else None
        if len(ins) != 1 or vid is None or vid not in ctx.path_vals.values or np.asarray(ins[0]).dtype.kind != "f":
            return []
        return [(op, np.asarray(ins[0]), np.asarray(ctx.path_vals.values[vid]), where(found))]
    if ctx.base_vals is None or ctx.instrumented is None:
        return []
    args = arg_values(ctx.program, ctx.flat_args)
    out: list[tuple[Any, np.ndarray, np.ndarray | None, str]] = []
    for op in ctx.program.ops:
        if op.info.primitive not in PROFILED or len(op.inputs) != 1 or len(out) == 3:
            continue
        try:
            x = np.asarray(_read(ctx.program, op.inputs[0], ctx.base_vals.values, args))
        except Exception:  # noqa: BLE001 - not captured: not profiled
            continue
        if x.dtype.kind == "f":
            line = op.info.user_source or op.info.source or "unknown line"
            out.append((op, x, None, f"#{op.info.index} {op.info.primitive} ({line})"))
    return out


def kernel_accuracy(cause: Cause, ctx: Context) -> CauseVerdict:
    """The carrying math function (``PROFILED``): its kernel on the path, run alone over its captured inputs and the
    sweep, against the correctly rounded result, and the baseline's on the same points. Without the path's own
    per-op values, each math function of the program on the baseline's inputs to it, the first beyond a library's
    error there said (partly: the path's own values of it are not seen)."""
    targets = _targets(ctx)
    if not targets:
        why = ("no per-op values for this path" if ctx.localization is None and ctx.instrumented is None else
               f"no carrying op is a math function of one input ({', '.join(sorted(PROFILED)[:6])}...)")
        return CauseVerdict(cause.id, cause.title, "not run", "", why)
    verdict = None
    for op, captured, mine, at in targets:
        verdict = _profiled(cause, ctx, op, captured, mine, at)
        if verdict.status in ("confirmed", "partly"):
            return verdict
    assert verdict is not None
    return verdict


def _profiled(cause: Cause, ctx: Context, op: Any, captured: np.ndarray, mine: np.ndarray | None,
              at: str) -> CauseVerdict:
    x = sweep(captured.dtype, captured)
    what = f"{at} run alone on {ctx.path} and {ctx.baseline}, over {len(x):,} points of its domain"
    got = _run_alone(ctx.path.spec, op, x)
    if isinstance(got, str):
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the op alone did not run on {ctx.path} ({got})")
    theirs = _run_alone(ctx.baseline.spec, op, x)
    want = _correctly_rounded(op, x)
    zero = np.zeros(1, x.dtype)
    at_zero = (_run_alone(ctx.path.spec, op, zero), _correctly_rounded(op, zero))
    path_prof = profile(got.reshape(x.shape), want, x, None if isinstance(at_zero[0], str) else
                        (at_zero[0].reshape(()), at_zero[1].reshape(())))
    base_prof = None if isinstance(theirs, str) else profile(theirs.reshape(x.shape), want, x)
    n = min(captured.size, 20_000)
    flat = captured.ravel()[:n]
    seen = path_prof.words(ctx.path.spec, op.info.primitive)
    if base_prof is not None:
        seen += (f"; {ctx.baseline}'s is within {base_prof.max_ulp} ULP on the same points" if base_prof.accurate
                 else f"; {ctx.baseline}'s, on the same points: " + base_prof.words(ctx.baseline.spec, op.info.primitive,
                                                                                   brief=True))
    same = 0.0
    if mine is not None:  # the kernel alone on the op's own inputs: the path's values of the op?
        pos = np.clip(np.searchsorted(x[:-2], flat), 0, len(x) - 3)  # x is sorted (then -0 and NaN)
        alone = np.where(np.isnan(flat), np.nan, got.reshape(x.shape)[pos]).astype(mine.dtype)
        same = float(np.mean(ulp_distance(alone, mine.ravel()[:n]) == 0)) if n else 0.0
        seen += f"; alone it gives {ctx.path}'s own values of the op on {same:.0%} of its captured inputs"
    else:
        seen += (f"; on {ctx.baseline}'s inputs to it ({ctx.path}'s own are not seen: returning every intermediate "
                 "changes what it runs)")
    on_captured = np.isin(x, flat)
    here = profile(got.reshape(x.shape)[on_captured], want[on_captured], x[on_captured])
    if path_prof.accurate or here.accurate:
        why = ("the kernel alone is accurate, so the path's values of the op come from how it runs in the program (a "
               "fusion, a conversion of more than this op)" if path_prof.accurate else
               f"on the op's own inputs it is within {here.max_ulp} ULP: its profile elsewhere is not what makes "
               "this difference")
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{seen}: {why}")
    theirs_here = None if base_prof is None or isinstance(theirs, str) else profile(
        theirs.reshape(x.shape)[on_captured], want[on_captured], x[on_captured])
    # the baseline's kernel on the same inputs: accurate there (the path's is the one beyond a library's error), or
    # beyond it too (two approximations of the op, neither right)
    both = theirs_here is not None and not theirs_here.accurate and theirs_here.max_ulp >= here.max_ulp // 4
    status: Status = "confirmed" if mine is not None and same >= 0.99 else "partly"  # (without them: not seen)
    if both and theirs_here is not None:
        title = (f"two approximations of {op.info.primitive}, each beyond a math library's error ({ctx.path}'s up "
                 f"to {here.max_ulp:,} ULP on the op's inputs, {ctx.baseline}'s {theirs_here.max_ulp:,})")
    elif path_prof.abs_only:
        title = f"a kernel accurate in absolute terms only ({ctx.path}'s {op.info.primitive})"
    else:
        title = f"a kernel less accurate than a math library ({ctx.path}'s {op.info.primitive})"
    vid = op.outputs[0] if op.outputs else None
    composed = _composed(ctx, op, x)
    layer = None
    if composed is not None:  # no kernel of the runtime's: the converter's composition of others is what is profiled
        kinds = ", ".join(dict.fromkeys(composed))
        seen = (f"{ctx.path} has no kernel of its own for {op.info.primitive}: {ctx.path.converter} writes it as "
                f"{len(composed)} kernels ({kinds}), and that composition is what runs: {seen}")
        title = title.replace(f"({ctx.path}'s {op.info.primitive})", f"({ctx.path.converter}'s {op.info.primitive} "
                              f"in {len(composed)} kernels)")
        layer = "converter"
    return CauseVerdict(cause.id, title, status, what, seen, cause.fix, layer=layer,
                        trigger=_trigger(path_prof, flat, ctx, vid, n) if path_prof.intervals else None)


# Kernels that only move or convert a value: not a composition of the math.
_PLUMBING = frozenset({"QUANTIZE", "DEQUANTIZE", "CAST", "Cast", "Identity", "RESHAPE", "Reshape"})


def _composed(ctx: Context, op: Any, x: np.ndarray) -> list[str] | None:
    """The kernels the path's converter writes the op alone as, where they are more than one (a decomposition:
    TFLite has no lgamma kernel); None where it is one kernel of the runtime's, or nothing says."""
    from ...localize.program import bind_op

    if not ctx.path.converter:
        return None
    try:
        artifact = ctx.path.artifact(lambda v: bind_op(op, [v])[0], (x[:8],))
    except Exception:  # noqa: BLE001 - no artifact: nothing said of the layer
        return None
    kinds = [k.kind for k in getattr(artifact, "kernels", ()) if k.kind not in _PLUMBING]
    return kinds if len(kinds) > 1 else None


def _trigger(prof: Profile, flat: np.ndarray, ctx: Context, vid: int | None, n: int) -> str:
    """The profile's intervals as the trigger, with how many of the op's differing elements here lie in them."""
    xs = flat.astype(np.float64)
    inside = np.zeros(xs.shape, bool)
    for a, b, low, high, mirrored in prof.intervals:
        v = np.abs(xs) if mirrored else xs
        inside |= ((v >= a) | low) & ((v <= b) | high) & ~np.isnan(xs)
    words = f"its kernel is beyond {ACCURATE} ULP where {prof.interval_words()} (its profile over the domain)"
    base = ctx.base_vals.values.get(vid) if ctx.base_vals is not None and vid is not None else None
    if base is None or ctx.path_vals is None or vid not in ctx.path_vals.values:
        return words
    mine = np.asarray(ctx.path_vals.values[vid]).ravel()[:n]
    differs = ulp_distance(mine, np.asarray(base).ravel()[:n].astype(mine.dtype)) != 0
    return (words + f": {int((inside & differs).sum())} of the {int(differs.sum())} differing elements here, and "
            f"{int((inside & ~differs).sum())} of the {int((~differs).sum())} that agree")

