"""The trigger: the predicate over an op's inputs (and its exact result) that separates the elements where two
sides differ from those where they agree, searched over a general family rather than a list of known bugs.

The family, over each input's value at an output element (``align``): its sign and zeros (+0, -0), NaN,
inf, subnormals, integer values, halfway points (x.5), a dtype's edges, thresholds on the value and on its
magnitude found by one pass over the sorted values (``x ≥ 8``, ``|x| > 88.7``); between two inputs of one
kind, order and ties (``input 1 > input 2``: an empty interval); over the op's exact result, non-finite
values and values outside the output dtype's range (an intermediate that overflows). The predicate that
separates the two sets exactly is reported with counts ("differs on exactly the 4 elements where input 1
> input 2; agrees on all 8 others"); where none does, the one that separates best and how well.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..metrics import dtype_class

__all__ = ["CONTRACTIONS", "Test", "Trigger", "align", "find_trigger", "search_trigger"]

# Ops whose every output element reads a whole row or window of each input: no input element is the output
# element's own, even where an input has the output's shape (x @ w with a square w).
CONTRACTIONS = frozenset({"dot_general", "conv_general_dilated"})


@dataclass(frozen=True)
class Trigger:
    """A predicate over the op's inputs and the elements it selects."""

    predicate: str  # in words, inputs numbered from 1: "input 2 < 0", "|input 1| > 88.72"
    hits: int  # differing elements where it holds
    differing: int  # differing elements in all
    false_hits: int  # agreeing elements where it holds
    agreeing: int  # agreeing elements in all

    @property
    def exact(self) -> bool:
        return self.hits == self.differing and self.false_hits == 0

    def words(self) -> str:
        """"it differs on exactly the 4 elements where input 1 > input 2, and agrees on all 8 others"."""
        n = self.differing
        them = f"the {n} element{'s' if n != 1 else ''}" if n > 1 else "the one element"
        others = {0: "no others", 1: "the other one", 2: "both others"}.get(self.agreeing, f"all {self.agreeing} others")
        if self.exact:
            if n > 1:
                them = f"exactly {them}"
            return f"it differs on {them} where {self.predicate}, and agrees on {others}"
        return (f"it differs mostly where {self.predicate}: {self.hits} of the {n} differing elements, and "
                f"{self.false_hits} of the {self.agreeing} that agree")


def align(x: np.ndarray, shape: tuple[int, ...], primitive: str | None = None) -> np.ndarray | None:
    """An input's value at each output element, where it has one: the same shape, a scalar, a shape that
    broadcasts, or one whose leading axes are the output's (an index array with its index vector last, the
    rows a reduction reads): the elements of each output position's row, as a trailing axis. None for an
    input of a ``primitive`` in ``CONTRACTIONS``."""
    if primitive in CONTRACTIONS:
        return None
    x = np.asarray(x)
    if x.shape == shape:
        return x
    if x.size == 1:
        return np.broadcast_to(x.reshape(()), shape)
    try:
        return np.broadcast_to(x, shape)
    except ValueError:
        pass
    k = 0
    while k < min(x.ndim, len(shape)) and x.shape[k] == shape[k]:
        k += 1
    if k == 0:
        return None
    rows = x.reshape(shape[:k] + (-1,))
    if rows.shape[-1] != 1:  # several values per output position: kept as a row, any() of each predicate
        return rows.reshape(shape[:k] + (1,) * (len(shape) - k) + (rows.shape[-1],))
    return np.broadcast_to(rows.reshape(shape[:k] + (1,) * (len(shape) - k)), shape)


def _any(mask: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A predicate over an aligned input, reduced to one boolean per output element."""
    if mask.shape == shape:
        return mask
    if mask.ndim == len(shape) + 1:  # a row per output position
        mask = mask.any(axis=-1)
    return np.broadcast_to(mask, shape)


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else f"{v:.4g}"


def _cuts(v: np.ndarray, differ: np.ndarray, intervals: bool) -> Iterator[tuple[str, Test]]:
    """The cuts of ``v`` (finite, flat) that best separate ``differ``, found in one pass over the sorted
    values: one side of a threshold (``≥ t``, ``≤ t``) and the outside or inside of an interval, each said
    by the values the differing elements reach (``< 0 or > 7``: outside what the agreeing ones span)."""
    order = np.argsort(v, kind="stable")
    sv, sd = v[order], differ[order].astype(np.int64)
    n, total = len(sv), int(sd.sum())
    if n < 2 or total in (0, n):
        return
    new = np.r_[True, sv[1:] != sv[:-1]]  # a cut may fall only before the first of equal values
    # score[i]: agreeing minus differing among sv[:i], at every cut i (0..n) that is allowed
    pre = np.r_[0, np.cumsum(1 - 2 * sd)]
    allowed = np.r_[new, True]
    big = n + 1
    pre_ok = np.where(allowed, pre, big)
    # "v >= sv[i]": errors = differing below + agreeing from i = D_pre(i) + (n - i) - (total - D_pre(i))
    below_d = np.r_[0, np.cumsum(sd)]
    idx = np.arange(n + 1)
    err_hi = np.where(allowed, 2 * below_d + (n - idx) - total, big)
    err_lo = np.where(allowed, (idx - below_d) + (total - below_d), big)
    i_hi, i_lo = int(np.argmin(err_hi[1:n])) + 1, int(np.argmin(err_lo[1:n])) + 1
    # outside [sv[i], sv[j-1]]: errors = A_pre(i) - D_pre(i) + A_suf(j) - D_suf(j) + total, i <= j
    suf = pre[-1] - pre  # agreeing minus differing among sv[j:]
    suf_ok = np.where(allowed, suf, big)
    best_suf = np.minimum.accumulate(suf_ok[::-1])[::-1]  # best j >= i
    out_i = int(np.argmin(pre_ok + best_suf))
    out_j = out_i + int(np.argmin(suf_ok[out_i:]))
    err_out = int(pre_ok[out_i] + suf_ok[out_j] + total)
    inside_pre, inside_suf = np.where(allowed, -pre, big), np.where(allowed, -suf, big)
    best_in_suf = np.minimum.accumulate(inside_suf[::-1])[::-1]
    in_i = int(np.argmin(inside_pre + best_in_suf))
    in_j = in_i + int(np.argmin(inside_suf[in_i:]))
    err_in = int(inside_pre[in_i] + inside_suf[in_j] + (n - total))
    found = sorted([(int(err_hi[i_hi]), 0, "hi"), (int(err_lo[i_lo]), 1, "lo")]
                   + ([(err_out, 2, "out"), (err_in, 3, "in")] if intervals else []))
    for _, _, kind in found:
        if kind == "hi":
            t = sv[i_hi]
            yield f"≥ {_fmt(t)}", _at_least(t)
        elif kind == "lo":
            t = sv[i_lo - 1]
            yield f"≤ {_fmt(t)}", _at_most(t)
        elif kind == "out" and 0 < out_i < out_j < n:
            a, b = sv[out_i], sv[out_j - 1]  # what the agreeing elements between the cuts span
            yield (f"is not {_fmt(a)}" if a == b else f"is outside [{_fmt(a)}, {_fmt(b)}]"), _outside(a, b)
        elif kind == "in" and 0 < in_i < in_j < n:
            a, b = sv[in_i], sv[in_j - 1]
            yield (f"is {_fmt(a)}" if a == b else f"is within [{_fmt(a)}, {_fmt(b)}]"), _within(a, b)


# An input's values -> where the predicate holds. Written with operators only, so that one predicate reads
# numpy values here and JAX values inside a model (a guard's mask).
Test = Callable[[Any], Any]


def _nan(v: Any) -> Any:
    return v != v


def _inf(v: Any) -> Any:
    return abs(v) == float("inf")


def _finite(v: Any) -> Any:
    return (v == v) & (abs(v) != float("inf"))


def _at_least(t: float) -> Test:
    return lambda v: v >= t


def _at_most(t: float) -> Test:
    return lambda v: v <= t


def _outside(a: float, b: float) -> Test:
    return lambda v: (v < a) | (v > b)


def _within(a: float, b: float) -> Test:
    return lambda v: (v >= a) & (v <= b)


def _equals(m: float) -> Test:
    return lambda v: v == m


def _subnormal(tiny: float) -> Test:
    return lambda v: (v != 0) & (abs(v) < tiny)


def _on_finite(test: Test, magnitude: bool) -> Test:
    """A cut found on the finite values (or their magnitudes), as a predicate over the input's own values."""
    if magnitude:
        return lambda v: _finite(v) & test(abs(v))
    return lambda v: _finite(v) & test(v)


MIN_CUT = 3  # the fewest elements on each side for a threshold or an interval to name a class of them


def _candidates(ins: Sequence[np.ndarray | None], exact: np.ndarray | None, out_dtype: np.dtype,
                differ: np.ndarray) -> Iterator[tuple[str, np.ndarray, int | None, Test | None]]:
    """(words, mask over the output, the input it reads, the predicate over that input's values) for each
    predicate of the family, simplest first; the last two None where it reads two inputs or the result."""
    shape = differ.shape
    named = [(i, f"input {i + 1}" if len(ins) > 1 else "the input", x) for i, x in enumerate(ins) if x is not None]
    wides: list[tuple[int, str, np.ndarray, str]] = []

    def one(i: int, w: np.ndarray, words: str, test: Test) -> tuple[str, np.ndarray, int, Test]:
        with np.errstate(invalid="ignore", divide="ignore"):
            return words, _any(test(w), shape), i, test

    for i, name, x in named:
        kind = dtype_class(x.dtype) if x.dtype.kind != "V" or x.dtype.names is None else None
        if kind not in ("float", "int", "uint", "bool"):
            continue
        w = x.astype(np.float64)
        wides.append((i, name, w, kind))
        if kind == "bool":
            yield one(i, w, f"{name} is true", lambda v: v != 0)
            yield one(i, w, f"{name} is false", lambda v: v == 0)
            continue
        if kind == "float":
            import ml_dtypes

            tiny = float(ml_dtypes.finfo(x.dtype).tiny)
            yield one(i, w, f"{name} is NaN", _nan)
            yield one(i, w, f"{name} is ±inf", _inf)
            yield one(i, w, f"{name} is not finite", lambda v: _nan(v) | _inf(v))
            yield one(i, w, f"{name} is -0", lambda v: (v == 0) & (1 / v < 0))
            yield one(i, w, f"{name} is subnormal", _subnormal(tiny))
            yield one(i, w, f"{name} is a whole number", lambda v: _finite(v) & (v % 1 == 0))
            yield one(i, w, f"{name} is halfway (x.5)", lambda v: v % 1 == 0.5)
        yield one(i, w, f"{name} < 0", lambda v: v < 0)
        yield one(i, w, f"{name} is 0", lambda v: v == 0)
        if kind in ("int", "uint"):
            info = np.iinfo(x.dtype)
            yield one(i, w, f"{name} is {x.dtype}'s smallest value", _equals(float(info.min)))
            yield one(i, w, f"{name} is {x.dtype}'s largest value", _equals(float(info.max)))
    for k, (_, a, wa, ka) in enumerate(wides):
        for _, b, wb, kb in wides[k + 1:]:
            if (ka == "bool") != (kb == "bool") or wa.shape != wb.shape:
                continue
            with np.errstate(invalid="ignore"):
                yield f"{a} > {b}", _any(wa > wb, shape), None, None
                yield f"{a} < {b}", _any(wa < wb, shape), None, None
                yield f"{a} = {b}", _any(wa == wb, shape), None, None
                yield f"{a} and {b} have opposite signs", _any(np.signbit(wa) != np.signbit(wb), shape), None, None
                yield (f"{a} / {b} is a whole number",
                       _any((wb != 0) & (np.fmod(wa, np.where(wb == 0, 1, wb)) == 0), shape), None, None)
    if exact is not None and np.shape(exact) == shape:
        e = np.asarray(exact, np.float64)
        with np.errstate(invalid="ignore"):
            yield "the exact result is not finite", ~np.isfinite(e), None, None
            out_kind = dtype_class(out_dtype)
            if out_kind in ("int", "uint"):
                info = np.iinfo(out_dtype)
                yield (f"the exact result is outside {out_dtype}'s range (it overflows)",
                       (e < info.min) | (e > info.max), None, None)
            elif out_kind == "float" and out_dtype.kind == "f":
                big = float(np.finfo(out_dtype).max)
                yield f"the exact result is beyond {out_dtype}'s largest value", np.abs(e) > big, None, None
    # thresholds last: they can always fit something, so a named property wins a tie
    cuts = [(i, name, w, kd) for i, name, w, kd in wides if kd != "bool" and w.shape == shape]
    if min(int(differ.sum()), int((~differ).sum())) < MIN_CUT:
        return  # a threshold or an interval around one or two elements says nothing about them
    # (a row per output element has no single value to cut); one side of a threshold on the value, then on
    # its magnitude, then an interval of the value
    for intervals, magnitude in ((False, False), (False, True), (True, False)):
        for i, name, w, kd in cuts:
            if magnitude and kd == "uint":
                continue
            v = np.abs(w) if magnitude else w
            finite = np.isfinite(v)
            if finite.sum() < 2:
                continue
            for cut, test in _cuts(v[finite], differ[finite], intervals):
                full = np.zeros(shape, bool)
                with np.errstate(invalid="ignore"):
                    full[finite] = test(v[finite])
                on_input = _on_finite(test, magnitude)
                yield f"{'|' + name + '|' if magnitude else name} {cut}", full, i, on_input


def find_trigger(ins: Sequence[np.ndarray | None], differ: np.ndarray, exact: np.ndarray | None = None,
                 out_dtype: np.dtype | None = None) -> Trigger | None:
    """The predicate of the family that separates ``differ`` (a boolean per output element) from the rest:
    the first exact one, else the one with the fewest misclassified elements if it selects most of the
    differing ones and few of the others. ``ins``: the op's inputs aligned to the output (``align``; None
    where an input has no value per element); ``exact``: the op's exact (float64) result per element."""
    found = search_trigger(ins, differ, exact, out_dtype)
    return None if found is None else found[0]


def search_trigger(ins: Sequence[np.ndarray | None], differ: np.ndarray, exact: np.ndarray | None = None,
                   out_dtype: np.dtype | None = None) -> tuple[Trigger, int | None, Test | None] | None:
    """``find_trigger``, with the input the predicate reads (its position in ``ins``) and the predicate as a
    function of that input's values (float64), to apply to the input itself: a guard's mask. None, None
    where it reads two inputs or the exact result."""
    differ = np.asarray(differ, bool)
    d, n = int(differ.sum()), differ.size
    if d == 0 or d == n:
        return None  # nothing to separate: every element differs, or none
    best: tuple[int, Trigger, int | None, Test | None] | None = None
    seen: set[bytes] = set()
    for words, mask, i, test in _candidates(ins, exact, out_dtype or np.dtype(np.float32), differ):
        mask = np.asarray(mask, bool)
        key = np.packbits(mask).tobytes()
        if key in seen or not mask.any():
            continue  # a predicate that selects what an earlier, simpler one selected
        seen.add(key)
        hits = int((mask & differ).sum())
        false_hits = int((mask & ~differ).sum())
        found = Trigger(words, hits, d, false_hits, n - d)
        if found.exact:
            return found, i, test
        errors = (d - hits) + false_hits
        if best is None or errors < best[0]:
            best = (errors, found, i, test)
    if best is None:
        return None
    errors, t, i, test = best
    # only a predicate that tells the two sets apart far better than chance is worth saying
    if t.hits * 2 <= t.differing or t.false_hits * 4 > t.agreeing or errors * 4 > min(d, n - d) * 2:
        return None
    return t, i, test
