"""An equality and ULP judge written independently of ``jaxparity.metrics``.

The conformance suite checks the tool's own verdicts, so it must not reuse the tool's code to
decide what "equal" means. Everything here is derived from values, not bit patterns:

* ``same_values``: floats agree when their values are equal (``+0 == -0``) or both are NaN;
  complex numbers per component; integers and bools exactly, in their own dtype (an int64
  above 2**53 is never squeezed through float64); narrow ml_dtypes floats (bfloat16, float8,
  float4) are converted to float64, which holds every one of their values exactly.
* ``ordinal``: the position of a float on its format's line of representable values, computed
  from ``frexp`` and ``finfo`` (the tool counts bit patterns instead), so a ULP distance is a
  difference of ordinals.
* ``round_to``: correct rounding (to nearest, ties to even) of a float64 value to a narrower
  format, by choosing among neighbouring candidates (``ml_dtypes`` rounds float64 to bfloat16
  through float32, twice).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

__all__ = ["count_differ", "from_ordinal", "is_complex", "is_float", "ordinal", "round_to", "same_values",
           "ulp_distance"]


def is_complex(dtype: np.dtype) -> bool:
    """Complex dtypes (complex64, complex128)."""
    return np.dtype(dtype).kind == "c"


def is_float(dtype: np.dtype) -> bool:
    """Real floating dtypes, numpy's (kind ``f``) and ml_dtypes' (kind ``V`` with a finfo)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return True
    if dtype.kind != "V":
        return False
    import ml_dtypes

    try:
        ml_dtypes.finfo(dtype)
    except (TypeError, ValueError):
        return False
    return True


def _real_f64(a: np.ndarray) -> np.ndarray:
    """A real float array as float64: exact for every float format up to 64 bits."""
    return np.asarray(a).astype(np.float64)


def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: do ``a`` and ``b`` (same dtype and shape) hold the same value?"""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        raise ValueError(f"same_values needs one dtype and shape, got {a.dtype}{a.shape} and {b.dtype}{b.shape}")
    if is_complex(a.dtype):
        return same_values(a.real, b.real) & same_values(a.imag, b.imag)
    if is_float(a.dtype):
        x, y = _real_f64(a), _real_f64(b)
        return (x == y) | (np.isnan(x) & np.isnan(y))
    if a.dtype.kind in "biu":
        return a == b  # exact in the arrays' own dtype
    raise TypeError(f"no equality rule for dtype {a.dtype}")


def count_differ(a: np.ndarray, b: np.ndarray) -> int:
    """How many elements of ``a`` and ``b`` hold different values."""
    return int(np.count_nonzero(~same_values(a, b)))


# ------------------------------------------------------------------------------ ULP
def _format(dtype: np.dtype) -> tuple[int, float, float, float]:
    """(significand bits p, smallest normal, smallest subnormal, largest finite) of a float dtype."""
    import ml_dtypes

    fi = ml_dtypes.finfo(np.dtype(dtype))
    return int(fi.nmant) + 1, float(fi.smallest_normal), float(fi.smallest_subnormal), float(fi.max)


def ordinal(a: np.ndarray) -> np.ndarray:
    """Signed position of each value on its float format's line (0 for ±0), as float64.

    Below the smallest normal the line is uniform in steps of the smallest subnormal; in each
    binade above it has 2**(p-1) values. Infinity sits one step past the largest finite value.
    Exact in float64 for formats up to float32 (ordinals below 2**31). NaN gives NaN.
    """
    a = np.asarray(a)
    p, tiny, sub, big = _format(a.dtype)
    x = np.abs(_real_f64(a))
    half = float(2 ** (p - 1))
    _, k_min = np.frexp(tiny)
    with np.errstate(invalid="ignore", over="ignore"):
        m, e = np.frexp(np.where(np.isfinite(x), x, big))
        normal = half * ((e - k_min) + 2.0 * m)
        pos = np.where(x < tiny, x / sub, normal)
        pos = np.where(np.isinf(x), _ordinal_scalar(big, p, tiny, sub) + 1, pos)
        pos = np.where(np.isnan(x), np.nan, pos)
    return np.where(np.signbit(_real_f64(a)), -pos, pos)


def _ordinal_scalar(v: float, p: int, tiny: float, sub: float) -> float:
    m, e = np.frexp(v)
    return float(2 ** (p - 1)) * ((e - np.frexp(tiny)[1]) + 2.0 * m)


def from_ordinal(o: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The value at signed ordinal ``o`` of ``dtype``'s line (inverse of ``ordinal``)."""
    p, tiny, sub, big = _format(dtype)
    o = np.asarray(o, dtype=np.float64)
    half = float(2 ** (p - 1))
    q = np.abs(o) / half
    k_min = np.frexp(tiny)[1] - 1
    whole = np.floor(q)
    with np.errstate(over="ignore", invalid="ignore"):  # NaN ordinals stay NaN
        normal = np.ldexp(q - whole + 1.0, np.nan_to_num(k_min + whole - 1).astype(np.int64))
    mag = np.where(np.abs(o) < half, np.abs(o) * sub, normal)
    mag = np.where(mag > big, np.inf, mag)
    return np.where(o < 0, -mag, mag).astype(dtype)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise number of representable steps between ``a`` and ``b`` (same float dtype), as
    float64: 0 for equal values and for two NaNs, ``inf`` where exactly one side is NaN.
    Complex arrays: the larger of the two components' distances. Integers: ``|a - b|`` (exact
    Python ints for 64-bit types, returned as float64)."""
    a, b = np.asarray(a), np.asarray(b)
    if is_complex(a.dtype):
        return np.maximum(ulp_distance(a.real, b.real), ulp_distance(a.imag, b.imag))
    if a.dtype.kind == "b":
        return (a != b).astype(np.float64)
    if a.dtype.kind in "iu":
        return np.array([float(abs(int(x) - int(y))) for x, y in zip(a.ravel(), b.ravel())]).reshape(a.shape)
    d = np.abs(ordinal(a) - ordinal(b))
    nan_a, nan_b = np.isnan(_real_f64(a)), np.isnan(_real_f64(b))
    return np.where(nan_a & nan_b, 0.0, np.where(nan_a ^ nan_b, np.inf, d))


# ------------------------------------------------------------------------- rounding
def round_to(x: np.ndarray, dtype: DTypeLike) -> np.ndarray:
    """Round float64 (or complex128) values to ``dtype`` once, to nearest, ties to even.

    The candidate from ``astype`` may be a double-rounding neighbour off; the nearest of it and
    its two neighbours is chosen, comparing exact float64 distances (the neighbours are within a
    factor of two of ``x``, so each subtraction is exact by Sterbenz' lemma).
    """
    dtype = np.dtype(dtype)
    x = np.asarray(x)
    if is_complex(dtype):
        part = np.float32 if dtype == np.complex64 else np.float64
        out = np.empty(x.shape, dtype)
        out.real, out.imag = round_to(np.real(x), part), round_to(np.imag(x), part)
        return out
    if dtype.kind in "biu" or dtype == np.float64:
        return x.astype(dtype)
    x = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        c = x.astype(dtype)
    o = ordinal(c)
    best = c.astype(np.float64)
    with np.errstate(invalid="ignore"):
        best_err = np.abs(best - x)
    best_o = o
    for step in (-1.0, 1.0):
        n_o = o + step
        n = from_ordinal(n_o, dtype).astype(np.float64)
        with np.errstate(invalid="ignore"):
            err = np.abs(n - x)
            better = (err < best_err) | ((err == best_err) & (np.mod(n_o, 2) == 0) & (np.mod(best_o, 2) != 0))
        better &= np.isfinite(x) & np.isfinite(n)
        best = np.where(better, n, best)
        best_err = np.where(better, err, best_err)
        best_o = np.where(better, n_o, best_o)
    big = _format(dtype)[3]
    below_big = float(from_ordinal(ordinal(np.array(big, dtype)) - 1, dtype))
    overflow = np.abs(x) >= big + (big - below_big) / 2  # IEEE: from here on, round to infinity
    best = np.where(overflow, np.copysign(np.inf, x), best)
    return np.where(np.isfinite(x), best, x).astype(dtype)
