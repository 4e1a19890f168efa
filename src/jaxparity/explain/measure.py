"""How far apart two sets of outputs are, and what a re-run did to that distance: one judgement that every
verdict and every sentence about a re-run reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..metrics import ulp_distance
from ..rounding import is_float_dtype

__all__ = ["NARROWS", "OUTCOMES", "Outcome", "crosses_zero", "distance", "identical", "narrowing", "ulp_comparable",
           "unchanged"]

Outcome = Literal["parity", "narrows", "no change", "no closer"]


def distance(outs: Sequence[Any], base: Sequence[Any]) -> tuple[int, int]:
    """(elements that differ, max ULP) between two flat output lists."""
    n = worst = 0
    for a, b in zip(outs, base):
        u = ulp_distance(np.asarray(a), np.asarray(b))
        n += int(np.count_nonzero(u))
        worst = max(worst, int(np.where(u < 0, np.iinfo(np.int64).max, u).max(initial=0)))
    return n, worst


NARROWS = ": narrows, not parity"  # the words of a re-run that moved closer without restoring parity


def crosses_zero(outs: Sequence[Any], base: Sequence[Any]) -> bool:
    """Whether the largest ULP distance between two flat output lists is between values on either side of
    zero (opposite signs, or zero against a nonzero value). Such a distance counts the float grid down to
    zero and up again, a measure of how small the two values are, not of how far apart: its rise or fall
    says nothing about the difference."""
    worst, crossing = 0, False
    for a, b in zip(outs, base):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.size == 0 or not is_float_dtype(a.dtype):
            continue
        u = ulp_distance(a, b)
        if (u < 0).any():  # a NaN against a number: the largest distance of all (``distance``), not a crossing
            return False
        i = int(np.argmax(u))
        if int(u.flat[i]) > worst:
            x, y = float(a.flat[i]), float(b.flat[i])
            worst, crossing = int(u.flat[i]), (x < 0) != (y < 0) or (x == 0) != (y == 0)
    return crossing


def ulp_comparable(before: tuple[Sequence[Any], Sequence[Any]], after: tuple[Sequence[Any], Sequence[Any]]) -> bool:
    """Whether the max ULP of two differences (each a pair of flat output lists) can be set side by side:
    neither is a distance across zero (``crosses_zero``)."""
    return not crosses_zero(*before) and not crosses_zero(*after)


def narrowing(before: tuple[int | float, ...], after: tuple[int | float, ...], changed: bool, ulp: bool = True) -> str:
    """What a re-run did to the difference, from (elements that differ, max ULP[, max abs]) before and
    after: one judgement for the cause's status and every sentence that reports it. Narrower means no
    more elements and no larger a distance, in ULP or in absolute terms, and less in one of them (a
    re-run can move the worst element to a larger value: fewer ULP, yet a larger difference). ``ulp``
    False: the max ULP is left out of the judgement, where either one is a distance across zero
    (``ulp_comparable``) and its change says nothing about the difference."""
    if after[0] == 0:
        return ": parity restored"
    if not ulp and len(before) > 2:
        before, after = (before[0], *before[2:]), (after[0], *after[2:])
    if all(a <= b for a, b in zip(after, before)) and after != before:
        return NARROWS
    return ": no change" if not changed else ": no closer"


OUTCOMES: dict[str, Outcome] = {": parity restored": "parity", NARROWS: "narrows", ": no change": "no change",
                                ": no closer": "no closer"}


def unchanged(a: Any, b: Any) -> np.ndarray:
    """Where two results of one output are the same (NaN against NaN the same, whatever its bits)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return np.zeros(a.shape, bool)
    same = a == b
    if a.dtype.kind == "c" or is_float_dtype(a.dtype):  # bfloat16, float8: numpy kind 'V'
        same |= np.isnan(a) & np.isnan(b)
    return np.asarray(same)


def identical(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Two flat output lists the same bit for bit (dtype, shape and bytes)."""
    return len(a) == len(b) and all(np.asarray(x).dtype == np.asarray(y).dtype and np.asarray(x).shape ==
                                    np.asarray(y).shape and np.asarray(x).tobytes() == np.asarray(y).tobytes()
                                    for x, y in zip(a, b))
