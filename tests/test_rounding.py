from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from jaxparity.rounding import is_float_dtype, round_to_dtype

NARROW = [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


def test_single_rounding_where_ml_dtypes_rounds_twice():
    x = np.array([1 + 2.0**-8 + 2.0**-30])  # just above a bf16 tie; float32 rounds it onto the tie
    assert float(np.asarray(x, np.float32).astype(ml_dtypes.bfloat16)[0]) == 1.0  # the double rounding
    assert float(round_to_dtype(x, ml_dtypes.bfloat16)[0]) == 1.0078125


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: np.dtype(d).name)
def test_round_to_nearest_even_against_exact_arithmetic(dtype):
    rng = np.random.default_rng(0)
    fi = ml_dtypes.finfo(dtype)
    x = rng.standard_normal(3000) * float(fi.max) / 8
    x = np.concatenate([x, rng.standard_normal(1000) * float(fi.smallest_normal) * 4])
    r = round_to_dtype(x, dtype)
    values = np.unique(r.astype(np.float64))
    for xi, ri in zip(x, r.astype(np.float64)):
        lo = np.nextafter(np.array(ri, dtype), np.array(-np.inf, dtype)).astype(np.float64)
        hi = np.nextafter(np.array(ri, dtype), np.array(np.inf, dtype)).astype(np.float64)
        err = abs(Fraction(float(xi)) - Fraction(float(ri)))
        for neighbour in (lo, hi):  # no neighbour is nearer than the rounded value
            if np.isfinite(neighbour):
                assert err <= abs(Fraction(float(xi)) - Fraction(float(neighbour)))
    assert values.size > 10


def test_special_values_pass_through():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300])
    r = round_to_dtype(x, ml_dtypes.bfloat16).astype(np.float64)
    assert np.isnan(r[0]) and r[1] == np.inf and r[2] == -np.inf and r[5] == np.inf
    assert np.signbit(r[4]) and not np.signbit(r[3])


def test_is_float_dtype():
    assert is_float_dtype(ml_dtypes.bfloat16) and is_float_dtype(np.float32)
    assert not is_float_dtype(np.int32) and not is_float_dtype(np.bool_)
