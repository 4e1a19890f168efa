"""Tests for jaxparity.interpreter (reference evaluation of jaxprs in float64)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import linen as nn
from jax import lax

from jaxparity.interpreter import EqnEvent, InterpretError, evaluate_jaxpr, interpret, primitives

BF16 = ml_dtypes.bfloat16


def eager(fn, *args):
    """The program run op by op by JAX itself, as numpy leaves."""
    args = jax.tree_util.tree_map(lambda a: jnp.asarray(a) if isinstance(a, np.ndarray) else a, args)
    with jax.disable_jit():
        out = fn(*args)
    is_key = lambda x: jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)  # noqa: E731
    return jax.tree_util.tree_map(lambda x: x if is_key(x) else np.asarray(x), out)


def assert_bits_equal(actual, expected):
    """Bit-for-bit equality (including the sign of zero); any NaN matches any NaN."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape
    if actual.dtype.kind in "fcV":
        nan = np.isnan(expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64))
        np.testing.assert_array_equal(np.isnan(actual.astype(np.float64 if actual.dtype.kind != "c"
                                                             else np.complex128)), nan)
        actual, expected = actual[~nan], expected[~nan]
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}[actual.dtype.itemsize]
    np.testing.assert_array_equal(actual.view(view), expected.view(view))


def ulp_distance(a, b, scale=False):
    """|a - b| in ulps of b, or (scale=True) in ulps of b's largest magnitude."""
    a, b = np.asarray(a, np.float64), np.asarray(b)
    ref = np.max(np.abs(b)) if scale else np.abs(b)
    return np.abs(a - b.astype(np.float64)) / np.spacing(ref.astype(b.dtype))


# ------------------------------------------------------------------------ seed case
from cases.seed_layer import LAYER, VARS  # noqa: E402


def test_seed_conv_declared_matches_eager_bit_for_bit():
    x = jax.random.normal(jax.random.key(1729), (2,)).reshape(1, 1, -1)
    np.testing.assert_allclose(np.asarray(x).ravel(), [0.18347433, -0.76943487], rtol=1e-7)
    got = interpret(LAYER.apply, VARS, x, mode="declared")
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    assert_bits_equal(got, eager(LAYER.apply, VARS, x))
    np.testing.assert_allclose(got.ravel(), [0.23010519, -1.4178724], rtol=1e-7)


def test_seed_conv_second_input_declared_vs_f64():
    x = jnp.asarray([-1.0932410, -1.2380177], jnp.float32).reshape(1, 1, -1)
    declared = interpret(LAYER.apply, VARS, x, mode="declared")
    ideal = interpret(LAYER.apply, VARS, x, mode="f64")
    assert declared.dtype == np.float32 and ideal.dtype == np.float64
    np.testing.assert_allclose(declared.ravel(), [-1.3705847, -2.27708], rtol=1e-7)
    np.testing.assert_allclose(ideal.ravel(), [-1.3713225, -2.2845213], rtol=1e-6)
    assert_bits_equal(declared, eager(LAYER.apply, VARS, x))


# ----------------------------------------------------------------- correct rounding
TIE_INPUT = np.array([1.0, 2.0**-8, 2.0**-30], dtype=BF16)  # exact sum: just above a bf16 tie


def test_rounding_through_float32_would_be_wrong():
    exact = np.sum(TIE_INPUT.astype(np.float64))
    assert exact == 1.0 + 2.0**-8 + 2.0**-30
    assert np.float32(exact).astype(BF16) == 1.0  # double rounding lands on the even side


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("op", ["reduce_sum", "dot"])
def test_declared_rounds_once(monkeypatch, fast, op):
    monkeypatch.setattr(primitives, "USE_NUMPY_FAST_PATH", fast)
    if op == "reduce_sum":
        fn = lambda x: lax.reduce(x, np.array(0, BF16), lax.add, (0,))  # noqa: E731
    else:
        fn = lambda x: jnp.dot(x, jnp.ones(3, jnp.bfloat16))  # noqa: E731
    assert op in str(jax.make_jaxpr(fn)(TIE_INPUT))
    got = interpret(fn, TIE_INPUT)
    assert got.dtype == BF16
    assert float(got) == 1.0 + 2.0**-7
    assert float(interpret(fn, TIE_INPUT, mode="f64")) == 1.0 + 2.0**-8 + 2.0**-30


# -------------------------------------------------------------------- nested jaxprs
C = np.array(2.0**-9, BF16)  # below half a bf16 ulp of 1 and 2: x + C rounds back to x
XB = np.array([1.0, 2.0, -1.5], BF16)


def absorb(x):
    return (x + C) - x  # 0 in bf16, 2**-9 in ideal math


def check_rounding_sensitive(fn, *args, primitive):
    assert primitive in str(jax.make_jaxpr(fn)(*args))
    declared = interpret(fn, *args)
    ideal = interpret(fn, *args, mode="f64")
    jax.tree_util.tree_map(assert_bits_equal, declared, eager(fn, *args))
    leaves_d, leaves_i = jax.tree_util.tree_leaves(declared), jax.tree_util.tree_leaves(ideal)
    assert any(not np.array_equal(d.astype(np.float64), i) for d, i in zip(leaves_d, leaves_i)
               if i.dtype == np.float64)
    return declared, ideal


def test_jit_inside():
    d, i = check_rounding_sensitive(lambda x: jax.jit(absorb)(x) * 2, XB, primitive="jit")
    np.testing.assert_array_equal(d.astype(np.float64), 0.0)
    np.testing.assert_array_equal(i, 2.0**-8)


def test_remat_rounds_inside_the_body():
    fn = jax.checkpoint(absorb)
    d, i = check_rounding_sensitive(fn, XB, primitive="remat2")
    np.testing.assert_array_equal(d.astype(np.float64), 0.0)
    np.testing.assert_array_equal(i, 2.0**-9)
    # also under the old name, with a policy
    fn2 = jax.remat(absorb, policy=jax.checkpoint_policies.nothing_saveable)
    check_rounding_sensitive(fn2, XB, primitive="remat2")


@jax.custom_jvp
def my_absorb(x):
    return absorb(x)


my_absorb.defjvp(lambda primals, tangents: (my_absorb(primals[0]), tangents[0]))


def test_custom_jvp():
    check_rounding_sensitive(my_absorb, XB, primitive="custom_jvp_call")
    x = np.linspace(-3, 3, 13).astype(np.float32)
    for fn in (jax.nn.relu, jax.nn.gelu, functools.partial(jax.nn.gelu, approximate=False)):
        got = interpret(fn, x)
        assert got.dtype == np.float32
        # XLA's f32 tanh/exp are within a few ulp; gelu cancels near -3, so measure at scale
        assert ulp_distance(got, eager(fn, x), scale=True).max() <= 2


def test_custom_vjp_closing_over_traced_value():
    def outer(x, y):
        @jax.custom_vjp
        def f(x):
            return absorb(x) + y

        f.defvjp(lambda x: (f(x), None), lambda r, g: (g,))
        return f(x)

    y = np.array([0.5, 0.25, 3.0], BF16)
    check_rounding_sensitive(outer, XB, y, primitive="custom_vjp_call")


def test_cond():
    fn = lambda p, x: lax.cond(p, absorb, lambda x: x * 3, x)  # noqa: E731
    check_rounding_sensitive(fn, True, XB, primitive="cond")
    assert_bits_equal(interpret(fn, False, XB), eager(fn, False, XB))
    switch = lambda i, x: lax.switch(i, [absorb, lambda x: x + 1, lambda x: x * x], x)  # noqa: E731
    for i in (-5, 0, 1, 2, 7):  # out-of-range indices are clamped
        assert_bits_equal(interpret(switch, i, XB), eager(switch, i, XB))


def test_while_loop_bf16():
    fn = lambda x: lax.while_loop(lambda c: c[1] < 20, lambda c: (c[0] * 1.1 + C, c[1] + 1), (x, 0))  # noqa: E731
    d, _ = check_rounding_sensitive(fn, XB, primitive="while")
    assert d[1] == 20 and d[1].dtype == np.int32


def test_scan_bf16_carry():
    xs = (np.arange(24, dtype=np.float32) * 0.37).astype(BF16)

    def fn(xs):
        def step(c, x):
            c = c + x * 0.1
            return c, (c * 2, c.astype(jnp.float32))
        return lax.scan(step, jnp.bfloat16(0.0), xs)

    (c, (ys, ys32)), _ = check_rounding_sensitive(fn, xs, primitive="scan")
    assert ys.shape == (24,) and ys.dtype == BF16 and ys32.dtype == np.float32
    rev = lambda xs: lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.bfloat16(1), xs, reverse=True)  # noqa: E731
    jax.tree_util.tree_map(assert_bits_equal, interpret(rev, xs), eager(rev, xs))


def test_fori_loop_and_map():
    fn = lambda x: lax.fori_loop(0, 7, lambda i, c: c * 1.01 + i * jnp.asarray(C), x)  # noqa: E731
    check_rounding_sensitive(fn, XB, primitive="scan")
    n = jnp.int32(5)
    fn2 = lambda x, n: lax.fori_loop(0, n, lambda i, c: c * 1.01 + C, x)  # noqa: E731
    check_rounding_sensitive(fn2, XB, n, primitive="while")
    fn3 = lambda x: lax.map(absorb, x.reshape(3, 1))  # noqa: E731
    check_rounding_sensitive(fn3, XB, primitive="scan")


# --------------------------------------------------------------- integers, bools, keys
def test_integer_and_bool_ops_exact(monkeypatch):
    a = np.array([2**30 + 3, -(2**31) + 5, 123456789, -7], np.int32)
    b = np.array([3, 7, -2, 2], np.int32)

    def fn(a, b):
        return (a * b + 11, a // b, a % b, jnp.argmax(a.astype(jnp.float32)), a > b,
                (a & b) ^ (a | 5), a.astype(jnp.uint8), jnp.cumsum(b), a.astype(jnp.bfloat16))

    for fast in (True, False):
        monkeypatch.setattr(primitives, "USE_NUMPY_FAST_PATH", fast)
        for mode in ("declared", "f64"):
            got, want = interpret(fn, a, b, mode=mode), eager(fn, a, b)
            for g, w in zip(got[:-1], want[:-1]):
                assert g.dtype == w.dtype
                np.testing.assert_array_equal(g, w)
            assert got[-1].dtype == (BF16 if mode == "declared" else np.float64)


def test_float_to_int_conversion_edge_cases():
    x = np.array([1.7, -1.7, np.nan, 3e9, -3e9, np.inf, 0.5], np.float32)
    fn = lambda x: (x.astype(jnp.int32), x.astype(jnp.uint8), x.astype(bool))  # noqa: E731
    for g, w in zip(interpret(fn, x), eager(fn, x)):
        assert_bits_equal(g, w)


@pytest.mark.parametrize("make_key", [jax.random.key, jax.random.PRNGKey])
def test_random_inside_function(make_key):
    def fn(x, key):
        k1, k2 = jax.random.split(key)
        k3 = jax.random.fold_in(k2, 7)
        return (x + jax.random.uniform(k1, (5,)), jax.random.randint(k3, (4,), 0, 1000),
                jax.random.bits(k2, (3,)), jax.random.normal(k3, (5,)), k1)

    x = np.linspace(0, 1, 5).astype(np.float32)
    key = make_key(42)
    got, want = interpret(fn, x, key), eager(fn, x, key)
    for g, w in zip(got[:3], want[:3]):
        assert_bits_equal(g, w)
    assert ulp_distance(got[3], want[3]).max() <= 4
    if make_key is jax.random.key:
        assert jax.dtypes.issubdtype(got[4].dtype, jax.dtypes.prng_key)
        np.testing.assert_array_equal(jax.random.key_data(got[4]), jax.random.key_data(want[4]))
    else:
        assert_bits_equal(got[4], want[4])
    got64 = interpret(fn, x, key, mode="f64")
    assert got64[0].dtype == np.float64 and got64[1].dtype == np.int32
    assert_bits_equal(got64[1], want[1])


def test_bit_level_primitives_run_natively():
    x = np.array([1.0, -2.5, 3.1415927, 1e-30, 65504.0], np.float32)  # (XLA CPU flushes subnormals)

    def fn(x):
        y = x * 3
        bits = lax.bitcast_convert_type(y, jnp.int32) + 1
        return (lax.reduce_precision(y, exponent_bits=8, mantissa_bits=7), bits,
                lax.bitcast_convert_type(bits, jnp.float32), jnp.nextafter(y, jnp.inf))

    got, want = interpret(fn, x), eager(fn, x)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)
    got64 = interpret(fn, x, mode="f64")
    np.testing.assert_array_equal(got64[0], x.astype(np.float64) * 3)  # identity in f64 mode
    assert_bits_equal(got64[1], want[1])  # f64 values rounded to f32 before the bitcast
    assert got64[2].dtype == got64[3].dtype == np.float64
    np.testing.assert_array_equal(got64[2], want[2].astype(np.float64))


def test_complex_values():
    x = np.linspace(-1, 2, 8).astype(np.float32)
    fn = lambda x: jnp.abs(jnp.fft.fft(x.astype(jnp.complex64)) * (1 + 2j)) + jnp.angle(x * 1j)  # noqa: E731
    got, want = interpret(fn, x), eager(fn, x)
    assert got.dtype == np.float32
    assert ulp_distance(got, want, scale=True).max() <= 4
    inner = interpret(lambda x: jnp.fft.fft(x.astype(jnp.complex64)) * (1 + 2j), x, mode="f64")
    assert inner.dtype == np.complex128
    np.testing.assert_allclose(inner, np.fft.fft(x.astype(np.float64)) * (1 + 2j), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------- numpy fast path vs bind
X = np.array([-2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.5, 2.5, 7.25, np.nan, np.inf], np.float32)
Y = np.array([1.5, -3.0, 2.0, 0.25, -0.0, np.nan, 4.0, 0.5, -7.0, 3.0, 1.0, 2.0], np.float32)
M = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
N = np.arange(40, dtype=np.float32).reshape(2, 4, 5) / 3 - 2
FAST_CASES = {
    "add": (lax.add, X, Y), "div": (lax.div, X, Y), "max": (lax.max, X, Y),
    "min": (lax.min, X, Y), "sign": (lax.sign, X), "integer_pow3": (lambda x: lax.integer_pow(x, 3), X),
    "integer_pow-2": (lambda x: lax.integer_pow(x, -2), X), "pow": (lax.pow, X, Y),
    "exp": (lax.exp, X), "log1p": (lax.log1p, X), "tanh": (lax.tanh, X),
    "logistic": (lax.logistic, X), "erf": (lax.erf, X), "rsqrt": (lax.rsqrt, X),
    "round_even": (lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), X),
    "round_away": (lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
                   np.array([0.49999997, -0.49999997, 0.5, -0.5, 2.5, -2.5, -0.2, 1e8], np.float32)),
    "rem": (lax.rem, X, Y), "clamp": (lambda x: lax.clamp(-1.0, x, 2.0), X),
    "dot_batch": (lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), M, N),
    "dot_plain": (lambda a, b: jnp.tensordot(a, b, axes=([0, 2], [0, 1])), M, N[:, :4, :]),
    "bf16_matmul": (lambda a, b: (a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)), M, N),
    "reduce_max": (lambda m: jnp.max(m, axis=(0, 2)), M), "reduce_sum": (lambda m: m.sum(1), M),
    "select_n": (lambda x, y: jnp.where(x > y, x, y), X, Y),
    "structure": (lambda m: jnp.concatenate([m.T.reshape(-1, 2)[1:7:2], jnp.ones((3, 2))])[None], M),
    "dynamic_slice": (lambda m, i: lax.dynamic_slice(m, (0, i, 1), (2, 2, 2)), M, np.int32(5)),
    "dynamic_update_slice": (lambda m, i: lax.dynamic_update_slice(m, m[:1, :2] * 2, (1, i, 0)),
                             M, np.int32(-3)),
    "iota_broadcast": (lambda x: jnp.arange(12.0).reshape(3, 4) + x[:4], X),
    "square_sqrt": (lambda x: jnp.sqrt(lax.square(x)) + lax.abs(x) * lax.exp2(x), X),
    "trig": (lambda x: lax.sin(x) * lax.cos(x) + lax.atan2(x, 2.0), X),
}


@pytest.mark.parametrize("name", sorted(FAST_CASES))
def test_numpy_fast_path_matches_bind(monkeypatch, name):
    fn, *args = FAST_CASES[name]
    results = {}
    for fast in (True, False):
        monkeypatch.setattr(primitives, "USE_NUMPY_FAST_PATH", fast)
        results[fast] = [interpret(fn, *args, mode=m) for m in ("declared", "f64")]
    assert_bits_equal(results[True][0], results[False][0])
    assert results[True][1].dtype == np.float64
    np.testing.assert_allclose(results[True][1], results[False][1], rtol=4e-16, atol=1e-300)
    nan = np.isnan(results[False][1])
    np.testing.assert_array_equal(np.isnan(results[True][1]), nan)


def test_fast_path_is_used_and_can_be_disabled(monkeypatch):
    calls = []
    real_bind = primitives._bind
    monkeypatch.setattr(primitives, "_bind", lambda p, *a: calls.append(p.name) or real_bind(p, *a))
    fn = lambda x, y: jnp.tanh(x * y + 1.0).sum()  # noqa: E731
    interpret(fn, X[:4], Y[:4])
    assert calls == []
    monkeypatch.setattr(primitives, "USE_NUMPY_FAST_PATH", False)
    interpret(fn, X[:4], Y[:4])
    assert {"mul", "add", "tanh", "reduce_sum"} <= set(calls)


def test_bind_fallback_primitives():
    x = jnp.array([[3.0, -1.0, 2.5], [0.1, 0.7, -4.0]], np.float32)
    fn = lambda x: (jnp.cumsum(x, 1), jnp.sort(x), jnp.argmin(x, 0), lax.erf_inv(x / 5),  # noqa: E731
                    x.at[jnp.array([0, 0])].add(1.5), x.at[1, 2].set(9.0), x.at[jnp.array([1, 1])].mul(3.0),
                    lax.reduce_window(x, 0.0, lambda a, b: a + 2 * b, (1, 2), (1, 1), "VALID"),
                    lax.reduce(x, 1.0, lambda a, b: a * b + 0.5, (1,)), jnp.take(x, jnp.array([2, 0]), 1))
    for g, w in zip(interpret(fn, x), eager(fn, x)):
        assert g.dtype == w.dtype
        assert ulp_distance(g, w).max() <= 2 if g.dtype == np.float32 else np.array_equal(g, w)
    assert all(g.dtype in (np.float64, np.int32) for g in interpret(fn, x, mode="f64"))


# ------------------------------------------------------------------------- f32 MLP
class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = jnp.tanh(nn.Dense(16)(x))
        x = nn.LayerNorm()(x)
        x = nn.Dense(8)(x)
        return jax.nn.softmax(x), jax.nn.gelu(x)


def test_f32_mlp_declared_within_2_ulp_of_eager():
    model = MLP()
    x = jax.random.normal(jax.random.key(0), (4, 12))
    params = model.init(jax.random.key(1), x)
    declared = interpret(model.apply, params, x)
    want = eager(model.apply, params, x)
    for d, w in zip(declared, want):
        # Element-wise the gap reaches ~6-30 ulp where XLA's f32 tanh/exp (few-ulp
        # approximations) and f32 dot accumulation meet cancellation; at each output's
        # scale the declared reference is within 2 ulp of eager everywhere.
        assert d.dtype == np.float32
        assert ulp_distance(d, w, scale=True).max() <= 2
    ideal = interpret(model.apply, params, x, mode="f64")
    for i, d in zip(ideal, declared):
        assert i.dtype == np.float64
        np.testing.assert_allclose(i, d, rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------------------- errors
def test_unsupported_jaxpr_primitive_raises():
    mesh = jax.make_mesh((1,), ("i",))
    fn = jax.shard_map(lambda x: x * 2, mesh=mesh, in_specs=jax.P(), out_specs=jax.P())
    with pytest.raises(InterpretError, match=r"shard_map at .*test_interpreter\.py:\d+"):
        interpret(lambda x: fn(x) + 1, np.ones(3, np.float32))


def test_failure_is_wrapped_with_primitive_and_source(monkeypatch):
    real_bind = primitives._bind

    def failing(prim, vals, params):
        if prim.name == "cumsum":
            raise RuntimeError("boom")
        return real_bind(prim, vals, params)

    monkeypatch.setattr(primitives, "_bind", failing)
    fn = lambda x: jnp.cumsum(x) * 2  # noqa: E731
    with pytest.raises(InterpretError, match=r"cannot evaluate cumsum at .*test_interpreter\.py:\d+.*boom"):
        interpret(fn, np.ones(3, np.float32))


def test_bad_mode_and_arity():
    closed = jax.make_jaxpr(jnp.sin)(1.0)
    with pytest.raises(ValueError):
        evaluate_jaxpr(closed, [np.float32(1)], mode="f32")
    with pytest.raises(ValueError):
        evaluate_jaxpr(closed, [], mode="f64")


# ---------------------------------------------------------------- hook and plumbing
def test_on_eqn_hook_reports_every_equation():
    def fn(x):
        return jax.jit(lambda y: jnp.exp(y) * 2)(x) + 1

    closed = jax.make_jaxpr(fn)(XB)
    for mode, dtype in (("declared", BF16), ("f64", np.float64)):
        events: list[EqnEvent] = []
        (out,) = evaluate_jaxpr(closed, [XB], mode=mode, on_eqn=events.append)
        names = [(e.eqn.primitive.name, e.depth) for e in events]
        assert names == [("exp", 1), ("mul", 1), ("jit", 0), ("add", 0)]
        for e in events:
            assert all(isinstance(v, np.ndarray) and v.dtype == dtype for v in e.inputs + e.outputs)
        assert out.dtype == dtype
        np.testing.assert_array_equal(events[-1].outputs[0], out)


def test_interpret_traces_without_x64_and_keeps_pytrees():
    fn = lambda d: {"s": d["a"] * 0.1 + d["b"], "n": d["n"] + 1}  # noqa: E731
    args = {"a": 1.0, "b": np.arange(3, dtype=np.float32), "n": 3}
    with jax.enable_x64(True):
        got = interpret(fn, args)
    assert got["s"].dtype == np.float32 and got["n"].dtype == np.int32
    assert_bits_equal(got["s"], eager(fn, args)["s"])
    assert interpret(fn, args, mode="f64")["s"].dtype == np.float64


# ------------------------------------------------------------ candidate semantics
from dataclasses import replace  # noqa: E402

from jaxparity.interpreter import Semantics, evaluate_eqn  # noqa: E402
from jaxparity.rounding import round_to_dtype  # noqa: E402

F32 = np.float32


def rnd(x, dtype):
    """Round once to `dtype`, back to float64 (for hand computations)."""
    return round_to_dtype(np.asarray(x, np.float64), dtype).astype(np.float64)


def test_semantics_are_data_and_strings_still_work():
    assert Semantics() == Semantics.declared() and Semantics.declared().name == "declared"
    assert replace(Semantics.skip_widened(), name="other") == Semantics.skip_widened()
    names = [s.name for s in (Semantics.declared(), Semantics.skip_widened(), Semantics.f32_everywhere(),
                              Semantics.narrow_accumulation(), Semantics.flush_subnormals(),
                              Semantics.fma_contraction(), Semantics.ideal())]
    assert names == ["declared", "skip-widened", "f32-everywhere", "narrow-accumulation", "ftz",
                     "fma-contraction", "f64"]
    closed = jax.make_jaxpr(absorb)(XB)
    for string, sem in (("declared", Semantics.declared()), ("f64", Semantics.ideal())):
        (a,), (b,) = evaluate_jaxpr(closed, [XB], mode=string), evaluate_jaxpr(closed, [XB], mode=sem)
        assert_bits_equal(a, b)
    with pytest.raises(ValueError, match="Semantics"):
        evaluate_jaxpr(closed, [XB], mode="skip-widened")


# bf16 conv y (kernel x input) widened to f32 and added to the f32 input: the seed case.
SEED_X = np.array([-1.0932410, -1.2380177], F32).reshape(1, 1, 2)


def test_seed_case_three_regimes():
    want = {"declared": [-1.3705847, -2.27708], "skip-widened": [-1.3709509, -2.2795215],
            "f32-everywhere": [-1.3713225, -2.2845213]}
    for sem in (Semantics.declared(), Semantics.skip_widened(), Semantics.f32_everywhere()):
        got = interpret(LAYER.apply, VARS, SEED_X, mode=sem)
        assert got.dtype == F32
        np.testing.assert_array_equal(got.ravel(), np.array(want[sem.name], F32))
    # by hand: skip-widened = bf16 inputs, exact f32 product (no bf16 rounding), + x
    k = np.asarray(VARS["params"]["Conv_0"]["kernel"]).ravel()
    xb, kb = rnd(SEED_X.ravel(), BF16), rnd(k, BF16)
    np.testing.assert_array_equal(interpret(LAYER.apply, VARS, SEED_X, mode=Semantics.skip_widened()).ravel(),
                                  (rnd(xb * kb, F32) + SEED_X.ravel()).astype(F32))
    np.testing.assert_array_equal(interpret(LAYER.apply, VARS, SEED_X, mode=Semantics.f32_everywhere()).ravel(),
                                  (rnd(SEED_X.ravel() * k.astype(F32), F32) + SEED_X.ravel()).astype(F32))


A16 = np.array([1.1, -2.7, 3.3, 0.01], np.float32).astype(BF16)
B16 = np.array([0.3, 1.9, -7.1, 5.5], np.float32).astype(BF16)


def test_skip_widened_elides_only_rounding_before_a_widening_convert():
    a, b = A16.astype(np.float64), B16.astype(np.float64)
    exact = a * b  # a product of two bf16 values is exact in float32
    assert not np.array_equal(rnd(exact, BF16), exact)
    sem = Semantics.skip_widened()
    # all consumers widen: the product is kept in f32
    widened = lambda x, y: (x * y).astype(jnp.float32) + 1.0  # noqa: E731
    np.testing.assert_array_equal(interpret(widened, A16, B16, mode=sem), (exact + 1.0).astype(F32))
    np.testing.assert_array_equal(interpret(widened, A16, B16), (rnd(exact, BF16) + 1.0).astype(F32))
    # mixed consumers, and the result is an output: decided per use
    mixed = lambda x, y: (lambda p: (p.astype(jnp.float32), p + 1, p))(x * y)  # noqa: E731
    w32, plus1, p = interpret(mixed, A16, B16, mode=sem)
    assert w32.dtype == F32 and plus1.dtype == BF16 and p.dtype == BF16
    np.testing.assert_array_equal(w32, exact.astype(F32))
    np.testing.assert_array_equal(plus1, round_to_dtype(rnd(exact, BF16) + 1.0, BF16))
    np.testing.assert_array_equal(p, round_to_dtype(exact, BF16))
    # no widening convert, or an explicit f32 -> bf16 -> f32 pair: rounded as declared
    for fn, args in ((lambda x, y: x * y + y, (A16, B16)),
                     (lambda x, y: (x * y).astype(jnp.bfloat16).astype(jnp.float32),
                      (A16.astype(F32) * 1.01, B16.astype(F32)))):
        assert_bits_equal(interpret(fn, *args, mode=sem), interpret(fn, *args))


def test_f32_everywhere_skips_every_narrow_rounding():
    x = np.array([1.0001, -3.14159, 1e-3, 300.7], F32)
    fn = lambda x: (x.astype(jnp.bfloat16) * jnp.bfloat16(3)).astype(jnp.float32) - x  # noqa: E731
    got = interpret(fn, x, mode=Semantics.f32_everywhere())
    assert got.dtype == F32
    np.testing.assert_array_equal(got, (rnd(x * 3.0, F32) - x).astype(F32))
    assert not np.array_equal(got, interpret(fn, x))
    # a narrow output comes back in float32, the dtype it was computed in
    out = interpret(lambda x: x.astype(jnp.bfloat16) / 3, x, mode=Semantics.f32_everywhere())
    assert out.dtype == F32
    np.testing.assert_array_equal(out, (x.astype(np.float64) / 3).astype(F32))


def test_narrow_accumulation_reduce_sum_300_values():
    x = np.random.default_rng(0).uniform(0, 1, 300).astype(BF16)
    fn = lambda x: lax.reduce(x, np.array(0, BF16), lax.add, (0,))  # noqa: E731
    assert "reduce_sum" in str(jax.make_jaxpr(fn)(x))
    acc = 0.0
    for v in x.astype(np.float64):
        acc = rnd(acc + v, BF16)
    got = interpret(fn, x, mode=Semantics.narrow_accumulation())
    declared = interpret(fn, x)
    assert got.dtype == declared.dtype == BF16
    assert float(got) == acc
    assert float(declared) == float(round_to_dtype(x.astype(np.float64).sum(), BF16))
    assert float(got) != float(declared)
    ones = np.ones(300, BF16)  # 256 + 1 rounds back to 256 in bf16
    assert float(interpret(fn, ones, mode=Semantics.narrow_accumulation())) == 256.0
    assert float(interpret(fn, ones)) == 300.0
    # multiple axes: row-major over the reduced axes, vectorized over the rest
    m = np.random.default_rng(1).uniform(-1, 1, (3, 5, 7)).astype(BF16)
    fn2 = lambda m: lax.reduce(m, np.array(0, BF16), lax.add, (0, 2))  # noqa: E731
    want = np.zeros(5)
    for i in range(3):
        for k in range(7):
            want = rnd(want + m[i, :, k].astype(np.float64), BF16)
    np.testing.assert_array_equal(interpret(fn2, m, mode=Semantics.narrow_accumulation()).astype(np.float64), want)


def test_narrow_accumulation_dot_general():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 40)).astype(BF16), rng.standard_normal((40, 2)).astype(BF16)
    fn = lambda a, b: jnp.dot(a, b)  # noqa: E731
    assert "preferred_element_type=bfloat16" in str(jax.make_jaxpr(fn)(a, b))
    want = np.zeros((3, 2))
    for k in range(40):
        want = rnd(want + rnd(np.outer(a[:, k].astype(np.float64), b[k].astype(np.float64)), BF16), BF16)
    got = interpret(fn, a, b, mode=Semantics.narrow_accumulation())
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.astype(np.float64), want)
    assert not np.array_equal(got, interpret(fn, a, b))
    # an f32 result (f32 accumulation requested) is not narrow: declared
    f32acc = lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)  # noqa: E731
    assert_bits_equal(interpret(f32acc, a, b, mode=Semantics.narrow_accumulation()), interpret(f32acc, a, b))


@pytest.mark.parametrize("groups", [1, 2])
def test_narrow_accumulation_conv(groups):
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal((2, 10, 4)).astype(BF16)  # N W C
    rhs = rng.standard_normal((3, 4 // groups, 6)).astype(BF16)  # W I O
    fn = lambda a, b: lax.conv_general_dilated(a, b, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC"),  # noqa: E731
                                               feature_group_count=groups)
    got = interpret(fn, lhs, rhs, mode=Semantics.narrow_accumulation())
    assert got.dtype == BF16 and got.shape == (2, 8, 6)
    lo, ro = lhs.astype(np.float64), rhs.astype(np.float64)
    per_group_in, per_group_out = 4 // groups, 6 // groups
    want = np.zeros((2, 8, 6))
    for o in range(6):
        g = o // per_group_out
        acc = np.zeros((2, 8))
        for i in range(per_group_in):  # input feature major, window position minor
            for w in range(3):
                acc = rnd(acc + rnd(lo[:, w:w + 8, g * per_group_in + i] * ro[w, i, o], BF16), BF16)
        want[:, :, o] = acc
    np.testing.assert_array_equal(got.astype(np.float64), want)
    assert not np.array_equal(got, interpret(fn, lhs, rhs))


def test_flush_subnormals():
    x = np.array([1e-20, -3e-20, 2e-10, 1.0], F32)
    y = np.full(4, 1e-20, F32)
    ftz = Semantics.flush_subnormals()
    prod = x.astype(np.float64) * y
    declared = interpret(lambda x, y: x * y, x, y)
    np.testing.assert_array_equal(declared, prod.astype(F32))
    assert np.all(np.abs(declared[:2]) < np.finfo(F32).tiny) and np.all(declared[:2] != 0)
    flushed = interpret(lambda x, y: x * y, x, y, mode=ftz)
    assert_bits_equal(flushed, np.array([0.0, -0.0, *prod[2:]], F32))
    # DAZ: a subnormal input reads as zero in arithmetic and comparisons...
    s = np.array([1e-40, -1e-40, 2e-38, 0.5], F32)
    assert_bits_equal(interpret(lambda s: s * 2, s, mode=ftz), np.array([0.0, -0.0, 4e-38, 1.0], F32))
    np.testing.assert_array_equal(interpret(lambda s: s > 0, s, mode=ftz), [False, False, True, True])
    np.testing.assert_array_equal(interpret(lambda s: s > 0, s), [True, False, True, True])
    # ...but data movement, neg and converts leave it alone
    moved = interpret(lambda s: (-s.reshape(2, 2)[::-1]).ravel(), s, mode=ftz)
    assert_bits_equal(moved, -s.reshape(2, 2)[::-1].ravel())
    # bf16 subnormals (below float32's smallest normal) too
    b = np.array([1e-20, 1.0], F32).astype(BF16)
    assert_bits_equal(interpret(lambda b: b * b, b, mode=ftz), np.array([0.0, 1.0], BF16))
    assert float(interpret(lambda b: b * b, b)[0]) != 0


def test_fma_contraction_keeps_products_feeding_adds():
    rng = np.random.default_rng(4)
    a, b, c = rng.standard_normal((3, 64)).astype(F32)
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    fma = Semantics.fma_contraction()
    fn = lambda a, b, c: a * b + c  # noqa: E731
    got = interpret(fn, a, b, c, mode=fma)
    np.testing.assert_array_equal(got, (a64 * b64 + c64).astype(F32))
    declared = interpret(fn, a, b, c)
    np.testing.assert_array_equal(declared, (rnd(a64 * b64, F32) + c64).astype(F32))
    assert not np.array_equal(got, declared)
    # a product with another consumer is rounded
    shared = lambda a, b, c: (lambda p: (p + c, p * 2))(a * b)  # noqa: E731
    for g, d in zip(interpret(shared, a, b, c, mode=fma), interpret(shared, a, b, c)):
        assert_bits_equal(g, d)


def test_evaluate_eqn_single_equations():
    closed = jax.make_jaxpr(lambda x, y: jnp.exp(x + y) * 0.5)(XB, XB)
    add, exp, mul = closed.jaxpr.eqns
    (s,) = evaluate_eqn(add, [XB, np.array(C, BF16) * np.ones(3, BF16)])
    assert s.dtype == BF16
    np.testing.assert_array_equal(s, XB)  # x + 2**-9 rounds back to x in bf16
    (s64,) = evaluate_eqn(add, [XB, np.full(3, C, BF16)], mode="f64")
    assert s64.dtype == np.float64
    np.testing.assert_array_equal(s64, XB.astype(np.float64) + 2.0**-9)
    (e,) = evaluate_eqn(exp, [XB])
    np.testing.assert_array_equal(e, round_to_dtype(np.exp(XB.astype(np.float64)), BF16))
    # the literal may be left out of the inputs; inputs that are not bf16 are rounded once
    (m1,) = evaluate_eqn(mul, [XB])
    (m2,) = evaluate_eqn(mul, [XB.astype(F32), np.float32(0.5)])
    assert m1.dtype == m2.dtype == BF16
    np.testing.assert_array_equal(m1, XB.astype(np.float64) * 0.5)
    np.testing.assert_array_equal(m2, m1)
    with pytest.raises(ValueError):
        evaluate_eqn(add, [XB])


def test_evaluate_eqn_call_like_recurses():
    closed = jax.make_jaxpr(lambda x: jax.jit(absorb)(x) * 2)(XB)
    (jit_eqn, _) = closed.jaxpr.eqns
    assert jit_eqn.primitive.name in ("jit", "pjit")
    events = []
    (d,) = evaluate_eqn(jit_eqn, [XB], on_eqn=events.append)
    assert d.dtype == BF16
    np.testing.assert_array_equal(d.astype(np.float64), 0.0)
    assert [(e.eqn.primitive.name, e.depth) for e in events] == [("add", 1), ("sub", 1), (jit_eqn.primitive.name, 0)]
    (i,) = evaluate_eqn(jit_eqn, [XB], mode="f64")
    np.testing.assert_array_equal(i, 2.0**-9)
    # replaying the seed conv on its own (declared) inputs
    closed = jax.make_jaxpr(LAYER.apply)(VARS, SEED_X)
    conv = next(e for e in closed.jaxpr.eqns if e.primitive.name == "conv_general_dilated")
    k = np.asarray(VARS["params"]["Conv_0"]["kernel"]).astype(BF16)
    (y,) = evaluate_eqn(conv, [SEED_X.astype(BF16), k])
    assert y.dtype == BF16
    np.testing.assert_array_equal(y.ravel(), round_to_dtype(SEED_X.astype(BF16).astype(np.float64).ravel()
                                                            * k.astype(np.float64).ravel(), BF16))


def test_evaluate_eqn_takes_values_in_the_modes_representation():
    # f64 outputs fed back in stay unrounded: replaying op by op gives the f64 ideal
    fn = lambda x: (x + C) - x  # noqa: E731
    closed = jax.make_jaxpr(fn)(XB)
    vals = [XB]
    for mode, want in (("f64", 2.0**-9), ("declared", 0.0)):
        x = XB
        (s,) = evaluate_eqn(closed.jaxpr.eqns[0], [x, C], mode=mode)
        (d,) = evaluate_eqn(closed.jaxpr.eqns[1], [s, x], mode=mode)
        np.testing.assert_array_equal(d.astype(np.float64), want)
        assert_bits_equal(d, evaluate_jaxpr(closed, vals, mode=mode)[0])
    # f32 values for a bf16 input under f32-everywhere are not rounded to bf16
    closed = jax.make_jaxpr(lambda x: x * 3)(XB)
    x32 = np.array([1.001, 2.0, -1.5], F32)
    (y,) = evaluate_eqn(closed.jaxpr.eqns[0], [x32], mode=Semantics.f32_everywhere())
    assert y.dtype == F32
    np.testing.assert_array_equal(y, (x32.astype(np.float64) * 3).astype(F32))


def test_literal_or_no_operand_after_a_widened_result():
    """Under skip-widened, an op whose first operand is a literal (2 * y) or that has none (iota)
    after a narrow result was kept wide: evaluated, not a crash (found on the transformer example)."""
    def f(x):
        y = x * x  # bf16, kept in f32 under skip-widened
        z = 2 * y + lax.iota(BF16, 4)  # literal first operand; an op with no operands
        return z.astype(F32) + y.astype(F32)

    x = A16
    got = interpret(f, x, mode=Semantics.skip_widened())
    y32 = rnd(x.astype(np.float64) ** 2, F32)  # y, kept wide for its widening convert
    yb = rnd(y32, BF16).astype(np.float64)  # y as the multiply reads it
    two_y = rnd(2.0 * yb, BF16).astype(np.float64)
    z32 = rnd(two_y + np.arange(4), F32)  # z feeds only a widening convert: kept wide too
    assert got.dtype == F32
    np.testing.assert_array_equal(got, rnd(z32.astype(np.float64) + y32.astype(np.float64), F32))


# ------------------------------------------------------------------ min, max, clamp
def _complex(re, im, dtype=np.complex64):
    """re + i im without arithmetic (which would turn inf * 1j into a NaN)."""
    out = np.empty(np.broadcast_shapes(np.shape(re), np.shape(im)), dtype)
    out.real, out.imag = re, im
    return out


def _minmax_operands(dtype):
    """Two operands of `dtype` covering its extremes, equal values, ±0 and NaN."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.array([False, False, True, True]), np.array([False, True, False, True])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = np.array([info.min, info.max, 0, 1, info.max, 7, info.min + 1], dtype)
        return x, np.array([info.max, info.min, 0, 0, info.max - 1, 7, info.min], dtype)
    if dtype.kind == "c":
        re = np.array([1, 1, 2, np.nan, 1, 0, -0.0, 0, 3, np.inf, 1])
        im = np.array([5, 2, 0, 0, np.nan, 0, 0, -0.0, 1, 0, -np.inf])
        y_re = np.array([1, 1, 1, 1, 1, -0.0, 0, 0, 3, 1, 1])
        y_im = np.array([2, 5, 9, 0, 0, 0, 0, 0, 1, np.nan, 0])
        return _complex(re, im, dtype), _complex(y_re, y_im, dtype)
    x = np.array([-0.0, 0.0, -0.0, np.nan, 1.0, -np.inf, 2.5, 0.0], dtype)
    return x, np.array([0.0, -0.0, -0.0, 1.0, np.nan, 3.0, -7.0, 0.0], dtype)


def _with_x64(dtype):
    return np.dtype(dtype).itemsize == 8 or np.dtype(dtype) == np.complex128


MINMAX_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                 np.uint64, np.float16, BF16, np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("dtype", MINMAX_DTYPES, ids=lambda d: np.dtype(d).name)
def test_min_max_clamp_every_dtype(monkeypatch, fast, dtype):
    """lax.max/min/clamp as lax defines them, in both modes: bool and integers exact (the
    float rule negated bool), floats with NaN propagating and -0 < +0, complex in lax's
    lexicographic order. 64-bit dtypes are traced with x64 on."""
    monkeypatch.setattr(primitives, "USE_NUMPY_FAST_PATH", fast)
    x, y = _minmax_operands(dtype)
    lo, hi = np.minimum(x[:1], y[:1]), np.maximum(x[:1], y[:1])
    fn = lambda x, y, lo, hi: (lax.max(x, y), lax.min(x, y), lax.clamp(lo[0], x, hi[0]),  # noqa: E731
                               lax.clamp(x, y, x), lax.reduce_max(x, (0,)), lax.reduce_min(y, (0,)))
    if np.dtype(dtype).kind == "c":  # lax.reduce_max/min reject complex
        fn = lambda x, y, lo, hi, f=fn: f(x, y, lo, hi)[:4]  # noqa: E731
    args = (x, y, lo, hi)
    with jax.enable_x64(_with_x64(dtype)):
        closed = jax.make_jaxpr(fn)(*args)
        want = eager(fn, *args)
        if np.dtype(dtype).kind == "c" and fast:  # XLA CPU's complex clamp compares real
            # parts only (so does bind); lax (and StableHLO) define clamp as min(max(x, lo), hi)
            # in the lexicographic order, which the numpy rule follows
            want = (*want[:2], *eager(lambda x, y, lo, hi: (lax.min(lax.max(x, lo[0]), hi[0]),
                                                             lax.min(lax.max(y, x), x)), *args))
    for mode in ("declared", "f64"):
        got = evaluate_jaxpr(closed, list(args), mode=mode)
        for g, w in zip(got, want, strict=True):
            assert_bits_equal(g.astype(w.dtype) if mode == "f64" else g, w)  # selections: exact


def test_reduce_max_min_order_signed_zeros():
    x = np.array([[-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0]], np.float32)
    fn = lambda x: (lax.reduce_max(x, (1,)), lax.reduce_min(x, (1,)))  # noqa: E731
    for g, w in zip(interpret(fn, x), eager(fn, x)):
        assert_bits_equal(g, w)
        assert np.signbit(g).tolist() in ([False, False, True], [True, True, True])


# ------------------------------------------------------------------ complex elementwise
def _complex_operands():
    """complex64 operands: moderate, tiny and large components, exact zeros, and axes."""
    rng = np.random.RandomState(7)
    fixed_re = [0.0, -0.0, 0.0, 1.5, -2.0, 30.0, 0.5, 1e-30]
    fixed_im = [0.0, 0.0, -0.0, -0.0, 0.0, 2.0, 0.5, 3.0]
    re = np.concatenate([rng.randn(24) * 2, rng.randn(4) * 1e-5, fixed_re])
    im = np.concatenate([rng.randn(24) * 2, rng.randn(4) * 1e-5, fixed_im])
    return _complex(re, im)


def _with_specials(z, re, im):
    """`z` with extra elements re + i im (each a list), for ops whose numpy and lax
    definitions agree there."""
    return np.concatenate([z, _complex(np.array(re, np.float64), np.array(im, np.float64))])


INF, NAN = np.inf, np.nan
Z = _complex_operands()
ZW = np.roll(Z, 5)[::-1].copy()  # a second operand, same shape
ZNZ = np.where(Z == 0, np.complex64(0.25 - 1j), Z)  # no zero (divisors, log, pow bases)
ZS = _with_specials(Z, [INF, -INF, 1.0, NAN, 3.0, 1e30], [1.0, 2.0, -INF, 0.0, NAN, -1e30])
ZSW = _with_specials(ZW, [2.0, INF, 1.0, 1.0, 0.0, 1e30], [0.0, 1.0, 0.5, NAN, 2.0, 1e30])
R = np.linspace(-3, 3, Z.size).astype(np.float32)


def _np_logistic(z):
    return 1 / (1 + np.exp(-z))


def _np_ipow(z, n):
    """z ** n by lax.integer_pow's own expansion (square and multiply, the accumulator on the
    left): the sign of an exact zero component depends on the order of the products."""
    acc, k = None, abs(n)
    while k:
        if k & 1:
            acc = z if acc is None else acc * z
        z, k = z * z, k >> 1
    return 1 / acc if n < 0 else acc


def _np_exp2(z):
    """2**z by components: 2**x (cos(y ln 2) + i sin(y ln 2)), keeping the sign of a zero y."""
    m = np.exp2(z.real)
    return _complex(m * np.cos(z.imag * np.log(2)), m * np.sin(z.imag * np.log(2)), np.complex128)


# name: (lax function, numpy complex128 reference, operands)
COMPLEX_OPS = {
    "add": (lax.add, np.add, (ZS, ZSW)), "sub": (lax.sub, np.subtract, (ZS, ZSW)),
    "mul": (lax.mul, np.multiply, (Z, ZW)), "div": (lax.div, np.divide, (Z, ZNZ[::-1].copy())),
    "neg": (lax.neg, np.negative, (ZS,)), "square": (lax.square, np.square, (Z,)),
    "sign": (lax.sign, lambda z: np.where(z == 0, z, z / np.abs(z)), (Z,)),
    "pow": (lax.pow, np.power, (ZNZ, ZW)),
    "integer_pow3": (lambda z: lax.integer_pow(z, 3), lambda z: _np_ipow(z, 3), (Z,)),
    "integer_pow-2": (lambda z: lax.integer_pow(z, -2), lambda z: _np_ipow(z, -2), (ZNZ,)),
    "integer_pow7": (lambda z: lax.integer_pow(z, 7), lambda z: _np_ipow(z, 7), (Z,)),
    "sqrt": (lax.sqrt, np.sqrt, (Z,)), "rsqrt": (lax.rsqrt, lambda z: 1 / np.sqrt(z), (ZNZ,)),
    "exp": (lax.exp, np.exp, (_with_specials(Z, [100.0, -200.0], [1.0, 3.0]),)),
    "exp2": (lax.exp2, _np_exp2, (Z,)),
    "log": (lax.log, np.log, (ZNZ,)), "log1p": (lax.log1p, np.log1p, (Z,)),
    "expm1": (lax.expm1, np.expm1, (Z,)), "tanh": (lax.tanh, np.tanh, (Z,)),
    "logistic": (lax.logistic, _np_logistic, (_with_specials(Z, [0.5, 5.292157], [0.5, -3.1456590]),)),
    "sin": (lax.sin, np.sin, (Z,)), "cos": (lax.cos, np.cos, (Z,)), "tan": (lax.tan, np.tan, (Z,)),
    "abs": (lax.abs, np.abs, (_with_specials(Z, [1.5, 1e30, -3e-30], [100.0, 1e30, 4e-30]),)),
    "eq": (lax.eq, np.equal, (ZS, np.where(np.arange(ZS.size) % 3 == 0, ZS, ZSW))),
    "ne": (lax.ne, np.not_equal, (ZS, np.where(np.arange(ZS.size) % 3 == 0, ZS, ZSW))),
    "select_n": (lambda z, w: lax.select_n(z.real > w.real, z, w),
                 lambda z, w: np.where(z.real > w.real, w, z), (ZS, ZSW)),
    "to_complex": (lambda x: x.astype(jnp.complex64), lambda x: x.astype(np.complex128), (R,)),
    "to_real": (lambda z: lax.convert_element_type(z, jnp.float32), lambda z: z.real, (ZS,)),
    "complex": (lax.complex, lambda x, y: x + 1j * y, (R, R[::-1].copy())),
    "real": (lax.real, np.real, (ZS,)), "imag": (lax.imag, np.imag, (ZS,)),
    "conj": (lax.conj, np.conj, (ZS,)),
    "reduce_sum": (lambda z: z.reshape(4, -1).sum(1), lambda z: z.reshape(4, -1).sum(1), (Z,)),
    "reduce_prod": (lambda z: jnp.prod(z.reshape(-1, 4), 1), lambda z: np.prod(z.reshape(-1, 4), 1), (Z,)),
    "dot_general": (lambda z, w: z.reshape(4, -1) @ w.reshape(-1, 4),
                    lambda z, w: z.reshape(4, -1) @ w.reshape(-1, 4), (Z, ZW)),
    "cumsum": (lambda z: jnp.cumsum(z), np.cumsum, (Z,)),
}


def _close_c128(got, ref, ulps):
    """|got - ref| <= ulps float64 ulps of |ref| per element (ref's own error is ~1 ulp; a
    component can be far smaller than |ref|, so components are not compared relatively);
    infinities and NaNs (per component) must match."""
    got, ref = np.asarray(got), np.asarray(ref)
    fin = np.isfinite(ref)
    for part in (np.real, np.imag) if ref.dtype.kind == "c" else (np.real,):
        g, r = part(got)[~fin], part(ref)[~fin]
        assert np.array_equal(g, r, equal_nan=True), (g, r)
    tol = ulps * np.spacing(np.abs(ref[fin]).astype(np.float64)) + 1e-300
    assert np.all(np.abs(got[fin] - ref[fin]) <= tol), np.max(np.abs(got[fin] - ref[fin]) / tol)


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("name", sorted(COMPLEX_OPS))
def test_complex_ops_against_numpy_complex128(name):
    """f64 mode matches an independent numpy complex128 computation; declared is that value
    rounded per component to complex64 (float32 / bool for the real-valued ops), bit for bit.
    (Declared is the f64 result rounded once; it could only differ from the rounded numpy
    value if an exact component lay within ~1e-16 relative of a float32 rounding boundary,
    which none of these fixed inputs do.)"""
    fn, ref_fn, args = COMPLEX_OPS[name]
    with np.errstate(all="ignore"):
        ref = np.asarray(ref_fn(*(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
                                  for a in args)))
    f64, declared = interpret(fn, *args, mode="f64"), interpret(fn, *args, mode="declared")
    want_dtype = eager(fn, *args).dtype
    assert declared.dtype == want_dtype
    if ref.dtype.kind == "b":
        np.testing.assert_array_equal(f64, ref)
        np.testing.assert_array_equal(declared, ref)
        return
    assert f64.dtype == (np.complex128 if want_dtype.kind == "c" else np.float64)
    _close_c128(f64, ref, ulps=16 if name in ("integer_pow7", "pow", "reduce_prod") else 8)
    with np.errstate(over="ignore"):  # exp's large arguments overflow complex64
        assert_bits_equal(declared, ref.astype(want_dtype))


def test_sigmoid_of_complex_keeps_the_imaginary_part():
    got = interpret(jax.nn.sigmoid, np.array([0.5 + 0.5j], np.complex64))
    np.testing.assert_allclose(got, [0.62993544 + 0.11954506j], rtol=1e-7)


# ------------------------------------------------------------------- random streams
from jax._src import prng  # noqa: E402

ALPHA = np.array([5.292157, 1.2004716, 2.936214, 0.01, 100.0], np.float32)
LOGITS = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))
RNG_STATE = np.array([42, 0, 7, 1], np.uint32)
# name: function of (alpha, logits, rng_state): the random primitives of JAX's test corpus
# (random_gamma, random_categorical, random_uniform, random_randint, random_split,
# rng_bit_generator, iota_2x32_shape) and the key plumbing around them
RANDOM_CASES = {
    "gamma": lambda a, lg, s: jax.random.gamma(jax.random.key(42), a),
    "loggamma": lambda a, lg, s: jax.random.loggamma(jax.random.key(1), a),
    "gamma_bf16": lambda a, lg, s: jax.random.gamma(jax.random.key(3), a.astype(jnp.bfloat16)),
    "categorical": lambda a, lg, s: jax.random.categorical(jax.random.key(0), lg, shape=(64, 2)),
    "uniform": lambda a, lg, s: [jax.random.uniform(jax.random.key(2), (8,), d, -a[0], a[1])
                                 for d in (jnp.float32, jnp.bfloat16, jnp.float16)],
    "randint": lambda a, lg, s: [jax.random.randint(jax.random.key(9), (8,), -5, 300, d)
                                 for d in (jnp.int8, jnp.uint8, jnp.int32, jnp.uint32)],
    "split_fold_in": lambda a, lg, s: jax.random.key_data(
        jax.random.fold_in(jax.random.split(jax.random.key(11), 3)[1], 4)),
    "bits_wrap": lambda a, lg, s: jax.random.bits(jax.random.wrap_key_data(s[:2]), (5,), jnp.uint16),
    "rng_bit_generator": lambda a, lg, s: [lax.rng_bit_generator(s, (3, 2), d, algorithm=alg)
                                           for d in (jnp.uint32, jnp.uint8)
                                           for alg in (lax.RandomAlgorithm.RNG_DEFAULT,
                                                       lax.RandomAlgorithm.RNG_THREE_FRY,
                                                       lax.RandomAlgorithm.RNG_PHILOX)],
    "iota_2x32_shape": lambda a, lg, s: prng.iota_2x32_shape((2, 3)),
    "threefry2x32": lambda a, lg, s: prng.threefry_2x32(s[:2], s),
    "bernoulli_permutation": lambda a, lg, s: (jax.random.bernoulli(jax.random.key(4), a / 101),
                                               jax.random.permutation(jax.random.key(4), 7)),
}


@pytest.mark.parametrize("name", sorted(RANDOM_CASES))
def test_random_streams_equal_eager(name):
    """Random primitives run on the case's own dtypes (a sampler's result is what it draws,
    not a function of its float inputs in the reals): declared is eager bit for bit. In f64
    mode the integer draws are the same; float ones are too where nothing unrounded feeds
    them (gamma of the f32 argument), not where f64 arithmetic follows (uniform's scaling)."""
    fn, args = RANDOM_CASES[name], (ALPHA, LOGITS, RNG_STATE)
    want = jax.tree_util.tree_leaves(eager(fn, *args))
    for g, w in zip(jax.tree_util.tree_leaves(interpret(fn, *args)), want, strict=True):
        assert_bits_equal(g, w)
    for g, w in zip(jax.tree_util.tree_leaves(interpret(fn, *args, mode="f64")), want, strict=True):
        if w.dtype.kind in "biu" or name in ("gamma", "loggamma"):
            assert_bits_equal(g.astype(w.dtype), w)


def test_random_gamma_issue_example():
    fn = lambda a: jax.random.gamma(jax.random.key(42), a)  # noqa: E731
    a = np.array([5.292157, 1.2004716, 2.936214], np.float32)
    got = interpret(fn, a)
    np.testing.assert_allclose(got, [8.0375, 0.4744, 4.7813], rtol=1e-4)
    assert_bits_equal(got, eager(fn, a))


# --------------------------------------------------------------- custom_linear_solve
def test_custom_linear_solve_runs_the_solve_jaxpr():
    d = np.array([3.0, 7.0, -0.3, 11.0], np.float32)
    b = np.array([1.0, 2.0, 5.0, -1.0], np.float32)

    def fn(d, b):  # the solve closes over d: consts ahead of b in the operands
        return lax.custom_linear_solve(lambda x: d * x, b, lambda matvec, y: y / d,
                                       transpose_solve=lambda vecmat, y: y / d)

    assert "custom_linear_solve" in str(jax.make_jaxpr(fn)(d, b))
    assert_bits_equal(interpret(fn, d, b), eager(fn, d, b))
    np.testing.assert_array_equal(interpret(fn, d, b, mode="f64"), b.astype(np.float64) / d)


def test_custom_linear_solve_conjugate_gradient_in_f64():
    a = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]], np.float32)
    b = np.array([1.0, 2.0, 3.0], np.float32)
    fn = lambda a, b: jax.scipy.sparse.linalg.cg(lambda x: a @ x, b, tol=1e-12, maxiter=50)[0]  # noqa: E731
    got = interpret(fn, a, b, mode="f64")
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.linalg.solve(a.astype(np.float64), b), rtol=1e-12)
    np.testing.assert_allclose(interpret(fn, a, b), eager(fn, a, b), rtol=1e-6)


def test_composite_and_custom_dce_recurse():
    from jax.experimental.custom_dce import custom_dce

    @custom_dce
    def pair(x):
        return absorb(x), x * 3

    @pair.def_dce
    def _(used, x):
        return [absorb(x) if used[0] else None, x * 3 if used[1] else None]

    composite = lax.composite(absorb, name="my.absorb")
    check_rounding_sensitive(composite, XB, primitive="composite")
    check_rounding_sensitive(lambda x: pair(x)[0], XB, primitive="custom_dce_call")


@pytest.mark.parametrize("window, strides, padding, lhs_dil, rhs_dil", [
    ((3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1)),
    ((3, 3), (2, 2), ((0, 1), (1, 0)), (1, 1), (1, 1)),  # MobileNet's stride-2 "same"
    ((1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),
    ((3, 2), (2, 1), ((2, -1), (-1, 3)), (2, 1), (1, 2)),  # negative padding crops; both dilations
    ((5,), (3,), ((-2, 4),), (3,), (2,)),
    ((4, 4), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),  # a window wider than the input: nothing fits
])
def test_patches_gather_as_lax_does(window, strides, padding, lhs_dil, rhs_dil):
    """The interpreter's numpy patches (no compile) are lax.conv_general_dilated_patches's, element for element."""
    from jaxparity.interpreter.accumulation import patches

    x = np.random.default_rng(0).normal(size=(2, 3) + (5, 3)[:len(window)]).astype(np.float32)
    want = np.asarray(lax.conv_general_dilated_patches(x, window, strides, padding, lhs_dil, rhs_dil,
                                                       precision=lax.Precision.HIGHEST))
    got = patches(x, window, strides, padding, lhs_dil, rhs_dil)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
