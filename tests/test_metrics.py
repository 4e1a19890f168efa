import ml_dtypes
import numpy as np
import pytest

from jaxparity.metrics import Tolerance, diff_leaf, reference_error, ulp_distance

FLOATS = [ml_dtypes.bfloat16, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_ulp_distance_special_values(dtype):
    fi = ml_dtypes.finfo(dtype)
    one = np.array(1, dtype)
    up = np.nextafter(one, np.array(2, dtype))
    tiny_sub = np.array(fi.smallest_subnormal, dtype)
    a = np.array([1, 0.0, -0.0, np.nan, np.nan, np.inf, fi.max, fi.smallest_subnormal, 0.0], dtype)
    b = np.array([up, -0.0, 0.0, np.nan, 1.0, fi.max, np.inf, -fi.smallest_subnormal, tiny_sub], dtype)
    d = ulp_distance(a, b)
    # neighbours, ±0 equal, NaN==NaN, NaN vs number flagged, max..inf adjacent,
    # ±smallest subnormal are two steps apart (through zero), zero to the first subnormal is one.
    assert d.tolist() == [1, 0, 0, 0, -1, 1, 1, 2, 1]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_ulp_distance_counts_representable_values(dtype):
    x = np.array([0.75], dtype)
    y = x
    for _ in range(5):
        y = np.nextafter(y, np.array([-1.0], dtype))
    assert ulp_distance(x, y).tolist() == [5]
    assert ulp_distance(-x, -y).tolist() == [5]
    # across zero: distance is the sum of both sides' counts
    s = np.array([ml_dtypes.finfo(dtype).smallest_subnormal * 3], dtype)
    assert ulp_distance(s, -s).tolist() == [6]


def test_ulp_distance_integers_and_bools():
    assert ulp_distance(np.array([3, -5], np.int32), np.array([1, 5], np.int32)).tolist() == [2, 10]
    big = np.array([np.iinfo(np.int64).max], np.int64)
    assert ulp_distance(big, -big)[0] > 0  # no overflow to a negative count
    assert ulp_distance(np.array([True, False]), np.array([True, True])).tolist() == [0, 1]
    with pytest.raises(TypeError):
        ulp_distance(np.zeros(2, np.float32), np.zeros(2, np.float16))


def test_diff_leaf_identical_equal_and_differs():
    x = np.array([1.0, 2.0, -0.0], np.float32)
    d = diff_leaf(x, x.copy())
    assert d.bitwise_equal and d.n_differ == 0 and d.within_tolerance and d.max_ulp == 0
    d = diff_leaf(np.array([0.0], np.float32), np.array([-0.0], np.float32))
    assert not d.bitwise_equal and d.n_differ == 0 and d.within_tolerance  # equal values, other bits
    y = np.array([1.0, 2.0, 3.0], np.float32)
    z = y.copy()
    z[1] = np.nextafter(np.nextafter(z[1], np.float32(9)), np.float32(9))
    d = diff_leaf(z, y)
    assert (d.n_differ, d.max_ulp, d.worst_index) == (1, 2, (1,))
    assert not d.within_tolerance
    assert d.required_ulp == 2 and d.required_atol == pytest.approx(float(z[1]) - 2.0)
    assert d.ulp_histogram == [("0", 2), ("2", 1)]


def test_tolerances_and_smallest_passing_tolerance():
    y = np.array([1.0, 100.0], np.float32)
    z = np.array([1.0 + 1e-3, 100.0], np.float32)
    d = diff_leaf(z, y)
    assert diff_leaf(z, y, Tolerance(ulp=d.required_ulp)).within_tolerance
    assert not diff_leaf(z, y, Tolerance(ulp=d.required_ulp - 1)).within_tolerance
    assert diff_leaf(z, y, Tolerance(atol=d.required_atol)).within_tolerance
    assert not diff_leaf(z, y, Tolerance(atol=d.required_atol / 2)).within_tolerance
    assert diff_leaf(z, y, Tolerance(rtol=d.required_rtol)).within_tolerance
    assert not diff_leaf(z, y, Tolerance(rtol=d.required_rtol / 2)).within_tolerance
    assert Tolerance().describe() == "exact"
    assert Tolerance(ulp=2, atol=1e-3).describe() == "ulp<=2 or atol=0.001, rtol=0"


def test_nan_against_number_never_passes():
    y = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    z = np.array([np.nan, 2.0], ml_dtypes.bfloat16)
    d = diff_leaf(z, y, Tolerance(ulp=10**6, atol=1e9))
    assert d.nan_mismatch == 1 and not d.within_tolerance and d.required_ulp is None
    assert d.ulp_histogram == [("0", 1), ("NaN vs number", 1)]
    both = diff_leaf(np.array([np.nan], np.float32), np.array([np.nan], np.float32))
    assert both.within_tolerance and both.n_differ == 0


def test_inf_mismatch_and_relative_error_near_zero():
    d = diff_leaf(np.array([np.inf, 1e-30], np.float32), np.array([3e38, 0.0], np.float32))
    assert d.inf_mismatch == 1 and d.max_abs == float("inf")
    assert d.required_rtol == float("inf")  # no relative tolerance passes a value against an exact zero
    assert np.isfinite(d.max_rel) or d.max_rel == float("inf")


def test_reference_error_in_the_arrays_own_dtype():
    ideal = np.array([1.0 + 2.0**-9, 3.0])  # nearer 1.0 than the next bf16 value
    e = reference_error(np.array([1.0, 3.0], ml_dtypes.bfloat16), ideal)
    assert e.max_ulp == 0 and e.max_abs == pytest.approx(2.0**-9)
    e = reference_error(np.array([1.0078125, 3.0], ml_dtypes.bfloat16), ideal)
    assert e.max_ulp == 1
