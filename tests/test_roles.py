"""The model stays the model: drawn input sets vary the data only, in every framework's own idiom;
comparisons that show nothing never pass; a model that fails on its own inputs and a misspelled
option are usage errors (exit 2) before any path runs."""

import json

import numpy as np
import pytest

from conftest import CASES, run_cli
from jaxparity.case import load_case
from jaxparity.execution.samples import draw_sample
from jaxparity.pytree import argument_leaves, host

FRAMEWORKS = str(CASES / "frameworks.py")
MODELS = {  # factory -> why its first argument is the model's
    "make_nnx_state": "an nnx.State",
    "make_nnx_module": "an NNX module (NNXNet)",
    "make_linen": "linen variables (batch_stats, params)",
    "make_linen_partial": "linen variables (batch_stats, params)",
    "make_equinox": "an Equinox module (EqxNet)",
    "make_plain": "named 'params' in the signature",
    "make_marked": "not marked jaxparity.data",
}


@pytest.mark.parametrize("factory", sorted(MODELS))
def test_a_drawn_sample_varies_the_data_and_keeps_every_variable(factory):
    case = load_case(f"{FRAMEWORKS}:{factory}")
    assert [(r.name, r.role, r.why) for r in case.roles][0] == ("arg0", "variables", MODELS[factory])
    example = {n: host(x) for n, x in argument_leaves(case.args)}
    drawn = draw_sample(example, 0, 0, case.data_leaves())
    assert set(drawn) == {"arg1"}, drawn.keys()  # the images only, never a weight or a BatchNorm statistic
    assert not np.array_equal(drawn["arg1"], example["arg1"])
    assert drawn["arg1"].min() >= 0  # pixels in [0, 1] stay non-negative
    out = np.asarray(case.fn(*case.args))
    assert np.isfinite(out).all()


def test_static_keyword_arguments_are_bound_and_said():
    case = load_case(f"{FRAMEWORKS}:make_linen")
    assert len(case.args) == 2 and case.notes == ("static, bound into the function: train=False",)
    partial = load_case(f"{FRAMEWORKS}:make_linen_partial")
    assert np.asarray(case.fn(*case.args)).tobytes() == np.asarray(partial.fn(*partial.args)).tobytes()


def _json(run):
    return json.loads(run.stdout)


@pytest.mark.slow
def test_samples_of_an_nnx_model_with_batchnorm_are_finite_and_say_what_they_kept():
    """flax's NNX CNN with BatchNorm: redrawing its running variance made every output NaN and the
    comparison a silent pass; now the variables stay and the outputs are numbers."""
    run = run_cli("compare", f"{FRAMEWORKS}:make_nnx_state", "--paths", "eager,jit", "--samples", "4", "--json", "-")
    doc = _json(run)
    assert run.returncode in (0, 1), run.stderr
    assert doc["degenerate"] == []
    assert "varying arg1; kept: arg0 (the model's variables: an nnx.State)" in doc["input_source"]
    eager = next(p for p in doc["paths"] if p["spec"] == "eager")
    assert eager["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("factory, kind, text", [
    ("make_all_nan", "non-finite", "out: 0 of 6 outputs finite (all NaN)"),
    ("make_zero_head", "constant", "out: every one of its 6 elements is 0"),
    ("make_zero_kernel_head", "independent of the inputs",
     "out: the same for each of the 2 examples of the batch, whose inputs differ (it does not depend on them)"),
    # bfloat16 is ml_dtypes' (numpy kind 'V'): all NaN and a zero head in bf16 were a silent pass
    ("make_all_nan_bf16", "non-finite", "out: 0 of 6 outputs finite (all NaN)"),
    ("make_zero_head_bf16", "constant", "out: every one of its 6 elements is 0"),
    ("make_all_nan_f16", "non-finite", "out: 0 of 6 outputs finite (all NaN)"),
])
def test_outputs_that_show_nothing_never_pass(factory, kind, text):
    run = run_cli("compare", f"{FRAMEWORKS}:{factory}", "--paths", "eager,jit", "--json", "-")
    doc = _json(run)
    assert run.returncode == 1, run.stderr  # jit agrees bit for bit, on nothing
    assert doc["passed"] is False
    assert doc["degenerate"] == [{"output": "out", "kind": kind, "text": text, "hides": True}]
    jit = next(p for p in doc["paths"] if p["spec"] == "jit")
    assert jit["verdict"] == "identical"
    shown = run_cli("compare", f"{FRAMEWORKS}:{factory}", "--paths", "eager,jit")
    assert f"✗ nothing shown: {text}; jit agrees with eager on outputs that show nothing of the model" in \
        " ".join(shown.stdout.split())


@pytest.mark.slow
@pytest.mark.parametrize("factory, text", [("make_all_nan_bf16", "out: 0 of 6 outputs finite (all NaN)"),
                                           ("make_zero_head_bf16", "out: every one of its 6 elements is 0")])
def test_bf16_outputs_that_show_nothing_never_pass_on_many_inputs(factory, text):
    run = run_cli("compare", f"{FRAMEWORKS}:{factory}", "--paths", "eager,jit", "--samples", "3", "--json", "-")
    doc = _json(run)
    assert run.returncode == 1, run.stderr
    assert doc["passed"] is False and doc["degenerate"][0]["text"] == text and doc["degenerate"][0]["hides"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float32"])
def test_every_float_width_that_shows_nothing_is_found(dtype):
    """bfloat16 and the float8 formats are ml_dtypes' (numpy kind 'V'): all NaN and constant found as in float32."""
    import ml_dtypes

    from jaxparity.degenerate import find_degenerate

    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    nan = find_degenerate([("out", np.full((2, 3), np.nan, dt))])
    assert [(d.kind, d.text, d.hides) for d in nan] == [("non-finite", "out: 0 of 6 outputs finite (all NaN)", True)]
    zero = find_degenerate([("out", np.zeros((2, 3), dt))])
    assert [(d.kind, d.text, d.hides) for d in zero] == [("constant", "out: every one of its 6 elements is 0", True)]
    same_rows = find_degenerate([("out", np.tile(np.arange(3).astype(dt), (2, 1)))], batch=2)
    assert [d.kind for d in same_rows] == ["independent of the inputs"]
    samples = [[("out", np.arange(3).astype(dt))]] * 2
    assert [d.kind for d in find_degenerate(samples[0], samples)] == ["independent of the inputs"]
    assert find_degenerate([("out", np.arange(6).reshape(2, 3).astype(dt))], batch=2) == ()  # shows the model
    assert find_degenerate([("out", np.zeros(16, ml_dtypes.int4))])[0].text == "out: every one of its 16 elements is 0"


def test_discrete_outputs_are_judged_by_whether_they_could_differ():
    """Equal bools or small integers are often the right answer: flagged only where enough elements coincide
    that chance cannot explain it (issue 37: lax.min([True, False], [False, False]) is [False, False])."""
    import jax

    import jaxparity
    from jaxparity.degenerate import find_degenerate

    result = jaxparity.compare(jax.lax.min, np.array([True, False]), np.array([False, False]),
                               paths=["eager", "declared"])
    assert result.passed and result.degenerate == ()
    assert find_degenerate([("out", np.zeros((2, 1), bool))], batch=2) == ()  # 1 bit: chance
    assert find_degenerate([("out", np.zeros(4, np.int32))]) == ()  # 3 labels alike: chance
    assert [d.kind for d in find_degenerate([("out", np.zeros((2, 16), bool))], batch=2)] == ["constant"]
    rows = np.tile(np.array([True, False] * 8), (2, 1))
    assert [d.kind for d in find_degenerate([("out", rows)], batch=2)] == ["independent of the inputs"]
    assert find_degenerate([("out", np.zeros((2, 16), np.float32))], batch=2)[0].kind == "constant"  # floats as before


def test_the_batch_of_bf16_data_is_seen():
    """A batch of bf16 images whose examples differ: an output the same for each of them is found."""
    import jax.numpy as jnp

    import jaxparity
    from jaxparity.case import Case
    from jaxparity.execution.runs import case_info

    x = jnp.asarray(np.arange(8).reshape(2, 4), jnp.bfloat16)
    info = case_info(Case(lambda x: x.sum(), (jaxparity.data(x),), "t", None, "example"))
    assert info.batch == 2


@pytest.mark.slow
def test_an_output_the_drawn_inputs_do_not_move_is_said():
    run = run_cli("compare", f"{FRAMEWORKS}:make_ignores_input", "--paths", "eager,jit", "--samples", "3",
                  "--json", "-")
    doc = _json(run)
    assert run.returncode == 1 and doc["degenerate"][0]["kind"] == "independent of the inputs", doc["degenerate"]
    single = _json(run_cli("compare", f"{FRAMEWORKS}:make_ignores_input", "--paths", "eager,jit", "--json", "-"))
    assert single["degenerate"] == []  # one input set cannot tell


@pytest.mark.slow
def test_a_model_that_fails_on_its_own_inputs_is_one_error_before_other_paths_run():
    run = run_cli("compare", f"{FRAMEWORKS}:make_broken", "--paths", "eager,jit,export,savedmodel")
    assert run.returncode == 2, run.stdout + run.stderr
    err = run.stderr
    assert "the function fails on its own inputs" in err and "(at frameworks.py:" in err
    assert err.count("dot_general") == 1  # said once
    assert "✗ jit" not in err and "savedmodel" not in err  # nothing else ran
    assert "choose another --baseline" not in run.stdout + err
    # two workers: the second starts its converted paths beside the baseline, and none of them is said
    lanes = run_cli("compare", f"{FRAMEWORKS}:make_broken", "--paths", "eager,jit,tflite,onnx", "--jobs", "2")
    assert lanes.returncode == 2 and lanes.stderr.count("the function fails on its own inputs") == 1, lanes.stderr
    assert "tflite" not in lanes.stderr and "onnx" not in lanes.stderr, lanes.stderr
    many = run_cli("compare", f"{FRAMEWORKS}:make_broken", "--paths", "eager,jit", "--samples", "3")
    assert many.returncode == 2 and many.stderr.count("the function fails on its own inputs") == 1, many.stderr
    assert "jit" not in many.stdout  # drawn sets too: one error, before any other path


def test_a_module_passed_as_none_says_why():
    """flax NNX's ``model.eval()`` changes the module in place and returns None: a factory returning it
    passes None, which is bound in as static; the error says so."""
    from jaxparity.execution.inprocess import plain_call_failure

    module = None  # what `return fn, (model.eval(), x)` hands over; bound in, the function sees it so
    said = plain_call_failure(lambda x: module(x), (1.0,), ("static, bound into the function: argument 0 = None",))
    assert said is not None and "argument 0 = None: a factory that returns `model.eval()` passes None" in said


@pytest.mark.parametrize("spec, near", [
    ("jit:xla_allow_excess_precison=false", "did you mean xla_allow_excess_precision?"),
    ("export:jax_enable_x65=true", "did you mean jax_enable_x64"),
])
def test_a_misspelled_option_is_a_usage_error_with_the_nearest_names(spec, near):
    run = run_cli("compare", f"{FRAMEWORKS}:make_plain", "--paths", spec)
    assert run.returncode == 2, run.stdout + run.stderr
    assert near in run.stderr
    assert "eager" not in run.stderr.split("error:")[0]  # before any path ran


def test_an_equinox_module_with_functions_among_its_leaves_is_an_argument_as_filter_jit_takes_it():
    """An Equinox module holds its activation functions and Python numbers beside its arrays: those are
    bound in, static, and the arrays are the inputs (arg0/...)."""
    import equinox as eqx
    import jax

    case = load_case(f"{FRAMEWORKS}:make_equinox_mlp")
    assert case.notes and "leaves that are not arrays" in case.notes[0] and "bound in, static" in case.notes[0]
    names = [n for n, _ in argument_leaves(case.args)]
    assert names[-1] == "arg1" and all(n.startswith("arg0/") for n in names[:-1])
    expected = jax.vmap(eqx.nn.MLP(8, 3, 16, 2, key=jax.random.key(0)))(np.ones((2, 8), np.float32))
    assert np.asarray(case.fn(*case.args)).tobytes() == np.asarray(expected).tobytes()


def test_integer_data_is_drawn_within_its_own_range_and_single_values_stay():
    example = {"arg0/params/w": np.ones(3, np.float32), "arg1": np.array([[3, 9, 4], [7, 5, 6]], np.int32),
               "arg2": np.array([8, 8], np.int32), "arg3": np.array([True, False])}
    drawn = draw_sample(example, 0, 1, {"arg1", "arg2", "arg3"})
    assert set(drawn) == {"arg1"}  # one length for both (8, 8) stays; booleans stay
    assert drawn["arg1"].dtype == np.int32 and 3 <= drawn["arg1"].min() and drawn["arg1"].max() <= 9


@pytest.mark.slow
def test_a_converter_that_meets_the_random_number_generator_says_so():
    """TFLite's 'failed to legalize tfl.mul' and jax2onnx's "Cannot interpret 'key<fry>'" are said with their
    reason: the program draws random numbers (the op, the user's line, the module), and what to do."""
    doc = _json(run_cli("compare", f"{FRAMEWORKS}:make_dropout_key_data", "--paths", "eager,tflite,onnx",
                        "--json", "-"))
    for spec in ("tflite", "onnx"):
        p = next(p for p in doc["paths"] if p["spec"] == spec)
        assert p["status"] == "error", p
        assert "Likely why: the program draws random numbers: #0 random_wrap (" in p["message"], p["message"]
        assert "frameworks.py:" in p["message"] and "Dropout(deterministic=True)" in p["message"]


def test_equinox_stateful_batchnorm_with_a_string_leaf_runs_as_the_user_calls_it():
    """Equinox's own stateful example: a BatchNorm's axis_name ("batch") is a leaf that is no array, and the
    Linear after it holds Nones; bound in, the arrays go back where they were (before, the Linear got None
    for its weight and the tool said the user's function fails on its own inputs)."""
    import importlib

    import jax

    import jaxparity

    case = load_case(str(CASES / "equinox_state.py"))
    fn, args = importlib.import_module("jaxparity_case_equinox_state").make()  # the module load_case imported
    expected = fn(*args)
    with jax.disable_jit():
        got = case.fn(*case.args)
    assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()
    r = jaxparity.compare(fn, *args, paths=["eager", "jit"])  # the Python API binds it the same way
    assert r.path("eager").status == "ok" and r.path("jit").status == "ok"
