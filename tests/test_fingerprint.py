"""Tests for jaxparity.explain.evidence.fingerprint (which candidate semantics reproduces a path)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from cases.seed_layer import LAYER, VARS, X

from jaxparity.explain.evidence.fingerprint import CANDIDATES, CandidateMatch, Fingerprint, fingerprint
from jaxparity.interpreter import Semantics

BF16 = ml_dtypes.bfloat16


def by_name(fp: Fingerprint) -> dict[str, CandidateMatch]:
    return {m.candidate: m for m in fp.matches}


def test_candidates():
    assert [c.name for c in CANDIDATES] == ["declared", "skip-widened", "f32-everywhere",
                                            "narrow-accumulation", "ftz", "fma-contraction"]
    assert all(c.description for c in CANDIDATES)


@pytest.mark.parametrize("observed, best", [
    ([-1.3705847, -2.27708], "declared"),  # eager: per-op rounding as declared
    ([-1.3709509, -2.2795215], "skip-widened"),  # jit on CPU: conv output not rounded to bf16
    ([-1.3713225, -2.2845213], "f32-everywhere"),  # the report's TF Serving value
])
def test_seed_case_three_regimes(observed, best):
    fp = fingerprint(LAYER.apply, (VARS, X), [np.asarray(observed, np.float32).reshape(1, 1, 2)])
    assert fp.best == best and fp.exact
    assert fp.matches[0].candidate == best and fp.matches[0].exact
    assert fp.matches[0].max_ulp == 0 and fp.matches[0].n_differ == 0 and fp.matches[0].mean_abs == 0
    # the three regimes are told apart: exactly one of them matches
    matches = by_name(fp)
    assert sum(matches[n].exact for n in ("declared", "skip-widened", "f32-everywhere")) == 1
    for m in fp.matches[1:]:
        if not m.exact:
            assert m.n_differ == 2 and m.max_ulp > 1000 and m.mean_abs > 0
    # ranked: exact first, then by max ULP
    inexact = [m.max_ulp for m in fp.matches if not m.exact]
    assert inexact == sorted(inexact)


def test_seed_case_jit_on_this_cpu_is_skip_widened():
    # Observed on AVX2 and on AVX512_BF16 CPUs alike: XLA's CPU compiler normalizes the bf16 conv to f32
    # (float-normalization-bf16) and drops only the rounding of its output; the bf16 inputs stay rounded.
    observed = jax.tree_util.tree_leaves(jax.jit(LAYER.apply)(VARS, X))
    fp = fingerprint(LAYER.apply, (VARS, X), [np.asarray(o) for o in observed])
    assert fp.best == "skip-widened" and fp.exact
    assert not by_name(fp)["declared"].exact
    # the conv's candidates that change nothing here coincide with declared
    assert set(by_name(fp)["declared"].same_as) == {"narrow-accumulation", "ftz", "fma-contraction"}
    assert by_name(fp)["skip-widened"].same_as == ()
    assert "skip-widened: exact" in fp.describe()


def test_bf16_softmax_jit_is_skip_widened():
    # exp's bf16 result feeds both a widening convert (the f32 sum) and the division: XLA on
    # CPU keeps it in f32 for the sum only; the division's result, widened, is not rounded.
    x = jax.random.normal(jax.random.key(0), (4, 16))
    fn = lambda x: jax.nn.softmax(x.astype(jnp.bfloat16)).astype(jnp.float32)  # noqa: E731
    eager = fingerprint(fn, (x,), [np.asarray(fn(x))])
    jit = fingerprint(fn, (x,), [np.asarray(jax.jit(fn)(x))])
    assert eager.best == "declared" and eager.exact
    assert jit.best == "skip-widened" and jit.exact and not by_name(jit)["declared"].exact


def test_planted_ftz_compiled_cpu_flushes():
    # XLA on CPU runs compiled code with FTZ/DAZ: a subnormal product becomes zero.
    x = np.array([1e-20, -3e-20, 2e-10, 1.0], np.float32)
    y = np.full(4, 1e-20, np.float32)
    fn = lambda x, y: x * y  # noqa: E731
    observed = np.asarray(jax.jit(fn)(x, y))
    assert np.array_equal(observed[:2], [0.0, 0.0]) and np.signbit(observed[1])
    fp = fingerprint(fn, (x, y), [observed])
    assert fp.best == "ftz" and fp.exact
    declared = by_name(fp)["declared"]
    assert not declared.exact and declared.n_differ == 2


def test_planted_ftz_eager_cpu_flushes_a_subnormal_input():
    # Eagerly, XLA CPU's multiply keeps the subnormal product, but maximum reads it as zero
    # (denormals-are-zero).
    x = jnp.asarray([1e-20, -3e-20, 2e-10, 1.0], jnp.float32)
    y = jnp.full(4, 1e-20, jnp.float32)
    fn = lambda x, y: jnp.maximum(x * y, -1.0)  # noqa: E731
    observed = np.asarray(fn(x, y))
    assert observed[0] == 0
    fp = fingerprint(fn, (x, y), [observed])
    assert fp.best == "ftz" and fp.exact and not by_name(fp)["declared"].exact


def test_no_narrow_types_candidates_indistinguishable():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 256)).astype(np.float32)
    fn = lambda x, y: (x + y) / (x - y)  # noqa: E731
    for observed in (fn(x, y), jax.jit(fn)(x, y)):
        fp = fingerprint(fn, (x, y), [np.asarray(observed)])
        assert fp.best == "declared" and fp.exact
        assert set(by_name(fp)["declared"].same_as) == {
            "skip-widened", "f32-everywhere", "narrow-accumulation", "ftz", "fma-contraction"}
        assert all(m.exact for m in fp.matches)
    # with a multiply-add, XLA on CPU contracts to an FMA under jit; eager rounds the product
    fma = lambda x, y: x * y + 1.0  # noqa: E731
    eager = fingerprint(fma, (x, y), [np.asarray(fma(jnp.asarray(x), jnp.asarray(y)))])
    assert eager.best == "declared" and eager.exact and not by_name(eager)["fma-contraction"].exact
    assert "fma-contraction" not in by_name(eager)["declared"].same_as
    jit = fingerprint(fma, (x, y), [np.asarray(jax.jit(fma)(x, y))])
    assert jit.best in ("declared", "fma-contraction")  # whichever the CPU does: the closest
    assert jit.exact


def test_closest_when_nothing_is_exact_and_pytrees():
    fn = lambda d: {"a": d["x"] * 3, "b": (d["x"] + 1).astype(jnp.bfloat16)}  # noqa: E731
    d = {"x": np.linspace(-1, 1, 8).astype(np.float32)}
    out = jax.tree_util.tree_leaves(fn(d))
    off = [np.asarray(out[0]), np.asarray(out[1])]
    off[0] = off[0].copy()
    off[0][3] = np.nextafter(off[0][3], np.float32(np.inf))
    off[0][5] = np.nextafter(np.nextafter(off[0][5], np.float32(-np.inf)), np.float32(-np.inf))
    fp = fingerprint(fn, (d,), off)
    assert fp.best == "declared" and not fp.exact
    m = fp.matches[0]
    assert m.max_ulp == 2 and m.n_differ == 2 and m.mean_abs > 0
    # NaN against a number: no ULP distance; NaN against NaN and -0 vs +0 as documented
    nan = [np.asarray(out[0]).copy(), np.asarray(out[1])]
    nan[0][0] = np.nan
    m = fingerprint(fn, (d,), nan).matches[0]
    assert m.max_ulp is None and not m.exact
    z = lambda x: x * 0.0  # noqa: E731
    xs = np.array([-1.0, 1.0], np.float32)
    m = by_name(fingerprint(z, (xs,), [np.array([0.0, 0.0], np.float32)]))["declared"]
    assert not m.exact and m.max_ulp == 0 and m.n_differ == 1
    nans = lambda x: x / 0.0 * 0.0  # noqa: E731
    assert fingerprint(nans, (xs,), [np.array([np.nan, np.nan], np.float32)]).exact


def test_candidate_outputs_compared_in_observed_dtype():
    fn = lambda x: x * 0.3  # noqa: E731
    x = np.linspace(-2, 2, 16).astype(BF16)
    observed = np.asarray(fn(jnp.asarray(x)))
    assert observed.dtype == BF16
    fp = fingerprint(fn, (x,), [observed], candidates=(Semantics.ideal(), Semantics.declared()))
    # one op: the float64 ideal, rounded once to bf16 for the comparison, is the declared value
    assert fp.best == "f64" and fp.exact and by_name(fp)["declared"].exact
    assert by_name(fp)["f64"].same_as == ("declared",)
    with pytest.raises(ValueError):
        fingerprint(fn, (x,), [observed, observed])
    with pytest.raises(ValueError):
        fingerprint(fn, (x,), [observed[:3]])
