"""Correct rounding of float64 values to narrow float dtypes.

``ml_dtypes`` converts float64 to bfloat16 through float32, which rounds twice and can
land on the wrong neighbour (1 + 2**-8 + 2**-30 becomes 1.0 instead of 1.0078125). The
declared-semantics reference must round exactly once, so float64 is first rounded to
float32 *to odd*, which keeps the information a second round-to-nearest-even needs as
long as float32 has two more significand bits than the target (true for every float
narrower than float32: bfloat16, float16 and the float8 formats).
"""

from __future__ import annotations

import numpy as np

__all__ = ["is_float_dtype", "round_to_dtype"]


def is_float_dtype(dtype: np.dtype) -> bool:
    """True for real floating dtypes, including the ml_dtypes ones (bfloat16, float8...)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return True
    # ml_dtypes registers its floats with kind 'V'; finfo works for them.
    if dtype.kind == "V":
        try:
            import ml_dtypes

            ml_dtypes.finfo(dtype)
            return True
        except (TypeError, ValueError):
            return False
    return False


def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """Round float64 to float32 with round-to-odd (truncate, then set the last bit if inexact)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = x.astype(np.float32)
    inexact = np.isfinite(x) & (nearest.astype(np.float64) != x)
    if not inexact.any():
        return nearest
    bits = nearest.view(np.uint32).copy()
    # Where rounding went away from zero, step one ulp back towards zero (truncation).
    # Overflow to inf is also "away from zero": stepping back from inf gives float32 max.
    away = inexact & (np.abs(nearest.astype(np.float64)) > np.abs(x))
    bits[away] -= np.uint32(1)
    bits[inexact] |= np.uint32(1)
    return bits.view(np.float32)


def round_to_dtype(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round ``x`` (any float array) once, to nearest-even, into ``dtype``.

    Non-float target dtypes fall back to numpy's own conversion.
    """
    dtype = np.dtype(dtype)
    x = np.asarray(x)
    if not is_float_dtype(dtype) or dtype.itemsize >= x.dtype.itemsize or dtype == np.float32:
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(dtype)
    if x.dtype != np.float64:
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return _round_to_odd_f32(x).astype(dtype)
