"""What a fix costs at run time: two warm calls timed interleaved, side by side in one process.

Timing one call after the other measures whatever else the machine did in between as well (on a busy
2-core machine a ResNet's fix read −12% in one run and +21% in the next); alternating them, in
alternating order, exposes both to the same conditions. The result is the ratio of the medians, how much
the median of the baseline call itself moves between the two halves of the rounds, and in how many rounds
the two calls timed side by side agree with that ratio's sign: a cost within that spread, or one that a
quarter of the rounds or more contradict, is not a measured cost (the machine's load, which would make the
same command print another cost the next time). On an accelerator a call shorter than the timer's
resolution is timed in runs of several calls (as ``timeit`` does), so a small model's cost there is its
cost per call, dispatch included, not "unmeasurable".
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Cost", "relative_cost"]

MIN_TIMED = 1e-3  # seconds one timed sample lasts at least: shorter calls are repeated within a sample
MAX_REPEAT = 1000  # calls in one sample at most; a call still under MIN_TIMED then is not timed
AGREE = 0.75  # share of the rounds that must show a cost's direction for it to be a measured cost


@dataclass(frozen=True)
class Cost:
    ratio: float  # median seconds with the fix / without, minus 1 (+0.43: 43% slower)
    spread: float  # relative change of the unfixed call's median between the two halves of the rounds
    rounds: int
    calls: int = 1  # calls per timed sample
    agree: float = 1.0  # share of the rounds whose two samples, side by side, differ in the ratio's direction

    @property
    def measurable(self) -> bool:
        return abs(self.ratio) > max(0.03, 2 * self.spread) and self.agree >= AGREE


def relative_cost(after: Callable[[], Any], before: Callable[[], Any], *, budget: float = 2.0,
                  rounds: int = 16, repeat: bool = False) -> Cost | None:
    """``after``'s run time against ``before``'s (both warm, blocking), interleaved in alternating order
    for up to ``rounds`` rounds within ``budget`` seconds (at least 4). None where a call takes under
    ``MIN_TIMED``; with ``repeat`` (an accelerator's calls, dispatched in microseconds) such a call is timed in
    samples of as many calls as reach it (at most ``MAX_REPEAT``), and None where even that many do not. On
    the host a call that short is left untimed: its cost would be the machine's load, and a report that says it
    would differ from run to run."""
    calls = _calls_per_sample(before) if repeat else 1
    if calls is None:
        return None
    a: list[float] = []
    b: list[float] = []
    start = time.perf_counter()
    while len(a) < rounds and (len(a) < 4 or time.perf_counter() - start < budget):
        pair = [(after, a), (before, b)]
        for call, out in pair if len(a) % 2 == 0 else pair[::-1]:
            out.append(_sample(call, calls))
    mid = statistics.median(b)
    if mid < MIN_TIMED and calls == 1:
        return None
    half = len(b) // 2
    first, second = statistics.median(b[:half]), statistics.median(b[half:])
    ratio = statistics.median(a) / mid - 1
    agree = sum((x - y) * ratio > 0 for x, y in zip(a, b)) / len(a)
    # A call timed in runs of many calls whose cost is within the spread has no measurable cost (the callers
    # say so: ``Cost.measurable``), as a call timed alone.
    return Cost(ratio, abs(first - second) / mid, len(a), calls, agree)


def _sample(call: Callable[[], Any], calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - t) / calls


def _calls_per_sample(call: Callable[[], Any]) -> int | None:
    """How many calls one sample needs to last ``MIN_TIMED``: 1, 10, 100 … as ``timeit.autorange`` picks."""
    calls = 1
    while calls <= MAX_REPEAT:
        if _sample(call, calls) * calls >= MIN_TIMED:
            return calls
        calls *= 10
    return None
