"""The trigger (localize/trigger.py): the predicate over an op's inputs that separates the elements where two
sides differ from those where they agree, found by a search over a general family, not a list of bugs; and
the formulations the fix search tries (explain/search/candidates.py), each the op's own math."""

import numpy as np
import pytest

from jaxparity.localize.trigger import align, find_trigger


def test_an_empty_interval_is_found_between_two_inputs():
    lo = np.array([0, 5, 2, 9, 1, 7, 3, 3], np.float32)
    hi = np.array([4, 1, 6, 2, 8, 0, 5, 1], np.float32)
    t = find_trigger([lo, hi], lo > hi)
    assert t.exact and t.predicate == "input 1 > input 2" and (t.hits, t.agreeing) == (4, 4)
    assert t.words() == "it differs on exactly the 4 elements where input 1 > input 2, and agrees on all 4 others"


def test_a_magnitude_threshold_is_found_by_one_pass_over_the_sorted_values():
    x = np.linspace(-100, 100, 21).astype(np.float32)
    t = find_trigger([x], np.abs(x) >= 88)
    assert t.exact and t.predicate == "|the input| ≥ 90"  # the first differing magnitude
    t = find_trigger([x], x >= 35)
    assert t.exact and t.predicate == "the input ≥ 40"


def test_indices_out_of_range_are_an_interval_whatever_the_shape_of_the_index_array():
    idx = np.array([[0], [3], [-1], [9], [2]], np.int32)  # a gather's index vectors, last axis
    differ = np.zeros((5, 4), bool)
    differ[[2, 3]] = True
    t = find_trigger([None, align(idx, (5, 4))], differ)
    assert t.exact and t.predicate == "input 2 is outside [0, 3]" and t.hits == 8


def test_non_finite_inputs_signs_and_exact_results_are_in_the_family():
    x = np.array([1, np.nan, 2, 3, np.nan, 5], np.float32)
    assert find_trigger([x], np.isnan(x)).predicate == "the input is NaN"
    a = np.array([-7, 7, -7, 5, 9], np.int32)
    b = np.array([2, -2, 3, 3, 4], np.int32)
    assert find_trigger([a, b], np.signbit(a) != np.signbit(b)).predicate == "input 1 and input 2 have opposite signs"
    exact = np.array([1e3, 3e9, -5e9, 7.0])
    t = find_trigger([None], np.abs(exact) > 2**31, exact=exact, out_dtype=np.dtype(np.int32))
    assert t.predicate == "the exact result is outside int32's range (it overflows)"


def test_a_predicate_that_does_not_separate_is_not_said():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200).astype(np.float32)
    assert find_trigger([x], rng.random(200) < 0.3) is None  # chance: nothing to say
    assert find_trigger([x], np.ones(200, bool)) is None  # every element differs: nothing to separate
    near = x > 0.3
    near[:3] = ~near[:3]
    t = find_trigger([x], near)
    assert not t.exact and t.words().startswith("it differs mostly where the input ≥")


@pytest.mark.parametrize("primitive", ["logistic", "tanh", "log1p", "expm1", "round", "max", "min",
                                       "reduce_max", "reduce_min", "clamp", "rem", "integer_pow", "pow"])
def test_each_formulation_computes_the_ops_own_math(primitive):
    """Every formulation the fix search tries as "the same math" gives JAX's values on ordinary inputs, within a
    math library's few ULP: a verified formulation changes how the op is computed, not what it means."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from jaxparity.explain.mechanism.op_rules import MATH_LIBRARY_ULP
    from jaxparity.explain.search.candidates import FORMULATIONS
    from jaxparity.metrics import ulp_distance

    rng = np.random.default_rng(1)
    x = rng.uniform(-6, 6, 64).astype(np.float32)
    y = rng.uniform(0.5, 3, 64).astype(np.float32)
    calls = {
        "logistic": (jax.nn.sigmoid, (x,)), "tanh": (jnp.tanh, (x,)), "log1p": (jnp.log1p, (np.r_[np.abs(x[:56]), 1e-10, -1e-9, 3e-8, 0.5, -0.5, 1e-3, 7e-6, 2.0].astype(np.float32),)),
        "expm1": (jnp.expm1, (np.r_[x[:56], 1e-10, -1e-9, 3e-8, 0.5, -0.5, 1e-3, -7e-6, 80.0].astype(np.float32),)),
        "round": (lambda a: lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN), (np.round(x * 4) / 4,)), "max": (jnp.maximum, (x, y)), "min": (jnp.minimum, (x, y)),
        "reduce_max": (lambda a: jnp.max(a, axis=0), (x.reshape(8, 8),)),
        "reduce_min": (lambda a: jnp.min(a, axis=0), (x.reshape(8, 8),)),
        "clamp": (lambda a: lax.clamp(np.float32(-1), a, np.float32(2)), (x,)), "rem": (lax.rem, (x, y)),
        "integer_pow": (lambda a: a ** 3, (x,)), "pow": (lambda a, b: a ** b, (y, x / 2)),
    }
    fn, args = calls[primitive]
    jaxpr = jax.make_jaxpr(fn)(*args)
    eqn = next(e for e in jaxpr.eqns if e.primitive.name == primitive)
    env = {}

    def read(v):
        return v.val if hasattr(v, "val") else env[v]

    for i, v in enumerate(jaxpr.jaxpr.invars):
        env[v] = jnp.asarray(args[i])
    for e in jaxpr.eqns:
        out = e.primitive.bind(*[read(v) for v in e.invars], **e.params)
        if e is eqn:
            ins = [read(v) for v in e.invars]
            want = np.asarray(out)
        for v, o in zip(e.outvars, out if e.primitive.multiple_results else [out]):
            env[v] = o
    for name, _code, rewrite, _only_on in FORMULATIONS[primitive]:
        got = np.asarray(rewrite(eqn, *ins)).astype(want.dtype)
        u = ulp_distance(got, want)
        assert got.shape == want.shape and ((u >= 0) & (u <= MATH_LIBRARY_ULP)).all(), (name, int(u.max()))


def test_no_threshold_is_drawn_around_one_or_two_elements():
    """All but one element differ (a device's arithmetic everywhere): a cut that isolates the one that agrees
    says nothing about the others. A named property still counts however few it selects."""
    x = np.linspace(-3, 3, 200).astype(np.float32)
    differ = np.ones(200, bool)
    differ[57] = False
    assert find_trigger([x], differ) is None
    y = x.copy()
    y[57] = np.nan
    t = find_trigger([y], ~differ)
    assert t is not None and t.exact and t.predicate == "the input is NaN"


def test_a_formulation_said_to_differ_only_on_special_values_is_the_op_elsewhere():
    """``Candidate.only_on``: where its test finds none of the special values it names (NaN, two zeros, bounds
    out of order), the formulation gives the primitive's values bit for bit, so the search owes it no re-run;
    where it finds one, the formulation can compute otherwise, and the test says so."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from jaxparity.explain.search.candidates import FORMULATIONS

    rng = np.random.default_rng(2)
    a = rng.uniform(-3, 3, 256).astype(np.float32)
    b = rng.uniform(-3, 3, 256).astype(np.float32)
    lo, hi = np.full(256, -1, np.float32), np.full(256, 2, np.float32)
    ordinary = {"max": [a, b], "min": [a, b], "reduce_max": [a.reshape(16, 16)], "reduce_min": [a.reshape(16, 16)],
                "clamp": [lo, a + 0.01, hi]}
    pair = [np.r_[a[:-2], np.nan, -0.0].astype(np.float32), np.r_[b[:-2], 1.0, 0.0].astype(np.float32)]
    special = {"max": pair, "min": pair, "reduce_max": [np.r_[a[:-1], np.nan].reshape(16, 16)],
               "reduce_min": [np.r_[a[:-1], np.nan].reshape(16, 16)], "clamp": [hi, a, lo]}
    calls = {"max": lax.max, "min": lax.min, "reduce_max": lambda x: jnp.max(x, axis=0),
             "reduce_min": lambda x: jnp.min(x, axis=0), "clamp": lax.clamp}
    checked = 0
    for primitive, fn in calls.items():
        for name, _code, rewrite, only_on in FORMULATIONS[primitive]:
            assert only_on is not None, (primitive, name)
            words, test = only_on
            assert test([np.asarray(x) for x in special[primitive]]), (name, words)
            ins = [np.asarray(x) for x in ordinary[primitive]]
            assert not test(ins), (name, words)
            eqn = next(e for e in jax.make_jaxpr(fn)(*ins).eqns if e.primitive.name == primitive)
            want = np.asarray(eqn.primitive.bind(*map(jnp.asarray, ins), **eqn.params))
            got = np.asarray(rewrite(eqn, *map(jnp.asarray, ins))).astype(want.dtype)
            assert got.tobytes() == want.tobytes(), name
            checked += 1
    assert checked == 7


def test_an_interval_of_one_value_is_said_as_that_value():
    x = np.array([1, 1, 1, 2, 0, 5, 1, -3], np.float32)
    t = find_trigger([x], x != 1)
    assert t.exact and "outside [1, 1]" not in t.predicate, t.predicate
