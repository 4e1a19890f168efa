"""Stage 1, triage: facts about the two sides' outputs alone, before any op is looked at. Are they within the
model's own rounding noise? Is the path deterministic? Did observing every op move only outputs that were
already wrong? The blame stage reads them to judge a capture that changed the path's outputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..localize.program import FlatProgram
from ..metrics import LESS_ACCURATE, ROUNDING_SHARE, max_gaps
from ..paths import Path
from .measure import unchanged

__all__ = ["moved_where_differing", "unstable", "within_own_noise"]


def within_own_noise(path_out: Sequence[np.ndarray], base_out: Sequence[np.ndarray], program: FlatProgram,
                     flat_args: Sequence[Any], fn: Any = None, args: tuple = ()) -> bool:
    """Is every output of the path within twice the baseline's own distance from the f64 ideal (the model's
    own rounding noise)? An output-level fact, whatever the per-op values show. Not where the ideal of ``fn``
    takes other loop or branch decisions than the program (``ideal.decisions``): its distance is no floor."""
    from ..ideal.decisions import decides_otherwise
    from ..localize.values import program_values

    if fn is not None and decides_otherwise(fn, args):
        return False
    try:
        ideal = program_values(program, "f64", flat_args).outputs
    except Exception:  # the interpreter cannot run it: not established
        return False
    def scale(x: Any) -> float:
        w = np.abs(np.asarray(x, np.float64)) if np.asarray(x).dtype.kind in "fiub" or \
            np.asarray(x).dtype.name == "bfloat16" else np.zeros(1)
        w = w[np.isfinite(w)]
        return float(w.max(initial=0.0))

    floors = max_gaps(base_out, ideal)
    # a baseline as far from the ideal as a share of the values is wrong there, not noisy: no floor
    if any(f > ROUNDING_SHARE * scale(i) for f, i in zip(floors, ideal)):
        return False
    # a baseline far less accurate than the path (another device's arithmetic) has its own error, not a floor
    if any(f > LESS_ACCURATE * m for f, m in zip(floors, max_gaps(path_out, ideal))):
        return False
    return all(g <= 2 * f for g, f in zip(max_gaps(path_out, base_out), floors))


def unstable(fn: Callable[..., Any], args: tuple, path: Path | str, path_out: Sequence[np.ndarray],
             captured: Sequence[Any]) -> int | None:
    """A capture that moved the outputs only where the path is not deterministic: a second plain run of the
    path differs from the first wherever the capture does (and maybe elsewhere). The number of output
    elements the two plain runs disagree on, or None (the path is deterministic, or the capture moved other
    elements too)."""
    from ..execution.inprocess import run_in_process
    from ..paths import make_path

    r = run_in_process(make_path(str(path)), fn, args)  # a path of its own: nothing it noted carries over
    if r.status != "ok" or not r.outputs or len(r.outputs) != len(path_out):
        return None
    again = [a for _, a in r.outputs]
    stable = [unchanged(x, y) for x, y in zip(path_out, again)]
    differ = sum(int(np.count_nonzero(~m)) for m in stable)
    moved_elsewhere = any(np.any(m & ~unchanged(x, c)) for m, x, c in zip(stable, path_out, captured))
    return differ if differ and not moved_elsewhere else None


def moved_where_differing(path_out: Sequence[np.ndarray], captured: Sequence[Any],
                          base_out: Sequence[np.ndarray]) -> int | None:
    """The number of output elements a capture moved, where every one of them already differs from the
    baseline in the plain run (the capture changed which wrong value they hold, not which elements are wrong);
    None where it moved an element the plain run gets right."""
    moved = 0
    for x, c, b in zip(path_out, captured, base_out):
        changed = ~unchanged(x, c)
        if np.any(changed & unchanged(x, b)):
            return None
        moved += int(np.count_nonzero(changed))
    return moved or None
