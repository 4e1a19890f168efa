"""Distances between two arrays of the same dtype: abs, rel, ULP, and the tolerance that would pass.

Numpy only (no JAX), so reports and baselines can be read without a JAX install.

Every dtype JAX has falls into exactly one class (:func:`dtype_class`), and each class has its own
distance; an array of any other dtype is refused (:class:`UnsupportedDtype`), never called equal.

* **float** (f16, bf16, f32, f64, every float8/float6/float4 format): the number of representable
  values of the array's own dtype between the two values, which is the unit in which a bf16 model's
  error is meaningful. ``+0`` and ``-0`` are 0 ULP apart, two NaNs agree, a NaN against a number is
  counted separately (no distance is meaningful there); subnormals and infinities are ordinary
  points on the line of representable values.
* **complex**: each component in ULP of its component dtype (the element's distance is the larger
  one; a NaN in one component but not the other side's is a NaN mismatch), and the relative error
  of the element as a whole, ``|a - b| / |b|``, and of its modulus.
* **int** / **uint** (every width, int4/int2 included): ``|a - b|`` exactly, also beyond 2**53 (saturating at 2**63-1).
* **bool**: 1 where the values differ.
* **empty** (JAX's ``float0``, the tangent type of integers): carries no values; always equal.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import DTypeLike

from .rounding import is_float_dtype, round_to_dtype

__all__ = [
    "ROUNDING_SHARE",
    "ComplexParts",
    "DtypeClass",
    "LeafDiff",
    "ReferenceError",
    "Tolerance",
    "UnsupportedDtype",
    "as_wide",
    "diff_leaf",
    "dtype_class",
    "reference_error",
    "signed_zero_flips",
    "ulp_distance",
]

DtypeClass = Literal["bool", "int", "uint", "float", "complex", "empty"]


class UnsupportedDtype(TypeError):
    """An array whose dtype has no defined distance (strings, objects, records...)."""


def dtype_class(dtype: DTypeLike) -> DtypeClass:
    """The metric an array of ``dtype`` is measured with; raises :class:`UnsupportedDtype` otherwise."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "bool"
    if dtype.kind == "i":
        return "int"
    if dtype.kind == "u":
        return "uint"
    if dtype.kind == "c":
        return "complex"
    if is_float_dtype(dtype):
        return "float"
    if dtype.kind == "V" and dtype.itemsize == 0 or dtype.names == ("float0",):
        return "empty"
    if dtype.kind == "V":  # ml_dtypes' narrow integers (int4, uint4, int2...) register as kind 'V'
        import ml_dtypes

        try:
            return "int" if ml_dtypes.iinfo(dtype).min < 0 else "uint"
        except (TypeError, ValueError):
            pass
    raise UnsupportedDtype(f"no distance is defined for arrays of dtype {dtype}: jaxparity compares "
                           "bool, integer, float (f16, bf16, f32, f64, float8...) and complex arrays")


# Results within this many ULP of the correctly rounded one on both sides: two accurate math libraries, not a
# bug (XLA's own documented accuracy for f32 transcendentals is a few ULP).
MATH_LIBRARY_ULP = 64


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


_SATURATE = np.iinfo(np.int64).max  # distances beyond it (64-bit integers far apart) are reported as this


# -- ULP distance, one function per class ------------------------------------------------------------
def _uint_view(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _ordered_ieee(a: np.ndarray) -> np.ndarray:
    """IEEE bit patterns (sign bit on top) -> integers whose order is the order of the values, ±0 -> 0."""
    nbits = a.dtype.itemsize * 8
    bits = _uint_view(a).astype(np.int64)  # uint64 wraps to negative: the sign bit is still bit 63
    magnitude = bits & np.int64((1 << (nbits - 1)) - 1)
    return np.where((bits >> (nbits - 1)) & 1, -magnitude, magnitude)


@functools.cache
def _value_line(dtype: np.dtype) -> np.ndarray:
    """Every non-NaN value of a one-byte float format, ascending, ±0 once: its index is its rank.

    The float8/6/4 formats differ in where (and whether) they keep a sign bit, an infinity and
    NaNs, so the line of representable values is enumerated rather than read from the bits.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        values = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    return np.unique(values[~np.isnan(values)])  # np.unique sorts, and -0.0 == 0.0 merges them


def _ranks(a: np.ndarray) -> np.ndarray:
    """Integer positions on the line of representable values of ``a``'s float dtype."""
    if a.dtype.itemsize == 1:
        return np.searchsorted(_value_line(a.dtype), a.astype(np.float64)).astype(np.int64)
    return _ordered_ieee(a)


def _isnan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a.astype(np.float32)) if a.dtype.itemsize < 4 else np.isnan(a)


def _float_ulp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ra, rb = _ranks(a), _ranks(b)
    with np.errstate(over="ignore"):
        dist = np.abs(ra - rb)
    if a.dtype.itemsize == 8:
        # Opposite-sign float64 distances can exceed int64; saturate them (they are astronomic).
        same_side = (ra < 0) == (rb < 0)
        if not same_side.all():
            wide = np.abs(ra.astype(np.float64) - rb.astype(np.float64))
            dist = np.where(same_side, dist, np.minimum(wide, 9.2e18).astype(np.int64))
    nan_a, nan_b = _isnan(a), _isnan(b)
    dist = np.where(nan_a & nan_b, 0, dist)
    return np.where(nan_a ^ nan_b, -1, dist)


def _int_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| exactly for any integer width, saturated at int64 max (never through float64)."""
    if a.dtype.itemsize < 8:
        return np.abs(a.astype(np.int64) - b.astype(np.int64))
    # Map both onto uint64 in value order (flip the sign bit of signed values); the difference of
    # the larger and the smaller is then exact in uint64 arithmetic.
    flip = np.uint64(1 << 63) if a.dtype.kind == "i" else np.uint64(0)
    ua, ub = a.view(np.uint64) ^ flip, b.view(np.uint64) ^ flip
    diff = np.maximum(ua, ub) - np.minimum(ua, ub)
    return np.minimum(diff, np.uint64(_SATURATE)).astype(np.int64)


def _components(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.ascontiguousarray(a.real), np.ascontiguousarray(a.imag)


def _complex_ulp(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per component ULP distances (real, imag) in the component dtype; -1 marks a NaN mismatch."""
    (ar, ai), (br, bi) = _components(a), _components(b)
    return _float_ulp(ar, br), _float_ulp(ai, bi)


def signed_zero_flips(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where ``a`` and ``b`` are zeros of opposite signs (+0 against -0): equal as numbers, 0 ULP apart,
    yet a different value to atan2, 1/x or copysign downstream. False for non-float dtypes; for complex,
    either component."""
    a, b = np.asarray(a), np.asarray(b)
    kind = dtype_class(a.dtype)
    if a.dtype != b.dtype or kind not in ("float", "complex"):
        return np.zeros(np.broadcast_shapes(a.shape, b.shape), bool)
    if kind == "complex":
        return signed_zero_flips(a.real, b.real) | signed_zero_flips(a.imag, b.imag)
    x, y = as_wide(a), as_wide(b)
    return (x == 0) & (y == 0) & (np.signbit(x) != np.signbit(y))


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise distance of two arrays of one dtype (int64), by the dtype's class.

    Floats: representable values between ``a`` and ``b`` (0 for ``±0`` and for two NaNs; -1 where
    exactly one side is NaN). Complex: the larger of the two components' distances in their
    component dtype (-1 where either component is a NaN mismatch). Integers: ``|a - b|`` exactly.
    Bools: 1 where they differ. Raises ``TypeError`` for two dtypes, ``UnsupportedDtype`` for a
    dtype with no distance.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        raise TypeError(f"ulp_distance needs one dtype, got {a.dtype} and {b.dtype}")
    kind = dtype_class(a.dtype)
    if kind == "bool":
        return (a != b).astype(np.int64)
    if kind in ("int", "uint"):
        return _int_distance(a, b)
    if kind == "float":
        return _float_ulp(a, b)
    if kind == "complex":
        re, im = _complex_ulp(a, b)
        return np.where((re < 0) | (im < 0), -1, np.maximum(re, im))
    return np.zeros(np.broadcast_shapes(a.shape, b.shape), np.int64)  # empty: no values to differ


def _histogram(ulps: np.ndarray) -> list[tuple[str, int]]:
    """Counts per bucket 0, 1, 2, 3-4, 5-8, ..., nonzero buckets only, plus 'NaN' mismatches."""
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


# -- one output array against the baseline's -----------------------------------------------------
Scalar = float | int  # an element as the result model holds it: ints stay exact


@dataclass(frozen=True)
class ComplexParts:
    """The components of a complex comparison, each in its own units."""

    max_ulp_real: int  # in ULP of the component dtype (float32 for complex64); NaN mismatches excluded
    max_ulp_imag: int
    max_rel_modulus: float  # max | |got| - |expected| | / |expected|
    worst_got_imag: float | None = None  # imaginary parts of the worst element (real parts: worst_got)
    worst_expected_imag: float | None = None


@dataclass(frozen=True)
class LeafDiff:
    """How one output array of a path differs from the same array of the baseline."""

    dtype: str
    shape: tuple[int, ...]
    size: int
    bitwise_equal: bool
    n_differ: int
    max_abs: float  # complex: the modulus |got - expected|
    max_rel: float  # complex: |got - expected| / |expected|
    max_ulp: int  # complex: the larger component distance
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
    worst_got: Scalar | None = None  # complex: the real part (imaginary parts in ``complex_parts``)
    worst_expected: Scalar | None = None
    complex_parts: ComplexParts | None = None


def as_wide(a: np.ndarray) -> np.ndarray:
    """float64 / complex128 values (integers above 2**53 lose digits: used for abs/rel only)."""
    if a.dtype.kind == "V" and a.dtype.names:  # float0: no values
        return np.zeros(a.shape)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _scalar(x: np.generic) -> Scalar:
    return int(x) if isinstance(x, (np.integer, np.bool_)) else float(x)


def diff_leaf(got: np.ndarray, expected: np.ndarray, tol: Tolerance = Tolerance()) -> LeafDiff:
    """Compare ``got`` against ``expected`` (same shape and dtype, of a class ``dtype_class`` knows)."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape or got.dtype != expected.dtype:
        raise ValueError(
            f"cannot compare {got.dtype}{list(got.shape)} with {expected.dtype}{list(expected.shape)}"
        )
    kind = dtype_class(got.dtype)
    flat_got, flat_exp = got.reshape(-1), expected.reshape(-1)
    ulps = ulp_distance(flat_got, flat_exp)
    parts = _complex_parts(flat_got, flat_exp) if kind == "complex" else None
    g, e = as_wide(flat_got), as_wide(flat_exp)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if kind in ("int", "uint", "bool"):
            absdiff = ulps.astype(np.float64)  # exact distances (rounded to float64 for display)
        else:
            absdiff = np.where(ulps == 0, 0.0, np.abs(g - e))  # ±0, NaN/NaN and inf/inf agree
        nan_mismatch = int(np.count_nonzero(ulps < 0))
        inf_mismatch = _inf_mismatch(g, e)
        differ = ulps != 0
        n_differ = int(np.count_nonzero(differ))
        finite = ~(ulps < 0)
        max_abs = float(absdiff[finite].max(initial=0.0)) if n_differ else 0.0
        scale = np.abs(e)
        rel = absdiff / np.fmax(scale, _tiny(got.dtype))
        max_rel = float(rel[finite].max(initial=0.0)) if n_differ else 0.0
        exact_rel = np.where(absdiff == 0, 0.0, np.where(scale == 0, np.inf, absdiff / scale))
    max_ulp = int(ulps.max(initial=0))

    passes = ~differ
    if tol.ulp is not None:
        passes |= (ulps >= 0) & (ulps <= tol.ulp)
    if tol.atol is not None or tol.rtol is not None:
        with np.errstate(invalid="ignore"):
            passes |= absdiff <= (tol.atol or 0.0) + (tol.rtol or 0.0) * scale
    passes &= finite

    worst = None
    if n_differ:
        worst = int(np.argmax(np.where(ulps < 0, np.iinfo(np.int64).max, ulps)))
    if parts is not None and worst is not None:
        parts = ComplexParts(parts.max_ulp_real, parts.max_ulp_imag, parts.max_rel_modulus,
                             float(flat_got[worst].imag), float(flat_exp[worst].imag))
    real_of = (lambda a: a.real) if kind == "complex" else (lambda a: a)  # noqa: E731
    return LeafDiff(
        dtype=str(got.dtype),
        shape=tuple(int(s) for s in got.shape),
        size=int(got.size),
        bitwise_equal=np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes(),
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
        worst_got=None if worst is None else _scalar(real_of(flat_got[worst])),
        worst_expected=None if worst is None else _scalar(real_of(flat_exp[worst])),
        complex_parts=parts,
    )


def _tiny(dtype: np.dtype) -> float:
    """The smallest positive value of ``dtype``'s (component) float type: the floor of a relative error."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        dtype = np.dtype(np.float32 if dtype.itemsize == 8 else np.float64)
    if is_float_dtype(dtype):
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).smallest_subnormal)
    return 1.0  # integers: relative to |expected|, at least 1


def _inf_mismatch(g: np.ndarray, e: np.ndarray) -> int:
    """Elements where one side has an infinity the other does not (per component for complex)."""
    if g.dtype.kind == "c":
        return int(np.count_nonzero((np.isinf(g.real) != np.isinf(e.real)) | (np.isinf(g.imag) != np.isinf(e.imag))))
    return int(np.count_nonzero(np.isinf(g) != np.isinf(e)))


def _complex_parts(got: np.ndarray, expected: np.ndarray) -> ComplexParts:
    re, im = _complex_ulp(got, expected)
    g, e = np.abs(got.astype(np.complex128)), np.abs(expected.astype(np.complex128))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        rel = np.where(g == e, 0.0, np.abs(g - e) / np.fmax(e, _tiny(got.dtype)))
    rel = rel[~np.isnan(rel)]
    return ComplexParts(max_ulp_real=int(re.max(initial=0)), max_ulp_imag=int(im.max(initial=0)),
                        max_rel_modulus=float(rel.max(initial=0.0)))


# -- one output array against the float64 ideal ---------------------------------------------------
# The share of an output's largest value beyond which a baseline's distance from the f64 ideal is no rounding
# but an error (a flipped decision, a wrong value): bf16's unit roundoff is 2**-9, and a few roundings of it
# stay well below 1/16. Such a distance is no noise floor to judge another path by.
ROUNDING_SHARE = 1 / 16
# A baseline this many times farther from the f64 ideal than the path has an error of its own (another device's
# arithmetic, a less accurate function): no noise floor to judge the path by.
LESS_ACCURATE = 16


@dataclass(frozen=True)
class ReferenceError:
    """Error of one output array against the float64 ideal (the ``f64`` reference)."""

    max_abs: float
    mean_abs: float
    # ULP distance from the ideal value correctly rounded to the array's own dtype (complex: the
    # larger component, each rounded to the component dtype): 0 means the array holds the best
    # value its dtype can represent. None for integer and bool arrays (their distance is max_abs).
    max_ulp: int | None
    # The largest finite |ideal| of the array: the scale an error of max_abs is judged against (a
    # baseline as far from f64 as the values are large has lost its digits). None where not measured.
    ideal_scale: float | None = None


def reference_error(x: np.ndarray, ideal: np.ndarray) -> ReferenceError:
    """How far ``x`` is from ``ideal`` (float64 / complex128 for inexact ``x``, else ``x``'s dtype)."""
    x, ideal = np.asarray(x), np.asarray(ideal)
    kind = dtype_class(x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        wx, wi = as_wide(x), as_wide(ideal)
        err = np.abs(wx - wi).reshape(-1)
        # NaN on one side only is as far as it gets (never 0: the judge must not call it equal); NaN on
        # both sides, or the same infinity, is no error.
        one_nan = (np.isnan(wx) != np.isnan(wi)).reshape(-1) if kind in ("float", "complex") else \
            np.zeros(err.shape, bool)
    err = np.where(one_nan, np.inf, err)
    err = err[~np.isnan(err)]
    max_ulp = None
    if kind == "float":
        ulps = ulp_distance(x, round_to_dtype(ideal.astype(np.float64), x.dtype))
        max_ulp = int(np.where(ulps < 0, np.iinfo(np.int64).max, ulps).max(initial=0))
    elif kind == "complex":
        wide = ideal.astype(np.complex128)
        rounded = np.empty(x.shape, x.dtype)  # each component rounded on its own (arithmetic would mix NaNs in)
        rounded.real, rounded.imag = wide.real, wide.imag
        ulps = ulp_distance(x, rounded)
        max_ulp = int(np.where(ulps < 0, np.iinfo(np.int64).max, ulps).max(initial=0))
    with np.errstate(invalid="ignore"):
        size = np.abs(as_wide(ideal)).reshape(-1)
    size = size[np.isfinite(size)]
    return ReferenceError(
        max_abs=float(err.max(initial=0.0)),
        mean_abs=float(err.mean()) if err.size else 0.0,
        max_ulp=max_ulp,
        ideal_scale=float(size.max(initial=0.0)) if kind in ("float", "complex") else None,
    )


def closer_to_ideal(path_err: Any, base_err: Any) -> str:
    """Which side is nearer the f64 ideal (two ``ReferenceError``s), by max abs error (the table's measure), then
    mean abs error: "path", "baseline" or "tie"."""
    a, b = (path_err.max_abs, path_err.mean_abs), (base_err.max_abs, base_err.mean_abs)
    return "tie" if a == b else ("path" if a < b else "baseline")


def max_gaps(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> list[float]:
    """Per output pair, the largest absolute difference (inf where one side is NaN or inf and the other not;
    NaN against NaN is no difference)."""
    gaps = []
    for x, y in zip(a, b):
        x, y = as_wide(np.asarray(x)), as_wide(np.asarray(y))
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(x - y)
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        gaps.append(float(np.where(same, 0.0, np.where(np.isfinite(d), d, np.inf)).max(initial=0.0)))
    return gaps
