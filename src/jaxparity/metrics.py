"""Distances between two arrays of the same dtype: abs, rel, ULP, and the tolerance that would pass.

Numpy only (no JAX), so reports and baselines can be read without a JAX install.
ULP distance counts representable values between two floats of the array's own dtype, which is
the unit in which a bf16 model's error is meaningful. ``+0`` and ``-0`` are 0 ULP apart, two NaNs
agree, a NaN against a number is counted separately (no distance is meaningful there), and
subnormals and infinities are ordinary points on the line of representable values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .rounding import is_float_dtype, round_to_dtype

__all__ = [
    "LeafDiff",
    "ReferenceError",
    "Tolerance",
    "diff_leaf",
    "reference_error",
    "ulp_distance",
]


@dataclass(frozen=True)
class Tolerance:
    """When two arrays count as agreeing. The default is exact: every value equal."""

    ulp: int | None = None
    atol: float | None = None
    rtol: float | None = None

    @property
    def exact(self) -> bool:
        return self.ulp is None and self.atol is None and self.rtol is None

    def describe(self) -> str:
        if self.exact:
            return "exact"
        parts = []
        if self.ulp is not None:
            parts.append(f"ulp<={self.ulp}")
        if self.atol is not None or self.rtol is not None:
            parts.append(f"atol={self.atol or 0:g}, rtol={self.rtol or 0:g}")
        return " or ".join(parts)


_SATURATE = 9.2e18  # just below 2**63: distances beyond it are reported as this


def _ordered(bits: np.ndarray, nbits: int) -> np.ndarray:
    """Map IEEE bit patterns to integers whose order is the order of the float values."""
    bits = bits.astype(np.int64)  # uint64 wraps to negative: the sign bit is still bit 63
    magnitude = bits & np.int64((1 << (nbits - 1)) - 1)
    return np.where((bits >> (nbits - 1)) & 1, -magnitude, magnitude)


def _uint_view(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise distance in units of last place of the arrays' dtype (int64).

    For floats: the number of representable values between ``a`` and ``b``; 0 for ``±0`` and
    for two NaNs; -1 where exactly one side is NaN (no meaningful distance). Integers: ``|a-b|``.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype != b.dtype:
        raise TypeError(f"ulp_distance needs one dtype, got {a.dtype} and {b.dtype}")
    if a.dtype == np.bool_:
        return (a != b).astype(np.int64)
    if not is_float_dtype(a.dtype):
        if a.dtype.itemsize == 8:  # int64/uint64 differences can overflow int64: saturate
            return np.minimum(np.abs(a.astype(np.float64) - b.astype(np.float64)), _SATURATE).astype(np.int64)
        return np.abs(a.astype(np.int64) - b.astype(np.int64))
    nbits = a.dtype.itemsize * 8
    oa, ob = _ordered(_uint_view(a), nbits), _ordered(_uint_view(b), nbits)
    with np.errstate(over="ignore"):
        dist = np.abs(oa - ob)
    if nbits == 64:
        # Opposite-sign float64 distances can exceed int64; saturate them (they are astronomic).
        wide = np.abs(oa.astype(np.float64) - ob.astype(np.float64))
        dist = np.where((oa < 0) == (ob < 0), dist, np.minimum(wide, _SATURATE).astype(np.int64))
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    dist = np.where(nan_a & nan_b, 0, dist)
    return np.where(nan_a ^ nan_b, -1, dist)


def _histogram(ulps: np.ndarray) -> list[tuple[str, int]]:
    """Counts per bucket 0, 1, 2, 3-4, 5-8, ..., nonzero buckets only, plus 'NaN' mismatches."""
    rows: list[tuple[str, int]] = []
    valid = ulps[ulps >= 0]
    counts = {"0": int(np.count_nonzero(valid == 0)), "1": int(np.count_nonzero(valid == 1))}
    rows = [(k, v) for k, v in counts.items() if v]
    rest = valid[valid >= 2]
    if rest.size:
        upper = np.ceil(np.log2(rest.astype(np.float64))).astype(np.int64)
        for k in np.unique(upper):
            lo, hi = 2 ** (int(k) - 1) + 1, 2 ** int(k)
            label = str(hi) if lo == hi else f"{lo}-{hi}"
            rows.append((label, int(np.count_nonzero(upper == k))))
    nans = int(np.count_nonzero(ulps < 0))
    if nans:
        rows.append(("NaN vs number", nans))
    return rows


@dataclass(frozen=True)
class LeafDiff:
    """How one output array of a path differs from the same array of the baseline."""

    dtype: str
    shape: tuple[int, ...]
    size: int
    bitwise_equal: bool
    n_differ: int
    max_abs: float
    max_rel: float
    max_ulp: int
    nan_mismatch: int
    inf_mismatch: int
    within_tolerance: bool
    # Smallest tolerance that would have passed: max ULP, atol alone, rtol alone
    # (None where no tolerance of that kind can pass, e.g. a NaN against a number).
    required_ulp: int | None
    required_atol: float | None
    required_rtol: float | None
    ulp_histogram: list[tuple[str, int]] = field(default_factory=list)
    worst_index: tuple[int, ...] | None = None
    worst_got: float | None = None
    worst_expected: float | None = None


def _as_f64(a: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.complexfloating):
        return a.astype(np.complex128)
    return a.astype(np.float64)


def diff_leaf(got: np.ndarray, expected: np.ndarray, tol: Tolerance = Tolerance()) -> LeafDiff:
    """Compare ``got`` against ``expected`` (same shape and dtype)."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape or got.dtype != expected.dtype:
        raise ValueError(
            f"cannot compare {got.dtype}{list(got.shape)} with {expected.dtype}{list(expected.shape)}"
        )
    ulps = ulp_distance(got, expected).reshape(-1)
    g, e = _as_f64(got).reshape(-1), _as_f64(expected).reshape(-1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        absdiff = np.abs(g - e)
        both_nan = np.isnan(g) & np.isnan(e)
        absdiff = np.where(both_nan | (ulps == 0), 0.0, absdiff)  # inf==inf and ±0 agree
        nan_mismatch = int(np.count_nonzero(ulps < 0))
        inf_mismatch = int(np.count_nonzero(np.isinf(g) != np.isinf(e)))
        differ = ulps != 0
        n_differ = int(np.count_nonzero(differ))
        finite = ~(ulps < 0)
        max_abs = float(absdiff[finite].max(initial=0.0)) if differ.any() else 0.0
        tiny = np.finfo(np.float64).tiny
        if is_float_dtype(got.dtype):
            import ml_dtypes

            tiny = float(ml_dtypes.finfo(got.dtype).smallest_subnormal)
        rel = absdiff / np.fmax(np.abs(e), tiny)
        max_rel = float(rel[finite].max(initial=0.0)) if differ.any() else 0.0
        exact_rel = np.where(absdiff == 0, 0.0, np.where(e == 0, np.inf, absdiff / np.abs(e)))
    max_ulp = int(ulps.max(initial=0))

    passes = ~differ
    if tol.ulp is not None:
        passes |= (ulps >= 0) & (ulps <= tol.ulp)
    if tol.atol is not None or tol.rtol is not None:
        with np.errstate(invalid="ignore"):
            passes |= absdiff <= (tol.atol or 0.0) + (tol.rtol or 0.0) * np.abs(e)
    passes &= ~(ulps < 0)

    worst = None
    if n_differ:
        order = np.where(ulps < 0, np.iinfo(np.int64).max, ulps)
        worst = int(np.argmax(order))
    return LeafDiff(
        dtype=str(got.dtype),
        shape=tuple(int(s) for s in got.shape),
        size=int(got.size),
        bitwise_equal=bool(np.array_equal(_uint_view(got.reshape(-1)), _uint_view(expected.reshape(-1))))
        if got.dtype.itemsize in (1, 2, 4, 8) and got.dtype != np.bool_
        else bool(np.array_equal(got, expected)),
        n_differ=n_differ,
        max_abs=max_abs,
        max_rel=max_rel,
        max_ulp=max_ulp,
        nan_mismatch=nan_mismatch,
        inf_mismatch=inf_mismatch,
        within_tolerance=bool(passes.all()),
        required_ulp=None if nan_mismatch else max_ulp,
        required_atol=None if nan_mismatch else max_abs,
        required_rtol=None if nan_mismatch else float(exact_rel[finite].max(initial=0.0)),
        ulp_histogram=_histogram(ulps),
        worst_index=None if worst is None else tuple(int(i) for i in np.unravel_index(worst, got.shape)),
        worst_got=None if worst is None else float(g[worst].real),
        worst_expected=None if worst is None else float(e[worst].real),
    )


@dataclass(frozen=True)
class ReferenceError:
    """Error of one output array against the float64 ideal (the ``f64`` reference)."""

    max_abs: float
    mean_abs: float
    # ULP distance from the ideal value correctly rounded to the array's own dtype:
    # 0 means the array holds the best value its dtype can represent.
    max_ulp: int | None


def reference_error(x: np.ndarray, ideal: np.ndarray) -> ReferenceError:
    x, ideal = np.asarray(x), np.asarray(ideal)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(_as_f64(x) - _as_f64(ideal)).reshape(-1)
    err = err[~np.isnan(err)]
    max_ulp = None
    if is_float_dtype(x.dtype) and x.dtype.itemsize <= 8 and not np.iscomplexobj(ideal):
        ulps = ulp_distance(x, round_to_dtype(ideal.astype(np.float64), x.dtype))
        max_ulp = int(ulps.max(initial=0))
    return ReferenceError(
        max_abs=float(err.max(initial=0.0)),
        mean_abs=float(err.mean()) if err.size else 0.0,
        max_ulp=max_ulp,
    )
