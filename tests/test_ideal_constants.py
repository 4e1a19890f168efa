"""An honest f64 ideal (issue 39 item 3): constants the program holds rounded at trace time (``1/127.5`` and
``1/6`` as bfloat16 literals) are found with the short values they round, the ideal is re-run with them
replaced, and where that moves it by more than two paths' errors against it differ, neither is called
closer. Exact constants (0.5, 2.0, 1/8) are never reported."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxparity
from jaxparity.comparison import _leaf
from jaxparity.ideal import ideal_uncertainty, rounded_sites, rounding_interval, short_value
from jaxparity.interpreter import evaluate_jaxpr, trace
from jaxparity.metrics import Tolerance
from jaxparity.paths.reference import IDEAL_UNCERTAIN
from jaxparity.report.format import path_line

from conftest import CASES, valid_result
from planted_lines import planted_line

BF16 = np.dtype(ml_dtypes.bfloat16)
CASE = CASES / "ideal.py"


def _case(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location("ideal_cases", CASE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)()


def _held(v: float, dtype) -> float:
    return float(np.asarray(v).astype(dtype))


# ------------------------------------------------------------------------------------ short values
@pytest.mark.parametrize("written, dtype, short", [
    (1 / 6, BF16, "1/6"), (1 / 6, np.float16, "1/6"), (1 / 6, np.float32, "1/6"), (-1 / 3, BF16, "-1/3"),
    (0.1, np.float32, "0.1"), (1e-5, BF16, "1e-05"), (math.sqrt(2 / math.pi), BF16, "sqrt(2/pi)"),
    (1 / math.sqrt(2), np.float16, "1/sqrt(2)"), (2 / 255, np.float32, "2/255"), (10000.0, BF16, "10000"),
])
def test_a_rounded_constant_is_found_with_the_value_it_rounds(written, dtype, short):
    held = _held(written, dtype)
    assert held != written
    found = short_value(held, dtype)
    assert found is not None and found.text == short
    assert _held(found.value, dtype) == held  # it rounds to exactly the constant
    lo, hi = found.interval
    assert lo < written < hi and lo < held < hi


def test_which_value_was_meant_is_left_open_but_the_written_one_is_inside():
    """bfloat16(1/127.5) is a near-tie: 2/255 lies at the very edge of its interval, and simpler values
    (0.0079, 1/127) round to it too; the interval is kept so that the measurement covers 2/255."""
    held = _held(1 / 127.5, BF16)
    found = short_value(held, BF16)
    assert found is not None and "1/127" in (found.text, *found.alternatives)
    lo, hi = found.interval
    assert lo < 2 / 255 < hi
    assert (lo, hi) == rounding_interval(held, BF16)
    assert _held(np.nextafter(lo, -1), BF16) != held and _held(np.nextafter(hi, 2), BF16) != held


@pytest.mark.parametrize("dtype", [BF16, np.float16, np.float32])
def test_the_largest_finite_value_has_a_finite_interval(dtype):
    """finfo.min, a causal mask's fill (Hugging Face GPT-2 in bfloat16): beyond it lies infinity, but values
    round to it up to half a spacing further, where rounding overflows; no short value stands for it."""
    for big in (float(ml_dtypes.finfo(dtype).max), float(ml_dtypes.finfo(dtype).min)):
        lo, hi = rounding_interval(big, dtype)
        assert np.isfinite([lo, hi]).all() and lo < big < hi
        edge = hi if big > 0 else lo
        assert _held(big + (edge - big) / 2, dtype) == big and np.isinf(_held(edge + (edge - big), dtype))
        assert short_value(big, dtype) is None


def test_a_narrow_interval_is_written_with_the_digits_that_tell_its_ends_apart():
    """float32(0.001), diffrax's PIDController's rtol: the interval is 1e-10 wide, not '[0.001, 0.001]'."""
    from jaxparity.result import RoundedConstant

    held = _held(0.001, np.float32)
    found = short_value(held, np.float32)
    text = RoundedConstant(held, "float32", found.text, found.value, abs(held - 0.001) / 0.001,
                           found.interval).describe()
    interval = text.split("[", 1)[1].split("]", 1)[0].split(", ")
    assert len({interval[0], interval[1], text.split(" ", 1)[0]}) == 3, text
    assert "(0.00% from" not in text and "e-" in text.split("rounds to (", 1)[1], text


@pytest.mark.parametrize("dtype", [BF16, np.float16, np.float32])
@pytest.mark.parametrize("value", [0.5, 2.0, 0.125, 3.0, 6.0, 255.0, -1.0, 0.0, 0.375, float("inf")])
def test_exact_constants_say_nothing(value, dtype):
    assert short_value(value, dtype) is None


def test_float64_constants_say_nothing():
    assert short_value(1 / 6, np.float64) is None


# ---------------------------------------------------------------------------------------- the sites
def test_literals_of_the_program_are_found_with_the_users_line():
    fn, args = _case("make_mobilenet_block")
    closed, _ = trace(fn, *args)
    sites = rounded_sites(closed)
    assert {s.short.text for s in sites} >= {"1/6"}
    assert all(s.dtype == BF16 for s in sites)
    rescale = next(s for s in sites if s.value == _held(1 / 127.5, BF16))
    assert rescale.where.endswith(planted_line(CASE, "rescale"))
    sixth = next(s for s in sites if s.short.text == "1/6")
    assert sixth.where.endswith(planted_line(CASE, "sixth"))


def test_nested_jaxprs_and_closed_over_constants_are_searched():
    sixth = jnp.full((4,), 1 / 6, jnp.bfloat16)  # a closed-over const of one repeated value
    weights = jnp.asarray(np.random.default_rng(0).normal(size=(4,)), jnp.bfloat16)  # data: never reported

    @jax.jit
    def inner(x):
        return x * (1 / 3)

    def f(x):
        y = inner(x) * sixth * weights
        y = jax.lax.cond(y.sum() > 0, lambda v: v * 0.1, lambda v: v, y)
        return jax.lax.scan(lambda c, v: (c + v * (1 / 7), None), y, jnp.ones((3, 4), jnp.bfloat16))[0]

    closed, _ = trace(f, jnp.ones(4, jnp.bfloat16))
    shorts = sorted(s.short.text for s in rounded_sites(closed))
    assert shorts == ["0.1", "1/3", "1/6", "1/7"]


def test_exact_float32_program_holds_no_rounded_constant():
    fn, args = _case("make_exact_f32")
    closed, _ = trace(fn, *args)
    assert rounded_sites(closed) == []
    assert ideal_uncertainty(closed, jax.tree_util.tree_leaves(args), [np.zeros(32)], ["out"]) is None


# ------------------------------------------------------------------------------------- the ideal moved
def test_replaced_constants_give_the_float64_program():
    """The interpreter reads a replaced literal as given: with 2/255 in place of bfloat16's 0.007874 the ideal
    is the float64 program's own value, bit for bit."""
    fn, (x,) = _case("make_rescale")
    closed, _ = trace(fn, x)
    (site,) = rounded_sites(closed)
    out = evaluate_jaxpr(closed, [x], mode="f64", constants={site.key: np.float64(2 / 255)})[0]
    expected = np.asarray(x, np.float64) * (2 / 255) - 1
    np.testing.assert_array_equal(out, expected)
    held = evaluate_jaxpr(closed, [x], mode="f64")[0]
    assert np.abs(held - expected).max() > 0  # the rounded constant is another ideal


def test_the_measurement_brackets_the_float64_model():
    """The same block built in float64 (1/127.5 and 1/6 as written) differs from the f64 ideal by about what
    the measurement says the constants move it (the edge run stands in for the unknowable written value)."""
    fn, args = _case("make_mobilenet_block")
    closed, _ = trace(fn, *args)
    leaves = jax.tree_util.tree_leaves(args)
    ideal = evaluate_jaxpr(closed, leaves, mode="f64")
    u = ideal_uncertainty(closed, leaves, ideal, ["out"])
    assert u is not None and len(u.constants) == 2
    assert u.moved["out"] >= u.moved_to_short["out"] > 0

    (w1, w2), img = args
    with jax.enable_x64(True):
        as_f64 = lambda a: jnp.asarray(a, jnp.float64)  # noqa: E731
        h = (as_f64(img) * (1 / 127.5) - 1) @ as_f64(w1)
        h = h * (jax.nn.relu6(h + 3) * (1 / 6))
        written = np.asarray((h @ as_f64(w2)).sum(axis=-1))
    truth = float(np.abs(written - ideal[0]).max())
    assert 0.5 * truth <= u.moved["out"] <= 2 * truth


# --------------------------------------------------------------------------------------- the judgement
def _leaves(path_err: float, base_err: float, moved: float | None):
    ideal = {"out": np.zeros(4)}
    path = {"out": np.full(4, path_err, np.float32)}
    base = {"out": np.full(4, base_err, np.float32)}
    return _leaf("out", path, base, ideal, False, Tolerance(), None, True, moved)


def test_closer_is_withheld_only_where_the_ideal_moves_more():
    assert _leaves(0.1, 0.2, None).closer_to_f64 == "path"
    kept = _leaves(0.1, 0.2, 0.05)  # the ideal moves less than the errors differ: judged
    assert kept.closer_to_f64 == "path" and kept.ideal_uncertain_by is None
    withheld = _leaves(0.1, 0.2, 0.15)
    assert withheld.closer_to_f64 is None and withheld.ideal_uncertain_by == 0.15


def _bf16_leaf(path: list[float], base: list[float], ideal: list[float]):
    bf16 = ml_dtypes.bfloat16
    return _leaf("out", {"out": np.array(path, bf16)}, {"out": np.array(base, bf16)}, {"out": np.array(ideal)},
                 False, Tolerance(), None, True, None)


def test_closer_is_mixed_where_the_max_ulp_error_names_the_other_side():
    """The path is 3 ULP off at 1.0 (max abs 0.0234), the baseline 10 ULP off at 0.01 (6.1e-04): by max abs the
    baseline is closer, by ULP the path. Neither is called closer, and the line says which measure says what.
    A value near zero of the wrong sign (ULP distances past 2^8 in bfloat16) says nothing of accuracy."""
    ulp_1, ulp_001 = 2.0 ** -7, 2.0 ** -14  # bfloat16's ULP at 1.0 and at 0.01
    ideal = [1.0, float(np.array(0.01, ml_dtypes.bfloat16))]
    mixed = _bf16_leaf([1.0 + 3 * ulp_1, ideal[1]], [1.0, ideal[1] + 10 * ulp_001], ideal)
    assert (mixed.error_vs_f64.max_ulp, mixed.baseline_error_vs_f64.max_ulp) == (3, 10)
    assert mixed.closer_to_f64 == "mixed"
    agree = _bf16_leaf([1.0 + 3 * ulp_1, ideal[1]], [1.0 + 4 * ulp_1, ideal[1] + 10 * ulp_001], ideal)
    assert agree.closer_to_f64 == "path"
    near_zero = _bf16_leaf([1.0 + 3 * ulp_1, 0.0, 0.0], [1.0, 0.0, -1e-4], [1.0, 0.0, 1e-4])
    assert near_zero.baseline_error_vs_f64.max_ulp >= 2 ** 8 and near_zero.closer_to_f64 == "baseline"


def test_a_mixed_judgement_is_said_with_both_measures():
    import dataclasses

    ulp_1, ulp_001 = 2.0 ** -7, 2.0 ** -14
    ideal = [1.0, float(np.array(0.01, ml_dtypes.bfloat16))]
    leaf = _bf16_leaf([1.0 + 3 * ulp_1, ideal[1]], [1.0, ideal[1] + 10 * ulp_001], ideal)
    assert leaf.closer_to_f64 == "mixed"
    jit = jaxparity.compare(lambda x: x * 2, jnp.ones(2), paths=["eager", "jit"]).path("jit")
    line = " ".join(path_line(dataclasses.replace(jit, verdict="differs", leaves=(leaf,)), "eager").split())
    assert ("neither is called closer to the f64 ideal: eager's max abs error against it is the smaller (6.10e-04 "
            "against 0.0234), jit's max ULP error (3 against 10)") in line, line


def test_compare_withholds_closer_and_says_why():
    fn, args = _case("make_mobilenet_block")
    r = jaxparity.compare(fn, *args, paths=["eager", "jit", "f64"])
    f64 = r.path("f64")
    u = f64.ideal_uncertainty
    assert u is not None and {c.short for c in u.constants} >= {"1/6"}
    assert any(n.startswith(IDEAL_UNCERTAIN) and "bfloat16" in n for n in f64.notes)
    leaf = r.path("jit").leaves[0]
    err, base_err = leaf.error_vs_f64, leaf.baseline_error_vs_f64
    judged = (abs(err.max_abs - base_err.max_abs) if err.max_abs != base_err.max_abs
              else abs(err.mean_abs - base_err.mean_abs))
    if leaf.diff.bitwise_equal or judged == 0:
        pytest.skip("jit gives eager's values on this CPU: there is no judgement to withhold")
    if judged <= u.moved["out"]:
        assert leaf.closer_to_f64 is None and leaf.ideal_uncertain_by == u.moved["out"]
        assert "neither is called closer to the f64 ideal" in path_line(r.path("jit"), r.baseline)
    else:
        assert leaf.closer_to_f64 in ("path", "baseline", "mixed") and leaf.ideal_uncertain_by is None
    doc = json.loads(r.to_json())
    valid_result(doc)
    constants = next(p for p in doc["paths"] if p["spec"] == "f64")["ideal_uncertainty"]["constants"]
    assert {c["dtype"] for c in constants} == {"bfloat16"}


def test_exact_float32_program_reports_nothing():
    fn, args = _case("make_exact_f32")
    r = jaxparity.compare(fn, *args, paths=["eager", "jit", "f64"])
    f64 = r.path("f64")
    assert f64.ideal_uncertainty is None
    assert not any(n.startswith(IDEAL_UNCERTAIN) for n in f64.notes)
    assert all(lf.ideal_uncertain_by is None for p in r.paths for lf in p.leaves)


def test_the_triage_calls_no_side_farther_from_an_ideal_that_moves_more():
    """The baseline 200× farther from the f64 ideal than the path is its own error, not a noise floor; where
    the ideal itself moves more than the two differ (constants rounded at trace time), the triage says that
    neither is judged, and does not call the baseline's error its own."""
    from types import SimpleNamespace

    from jaxparity.report.brief import triage

    judged = triage(SimpleNamespace(spec="jit", leaves=[_leaves(0.001, 0.2, None)]), "eager")
    assert judged.startswith("a real divergence: eager is 200× farther from the f64 ideal than jit"), judged
    moving = triage(SimpleNamespace(spec="jit", leaves=[_leaves(0.001, 0.2, 0.25)]), "eager")
    assert "farther" not in moving and "which side is nearer the f64 ideal is not judged: the ideal itself " \
        "moves by up to 0.25" in moving, moving
    # the ideal moves less than the two errors differ (jit is judged nearer), but by as much as the baseline's
    # own distance from it: that distance is not called the baseline's error, nor 200x the path's
    near = triage(SimpleNamespace(spec="jit", leaves=[_leaves(0.001, 0.2, 0.15)]), "eager")
    assert "farther" not in near and "an error rather than rounding" not in near, near
    assert "the f64 ideal itself moves by up to 0.15" in near, near
    assert _leaves(0.001, 0.2, 0.15).closer_to_f64 == "path"  # the judgement itself stands


def test_a_baseline_that_keeps_the_declared_rounding_is_not_called_wrong():
    """A deep bf16 network's output is far from the f64 ideal by its own rounding, layer after layer. Where the
    path departs from the declared rounding at the carrying op and the baseline keeps it, the baseline's
    distance is not called an error of its own: the path's departure is named instead."""
    from types import SimpleNamespace

    from jaxparity.report.brief import triage

    ideal = {"out": np.full(4, 0.8)}
    leaf = _leaf("out", {"out": np.full(4, 0.875, np.float32)}, {"out": np.full(4, 0.87, np.float32)}, ideal, False,
                 Tolerance(), None, True, None)
    p = SimpleNamespace(spec="iree", leaves=[leaf])
    assert triage(p, "eager").startswith("a real divergence: eager is itself 0.07 from the f64 ideal")
    lead = SimpleNamespace(unrounded_by=lambda path, base: None, declared_side="baseline")
    said = triage(p, "eager", lead)
    assert "error rather than rounding" not in said and "iree departs from the declared rounding" in said, said


def _count_to_one(step):
    """Adds ``step`` until the sum reaches 1: in bfloat16 the running sum rounds, so the loop stops at another
    count than in float64 (0.01: 94 iterations against 100)."""
    return jax.lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + step, c[1] + 1),
                              (jnp.zeros((), step.dtype), jnp.int32(0)))


def test_an_ideal_that_takes_other_loop_decisions_is_no_noise_floor():
    """The diffrax neural ODE: its adaptive step-size controller accepts other steps in float64 (10 iterations
    of its while loop against 7), so every path is 18,032 ULP from the ideal. That distance is another
    computation's, not rounding: the f64 row says which loop, neither side is called closer, and the triage
    judges no difference against it."""
    from types import SimpleNamespace

    from jaxparity.paths.reference import IDEAL_OTHER_DECISIONS
    from jaxparity.report.brief import triage

    r = jaxparity.compare(_count_to_one, jnp.asarray(0.01, jnp.bfloat16), paths=["eager", "jit", "f64"])
    (note,) = [n for n in r.path("f64").notes if n.startswith(IDEAL_OTHER_DECISIONS)]
    assert "runs 100 iterations in float64 and 94 with each op rounded to its declared dtype" in note, note
    assert "test_ideal_constants.py:" in note
    leaves = r.path("jit").leaves
    assert all(lf.ideal_decides_otherwise and lf.closer_to_f64 is None for lf in leaves)
    valid_result(json.loads(r.to_json()))
    # a difference judged against that ideal: no floor
    ideal = {"out": np.full(4, 1.0)}
    leaf = _leaf("out", {"out": np.full(4, 0.95, np.float32)}, {"out": np.full(4, 0.9, np.float32)}, ideal, False,
                 Tolerance(), None, False, None, True)
    said = triage(SimpleNamespace(spec="jit", leaves=[leaf]), "eager")
    assert said.startswith("out differs from eager by up to") and "no noise floor to judge it by: the f64 ideal " \
        "takes other loop or branch decisions" in said, said
    # the same loop where every decision is the same (float32, 0.3: 4 iterations either way): nothing said
    same = jaxparity.compare(_count_to_one, jnp.asarray(0.3, jnp.float32), paths=["eager", "f64"])
    assert not any(n.startswith(IDEAL_OTHER_DECISIONS) for n in same.path("f64").notes)
    assert not any(lf.ideal_decides_otherwise for p in same.paths for lf in p.leaves)
    # explain's own output-level noise check takes no floor from it either
    from jaxparity.explain.triage import within_own_noise
    from jaxparity.localize.program import flatten

    step = jnp.asarray(0.01, jnp.bfloat16)
    outs = [np.asarray(x) for x in jax.tree_util.tree_leaves(_count_to_one(step))]
    program = flatten(_count_to_one, (step,))
    assert within_own_noise(outs, outs, program, [step])  # measured against the ideal alone: "noise"
    assert not within_own_noise(outs, outs, program, [step], _count_to_one, (step,))


def test_a_constant_used_at_several_lines_names_each():
    """A miniGPT's LayerNorm epsilon, 1e-6 in bfloat16, used by layer_norm1 at line 40 and layer_norm2 at 42: both
    lines are named, not the first alone."""
    from jaxparity.ideal.constants import _lines

    assert _lines(["m.py:40", "m.py:40", "m.py:42"]) == "m.py:40 and m.py:42"
    assert _lines(["m.py:1", "m.py:2", "m.py:3", "m.py:4"]) == "m.py:1, m.py:2 and 2 more lines"
    assert _lines([]) is None
