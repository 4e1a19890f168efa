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


# ----------------------------------------------------------------------- every dtype JAX has
from jaxparity.metrics import UnsupportedDtype, dtype_class  # noqa: E402

ONE_BYTE_FLOATS = [ml_dtypes.float8_e3m4, ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3b11fnuz,
                   ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
                   ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn,
                   ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
        ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2]


def test_every_jax_dtype_has_a_class_and_nothing_else_is_equal():
    import jax.numpy as jnp

    names = ["bool_", "int4", "int8", "int16", "int32", "int64", "uint4", "uint8", "uint16", "uint32", "uint64",
             "float8_e4m3fn", "float8_e5m2", "bfloat16", "float16", "float32", "float64", "complex64",
             "complex128"]
    for name in names:
        assert dtype_class(np.dtype(getattr(jnp, name))) in ("bool", "int", "uint", "float", "complex")
    import jax

    assert dtype_class(jax.dtypes.float0) == "empty"
    for bad in (np.array(["a"]), np.array([b"a"]), np.array([object()]), np.array([np.datetime64(1, "s")])):
        with pytest.raises(UnsupportedDtype):
            diff_leaf(bad, bad.copy())


@pytest.mark.parametrize("dtype", ONE_BYTE_FLOATS, ids=lambda d: np.dtype(d).name)
def test_one_byte_floats_neighbours_are_one_ulp_apart(dtype):
    # Every representable value, in order, as ml_dtypes itself orders them (through float64).
    values = np.arange(256, dtype=np.uint8).view(dtype)
    wide = values.astype(np.float64)
    ordered = values[~np.isnan(wide)][np.argsort(wide[~np.isnan(wide)], kind="stable")]
    dist = ulp_distance(ordered[1:], ordered[:-1])
    same = ordered[1:].astype(np.float64) == ordered[:-1].astype(np.float64)  # +0 and -0
    assert (dist[same] == 0).all() and (dist[~same] == 1).all()
    lo, hi = ordered[0:1], ordered[-1:]
    assert ulp_distance(lo, hi)[0] == len(np.unique(wide[~np.isnan(wide)])) - 1
    if np.isnan(wide).any():  # formats with a NaN: NaN/NaN agree, NaN against a number is flagged
        nan = values[np.isnan(wide)][:1]
        assert ulp_distance(nan, nan).tolist() == [0] and ulp_distance(nan, hi).tolist() == [-1]
    d = diff_leaf(ordered[1:], ordered[:-1])
    assert d.n_differ == int((~same).sum()) and d.max_ulp == 1


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_integers_exact_at_every_width(dtype):
    info = ml_dtypes.iinfo(dtype)
    a = np.array([info.min, info.max, info.max, 0], dtype)
    b = np.array([info.max, info.max, info.max - 1, 1], dtype)
    span = int(info.max) - int(info.min)
    assert ulp_distance(a, b).tolist() == [min(span, 2**63 - 1), 0, 1, 1]
    d = diff_leaf(a, b)
    assert d.n_differ == 3 and d.worst_index == (0,) and d.worst_got == int(info.min)


def test_int64_beyond_2_53_is_not_rounded_into_equality():
    a, b = np.array([2**62, -(2**62)], np.int64), np.array([2**62 + 1, -(2**62) - 1], np.int64)
    d = diff_leaf(a, b)
    assert (d.n_differ, d.max_ulp) == (2, 1) and not d.within_tolerance
    assert d.worst_got == 2**62 and d.worst_expected == 2**62 + 1  # exact, not via float64
    u = np.array([2**64 - 1], np.uint64)
    assert diff_leaf(u, u - np.uint64(1)).n_differ == 1


def test_bools():
    d = diff_leaf(np.array([True, False, True]), np.array([True, True, False]))
    assert (d.n_differ, d.max_ulp, d.worst_index, d.worst_got, d.worst_expected) == (2, 1, (1,), 0, 1)


def test_complex_each_component_in_its_own_ulp():
    # From the issue: a difference in the imaginary part or below 1.0 used to be invisible.
    d = diff_leaf(np.array([1.5 + 2j], np.complex64), np.array([1.25 + 7j], np.complex64))
    assert d.n_differ == 1 and not d.within_tolerance
    c = d.complex_parts
    real = ulp_distance(np.array([1.5], np.float32), np.array([1.25], np.float32))[0]
    imag = ulp_distance(np.array([2.0], np.float32), np.array([7.0], np.float32))[0]
    assert (c.max_ulp_real, c.max_ulp_imag, d.max_ulp) == (real, imag, max(real, imag))
    assert d.max_abs == pytest.approx(abs((1.5 + 2j) - (1.25 + 7j)))
    assert c.max_rel_modulus == pytest.approx(abs(abs(1.5 + 2j) - abs(1.25 + 7j)) / abs(1.25 + 7j))
    assert (d.worst_got, c.worst_got_imag, d.worst_expected, c.worst_expected_imag) == (1.5, 2.0, 1.25, 7.0)
    # one ULP in the imaginary part only
    x = np.array([3 + 1j], np.complex128)
    y = x.copy()
    y.imag = np.nextafter(1.0, 2.0)
    d = diff_leaf(x, y)
    assert (d.n_differ, d.max_ulp, d.complex_parts.max_ulp_real, d.complex_parts.max_ulp_imag) == (1, 1, 0, 1)


def test_complex_nan_and_inf_per_component():
    nan = np.nan
    a = np.array([complex(nan, 1), complex(1, nan), complex(np.inf, 0), complex(0.0, -0.0)], np.complex64)
    b = np.array([complex(nan, 1), complex(1, 2), complex(np.inf, 1), complex(-0.0, 0.0)], np.complex64)
    assert ulp_distance(a, b).tolist()[:2] == [0, -1]  # NaN/NaN agree per component; NaN vs 2 flagged
    d = diff_leaf(a, b)
    assert (d.n_differ, d.nan_mismatch, d.inf_mismatch) == (2, 1, 0)
    assert d.required_ulp is None  # no tolerance passes a NaN against a number
    d = diff_leaf(np.array([complex(1, np.inf)], np.complex64), np.array([complex(1, 3e38)], np.complex64))
    assert d.inf_mismatch == 1 and d.n_differ == 1


def test_complex_from_the_issue_is_not_passed_by_compare():
    import jax

    import jaxparity

    a = np.array([-2.158813238143921 - 1.1606125831604004j], np.complex64)
    b = np.array([2.1910552978515625 + 4.066328048706055j], np.complex64)
    expected = (a.astype(np.complex128) * b.astype(np.complex128)).astype(np.complex64)  # correctly rounded
    r = jaxparity.compare(jax.lax.mul, a, b, paths=["eager"], baseline="declared")
    eager = r._source["runs"]["eager"].outputs[0][1]
    differs = (eager != expected).any()
    assert r.path("eager").passed is not differs  # passes exactly when eager's product is correctly rounded
    assert r.path("declared").leaves[0].values == ((float(expected[0].real), float(expected[0].imag)),)


def test_reference_error_complex_in_component_ulp():
    ideal = np.array([1 / 3 + 2j / 3])
    best = ideal.astype(np.complex64)
    assert reference_error(best, ideal).max_ulp == 0
    off = best.copy()
    off.imag = np.nextafter(off.imag, np.float32(1))
    assert reference_error(off, ideal).max_ulp == 1
    inf = np.array([complex(np.inf, 1)])
    assert reference_error(inf.astype(np.complex64), inf).max_ulp == 0  # inf stays inf, no NaN mixed in


def test_float0_carries_no_values():
    import jax

    z = np.zeros((3,), jax.dtypes.float0)
    d = diff_leaf(z, z.copy())
    assert d.n_differ == 0 and d.bitwise_equal


def test_reference_error_never_calls_a_nan_against_a_number_equal():
    """A NaN output where the f64 ideal is a number (or the reverse) is as far as it gets: never 0."""
    from jaxparity.metrics import reference_error

    e = reference_error(np.array([np.nan, 1.0], np.float32), np.array([1.0, 1.0]))
    assert e.max_abs == np.inf and e.max_ulp == np.iinfo(np.int64).max
    e = reference_error(np.array([1.0, 1.0], np.float32), np.array([np.nan, 1.0]))
    assert e.max_abs == np.inf
    same = reference_error(np.array([np.nan, np.inf], np.float32), np.array([np.nan, np.inf]))
    assert same.max_abs == 0 and same.max_ulp == 0


def test_signed_zero_flips_are_zeros_of_opposite_signs_only():
    import ml_dtypes

    from jaxparity.metrics import signed_zero_flips

    a = np.array([0.0, -0.0, 0.0, 1.0, np.nan, -0.0], np.float32)
    b = np.array([-0.0, 0.0, 0.0, 1.0, np.nan, 1e-45], np.float32)
    assert signed_zero_flips(a, b).tolist() == [True, True, False, False, False, False]
    assert (ulp_distance(a, b)[:2] == 0).all()  # 0 ULP apart: the distance alone does not see them
    h = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    assert signed_zero_flips(*h)[:3].tolist() == [True, True, False]
    assert not signed_zero_flips(np.array([0, 1]), np.array([0, 1])).any()  # integers have one zero
    z = np.array([complex(0.0, -0.0)], np.complex64), np.array([complex(0.0, 0.0)], np.complex64)
    assert signed_zero_flips(*z).tolist() == [True]
