"""The known variants of primitives (interpreter/variants.py): each computes what its family of
implementations computes, and each rewrite computes the op as JAX declares it, so a verified rewrite is
the same model, not another one."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from jaxparity.interpreter.variants import VARIANTS


def variant(primitive, name):
    return next(v for v in VARIANTS[primitive] if v.name == name)


def test_an_arithmetic_shift_sign_extends_and_a_logical_one_shifts_in_zeros():
    x = np.array([-1, -16, 255, -1, 7], np.int32)
    s = np.array([16, 2, 1, 31, 40], np.int32)
    arith = variant("shift_right_logical", "arithmetic shift").compute({}, [x, s], None)
    assert arith.tolist() == [-1, -4, 127, -1, 0]
    logical = variant("shift_right_arithmetic", "logical shift").compute({}, [x, s], None)
    assert logical.tolist() == [65535, 1073741820, 127, 1, 0]


def test_the_logical_shift_rewrite_is_shift_right_logical_for_every_int32_and_shift():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.integers(-2**31, 2**31, 200, dtype=np.int64), [-1, 0, 1, -2**31, 2**31 - 1]])
    x = x.astype(np.int32)
    for s in [0, 1, 2, 15, 16, 30, 31, 32, 40]:
        shift = np.full_like(x, s)
        got = np.asarray(variant("shift_right_logical", "arithmetic shift").rewrite(jnp.asarray(x), jnp.asarray(shift)))
        want = np.asarray(lax.shift_right_logical(jnp.asarray(x), jnp.asarray(shift)))
        assert got.tolist() == want.tolist(), s


def test_a_floored_remainder_takes_the_divisors_sign_and_the_rewrite_truncates_as_rem_does():
    x = np.array([-7, 7, -7, 5, 9, 0, -2**31 + 1], np.int32)
    y = np.array([2, -2, 3, 3, 4, 5, 7], np.int32)
    v = variant("rem", "floored remainder")
    assert v.compute({}, [x, y], np.asarray(lax.rem(x, y))).tolist() == np.mod(x, y).tolist()
    assert np.asarray(v.rewrite(jnp.asarray(x), jnp.asarray(y))).tolist() == np.asarray(lax.rem(x, y)).tolist()
    xf, yf = x.astype(np.float32) / 3, y.astype(np.float32)
    np.testing.assert_array_equal(np.asarray(v.rewrite(jnp.asarray(xf), jnp.asarray(yf))), np.asarray(lax.rem(xf, yf)))


def test_an_absolute_accuracy_sigmoid_flushes_what_is_below_the_unit_roundoff_and_the_rewrite_keeps_it():
    x = np.array([-20.0, -30.0, -1.0, 0.5, 30.0], np.float32)
    declared = np.asarray(jax.nn.sigmoid(x))
    v = variant("logistic", "absolute accuracy")
    assert v.compute({}, [x], declared).tolist() == [0.0, 0.0, *declared[2:].tolist()]
    got = np.asarray(v.rewrite(jnp.asarray(x)))
    np.testing.assert_allclose(got, declared, rtol=4e-7)
    assert got[0] > 0 and got[1] > 0


@pytest.mark.parametrize("dtype", [jnp.float8_e4m3fn, jnp.float8_e5m2])
def test_a_saturating_float8_cast_clips_at_the_largest_finite_value_and_the_rewrite_is_explicit(dtype):
    x = np.array([500.0, 1e6, -1e6, 3.3, np.nan], np.float32)
    v = variant("convert_element_type", "saturating cast")
    top = float(ml_dtypes.finfo(dtype).max)
    got = v.compute({"new_dtype": np.dtype(dtype)}, [x], None).astype(np.float32)
    assert got[1] == top and got[2] == -top and np.isnan(got[4])
    fixed = np.asarray(v.rewrite(jnp.asarray(x), new_dtype=dtype)).astype(np.float32)
    assert fixed[1] == top and fixed[2] == -top


def test_the_division_rewrite_divides_as_lax_div_and_keeps_xlas_values_where_it_is_undefined():
    x = np.array([7, -7, 5, 0, -2**31, -2**31, 9, 3], np.int32)
    y = np.array([2, 2, 0, 0, -1, 3, -2, 0], np.int32)
    for primitive, op in (("div", lax.div), ("rem", lax.rem)):
        v = next(v for v in VARIANTS[primitive] if v.name.startswith("zero"))
        declared = np.asarray(op(jnp.asarray(x), jnp.asarray(y)))
        assert v.compute({}, [x, y], declared).tolist() == np.where(y == 0, 0, declared).tolist()
        got = np.asarray(v.rewrite(jnp.asarray(x), jnp.asarray(y)))
        assert got.tolist() == declared.tolist(), primitive  # XLA's own values, with no division by zero left


def test_an_unclamped_gather_leaves_exactly_the_out_of_bounds_elements_to_memory_and_the_clamp_is_the_gather():
    x = jnp.arange(8, dtype=jnp.float32) * 1.5
    i = jnp.array([0, 7, 8, 11, 3, 30], jnp.int32)
    eqn = jax.make_jaxpr(lambda x, i: x[i])(x, i).jaxpr.eqns[-1]
    assert eqn.primitive.name == "gather"
    idx = np.asarray(i).reshape(-1, 1)
    declared = np.asarray(x[i])
    v = variant("gather", "unclamped indices")
    values = v.compute(dict(eqn.params), [np.asarray(x), idx], declared)
    unknown = v.undetermined(dict(eqn.params), [np.asarray(x), idx], declared)
    assert v.inputs_words(dict(eqn.params), [np.asarray(x), idx], (2,)) == "start index 8 (in bounds: 0 to 7)"
    assert unknown.tolist() == [False, False, True, True, False, True]
    assert values.tolist() == declared.tolist()
    got = np.asarray(v.rewrite(x, jnp.asarray(idx), eqn=eqn))
    assert got.tolist() == declared.tolist()


def test_a_half_away_from_zero_rounding_from_truncation_is_lax_round():
    rng = np.random.default_rng(1)
    halves = np.arange(-20, 21, dtype=np.float32) + 0.5
    x = np.concatenate([halves, rng.normal(scale=50, size=300).astype(np.float32), np.nextafter(halves, 0),
                        np.array([0.0, -0.0, 0.49999997, 2**23 + 1, -2**24, np.inf, -np.inf], np.float32)])
    want = np.asarray(lax.round(jnp.asarray(x)))
    got = np.asarray(variant("round", "ties to even").rewrite(jnp.asarray(x)))
    assert got.tobytes() == want.tobytes()
    assert variant("round", "ties to even").compute({}, [halves], want).tolist() == np.rint(halves).tolist()


def test_max_and_min_with_the_nan_made_explicit_are_jnp_maximum_and_minimum():
    x = np.array([1.0, np.nan, 3.0, np.nan, -0.5, np.inf], np.float32)
    y = np.array([np.nan, 2.0, 1.0, np.nan, 5.0, -np.inf], np.float32)
    for primitive, op in (("max", jnp.maximum), ("min", jnp.minimum)):
        for v in VARIANTS[primitive]:
            want = np.asarray(op(x, y))
            np.testing.assert_array_equal(np.asarray(v.rewrite(jnp.asarray(x), jnp.asarray(y))), want)
            got = v.compute({}, [x, y], want)
            assert np.isnan(got).sum() == 2  # a comparison and a select keep one of the three NaN pairs
    assert variant("max", "comparison select").compute({}, [x, y], None)[1] == 2.0


def test_the_scaled_complex_magnitude_is_finite_where_the_unscaled_one_overflows_or_underflows():
    z = np.array([3e30 + 4e30j, 1e-30 + 1e-30j, 3 + 4j, 0j, complex(np.inf, 1.0)], np.complex64)
    want = np.asarray(jnp.abs(jnp.asarray(z)))
    v = variant("abs", "unscaled complex magnitude")
    unscaled = v.compute({}, [z], want)
    assert unscaled[0] == np.inf and unscaled[1] == 0 and unscaled[2] == 5
    got = np.asarray(v.rewrite(jnp.asarray(z)))
    np.testing.assert_allclose(got[:4], want[:4], rtol=3e-7)
    assert got[4] == np.inf


def test_a_bf16_nan_is_a_nan_whatever_its_payload():
    """bfloat16 (ml_dtypes: numpy kind 'V') NaNs of other payloads are the same value, as float32's are."""
    from jaxparity.explain.measure import unchanged as _unchanged
    from jaxparity.explain.mechanism.variants import _same_bits

    a = np.array([np.nan, 1.0, np.nan], ml_dtypes.bfloat16)
    b = a.copy()
    b.view(np.uint16)[0] ^= 0x8001  # another sign and payload, still NaN
    assert np.isnan(b[0]) and a.tobytes() != b.tobytes()
    assert _same_bits(a, b) and _unchanged(a, b).all()
    c = b.copy()
    c[1] = 2.0
    assert not _same_bits(a, c) and _unchanged(a, c).tolist() == [True, False, True]
