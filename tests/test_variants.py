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
