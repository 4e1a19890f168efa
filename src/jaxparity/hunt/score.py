"""How far two paths' outputs on one input are apart, as one rank a search can climb.

The rank orders kinds before sizes: a path that fails where the other runs; NaN or inf on one side only;
a difference beyond rounding (a jump: a flipped threshold, another argmax, digits lost: an integer output
that changed, or a difference of at least the square root of the epsilon of the narrowest float the
program computes in, against the output's own scale: half its digits); a rounding difference; none. Within a kind, the larger
difference against the output's scale (its largest finite magnitude on this input or on the example),
then the larger ULP distance: a difference measured element by element in ULP or relative terms is largest
where an output is near zero (a subnormal flushed to zero is millions of ULP), which says little of how
far the paths are apart.
With a tolerance, an input that breaks it ranks above every one that does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from ..metrics import Tolerance, diff_leaf

__all__ = ["KINDS", "Divergence", "divergence", "output_scales"]

# the kinds, least first (the index is the rank)
KINDS = ("none", "rounding", "beyond rounding", "NaN or inf on one side", "fails on one side")


@dataclass(frozen=True)
class Divergence:
    kind: str  # one of KINDS
    output: str  # the output leaf where it is worst ("" where a path failed)
    max_ulp: int
    max_abs: float
    max_rel: float
    scaled: float  # max abs against the output's scale (its largest finite magnitude on either side)
    n_differ: int
    size: int
    breaks: bool  # outside the tolerance (exact: any difference)
    index: tuple[int, ...] | None = None  # the worst element
    baseline_value: float | int | None = None
    path_value: float | int | None = None
    message: str = ""  # the failing side's error, where one failed

    @property
    def rank(self) -> tuple:
        return (self.breaks, KINDS.index(self.kind), self.scaled, self.max_ulp)

    @property
    def severity(self) -> float:
        """The difference against the output's scale, infinite for a failure or NaN/inf on one side (what the
        progress plots)."""
        return float("inf") if KINDS.index(self.kind) >= 3 else self.scaled

    def describe(self) -> str:
        if self.kind == "fails on one side":
            return self.message
        if self.kind == "none":
            return "no difference"
        where = f"{self.output}{list(self.index) if self.index is not None else ''}"
        values = (f" ({self.path_value!r} vs {self.baseline_value!r})" if self.baseline_value is not None else "")
        if self.kind == "NaN or inf on one side":
            return f"NaN or inf on one side at {where}{values}"
        return (f"{self.max_ulp:,} ULP at {where}{values}, max abs {self.max_abs:.3g} ({self.scaled:.2g} of the "
                f"output's scale), {self.n_differ} of {self.size} elements")


def divergence(base: Sequence[tuple[str, np.ndarray]] | str, path: Sequence[tuple[str, np.ndarray]] | str,
               tolerance: Tolerance, scales: dict[str, float] | None = None, narrowest: str | None = None
               ) -> Divergence | None:
    """The divergence of ``path``'s outputs from ``base``'s (each a list of named leaves, or the error of a
    run that failed); None where both failed (the input is not one the model takes). ``scales``: each
    output's largest finite magnitude on the example (``output_scales``); ``narrowest``: the narrowest float
    dtype the program computes in (a bfloat16 model's float32 output carries bfloat16's rounding)."""
    if isinstance(base, str) and isinstance(path, str):
        return None
    if isinstance(base, str) or isinstance(path, str):
        side = "the baseline" if isinstance(base, str) else "the path"
        return Divergence("fails on one side", "", 0, 0.0, 0.0, 0.0, 0, 0, True,
                          message=f"{side} fails: {base if isinstance(base, str) else path}")
    best: Divergence | None = None
    for (name, b), (_, p) in zip(base, path):
        p, b = np.asarray(p), np.asarray(b)
        if p.dtype != b.dtype and p.shape == b.shape:  # the f64 reference: correctly rounded to the path's dtype
            from ..rounding import round_to_dtype

            p, b = (round_to_dtype(p, b.dtype), b) if p.itemsize > b.itemsize else (p, round_to_dtype(b, p.dtype))
        d = diff_leaf(p, b, tolerance)
        scaled = d.max_abs / max(_scale(p), _scale(b), (scales or {}).get(name, 0.0)) if d.max_abs else 0.0
        if d.bitwise_equal or d.n_differ == 0:
            kind = "none"
        elif d.nan_mismatch or d.inf_mismatch:
            kind = "NaN or inf on one side"
        elif np.dtype(d.dtype).kind in "biu" or scaled >= _half_digits(narrowest or b.dtype):
            kind = "beyond rounding"
        else:
            kind = "rounding"
        here = Divergence(kind, name, d.max_ulp, d.max_abs, d.max_rel, scaled, d.n_differ, d.size,
                          not d.within_tolerance, d.worst_index, d.worst_expected, d.worst_got)
        if best is None or here.rank > best.rank:
            best = here
    return best or Divergence("none", "", 0, 0.0, 0.0, 0.0, 0, 0, False)


def output_scales(outputs: Sequence[tuple[str, np.ndarray]]) -> dict[str, float]:
    """Each output's largest finite magnitude (on the example: the scale its differences are measured by)."""
    return {name: _scale(np.asarray(x)) for name, x in outputs}


def _scale(x: np.ndarray) -> float:
    """The largest finite magnitude of ``x`` (the smallest positive float where it has none)."""
    from ..metrics import as_wide

    with np.errstate(invalid="ignore"):
        m = np.abs(as_wide(x))
    m = m[np.isfinite(m)]
    return max(float(m.max()) if m.size else 0.0, float(np.finfo(np.float64).tiny))


def _half_digits(dtype: DTypeLike) -> float:
    """The square root of the dtype's epsilon (of its real component): a difference that large against the
    output's scale has lost half its digits, more than any rounding of the same math does."""
    from .hazards import finfo

    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        dtype = np.dtype(np.float32 if dtype.itemsize == 8 else np.float64)
    return float(finfo(dtype).eps) ** 0.5
