"""The tflite path: jax2tf SavedModel -> TFLiteConverter -> LiteRT interpreter.

In this stack float32 models convert with the default built-in ops (the converter legalizes the
XlaCallModule's StableHLO itself) and run, as jit does, within float32's error bound of the f64 ideal
(tests/error_bounds.py); bfloat16 models do not convert, and the path says so in the converter's own words.
"""

import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import error_bounds as eb
import jaxparity
from jaxparity.case import load_case
from jaxparity.paths import PathError, PathOptionError
from jaxparity.paths.tflite import TFLitePath


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    monkeypatch.setitem(jaxparity.paths.PATHS, "tflite", TFLitePath)


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(nn.relu(nn.Dense(16)(x)))


def _mlp():
    model = MLP()
    x = jax.random.normal(jax.random.key(0), (3, 8))
    return model.apply, (model.init(jax.random.key(1), x), x)


def _mlp_bound(args) -> eb.Bounded:
    """The MLP's f64 value and the error bound of any float32 evaluation: Dense(16), a sum of 9 terms
    (8 products and the bias) within gamma_9 of sum|terms|; relu (1-Lipschitz, exact); Dense(4), 17 terms
    on the rounded hidden values (their error carried through |W|) within gamma_17."""
    variables, x = args
    p = variables["params"]  # Dense(4) is constructed first, so it is Dense_0; Dense(16) is Dense_1
    assert p["Dense_1"]["kernel"].shape == (8, 16) and p["Dense_0"]["kernel"].shape == (16, 4)
    return eb.flax_dense(eb.relu(eb.flax_dense(eb.Bounded.exact(x), p["Dense_1"])), p["Dense_0"])


@pytest.mark.slow
def test_a_float32_mlp_converts_and_runs_within_the_error_bound_as_jit_does(tmp_path):
    fn, args = _mlp()
    kept = tmp_path / "mlp.tflite"
    path = TFLitePath({"keep": str(kept)})
    got = np.asarray(path.run(fn, args))
    jit = np.asarray(jax.jit(fn)(*args))
    assert got.dtype == np.float32 and got.shape == jit.shape
    # Kernels sum in their own order (XNNPACK's and XLA's follow the CPU's vector width): no ULP count
    # holds on every CPU, the error bound of the computation does, for both and between them.
    ideal = _mlp_bound(args)
    eb.assert_within(got, ideal.value, ideal.err, "tflite vs the f64 ideal")
    eb.assert_within(jit, ideal.value, ideal.err, "jit vs the f64 ideal")
    eb.assert_within(got, jit, 2 * ideal.err, "tflite vs jit")
    assert kept.stat().st_size > 0
    notes = " ".join(path.notes)
    assert "TFLiteConverter (built-in ops)" in notes and "TensorFlow 2.21.0" in notes
    assert "LiteRT 2.3.0" in notes and "xnnpack" in notes


@pytest.mark.slow
def test_every_kernel_choice_is_as_near_the_float64_ideal_as_jit():
    fn, args = _mlp()
    specs = ["tflite", "tflite:kernels=builtin", "tflite:kernels=reference,threads=1", "tflite:optimizations=default"]
    result = jaxparity.compare(fn, *args, paths=["eager", "jit", *specs])
    runs = result._source["runs"]
    (_, ideal), = runs["f64"].outputs
    bound = _mlp_bound(args)
    np.testing.assert_allclose(ideal, bound.value, rtol=1e-12, atol=1e-300)  # the bound is of this computation
    # "as near as jit" in the only sense that holds on every CPU: every path, jit included, within the
    # float32 error bound of the computation (optimizations=default quantizes no tensor this small).
    for spec in ["jit", *specs]:
        p = result.path(spec)
        assert p.status == "ok", f"{spec}: {p.message}"
        (_, got), = runs[spec].outputs
        eb.assert_within(got, ideal, bound.err, spec)
        assert p.leaves[0].error_vs_f64.max_abs <= bound.err.max(), spec


@pytest.mark.slow
def test_integer_and_boolean_outputs_and_scalars_keep_their_dtypes_and_shapes():
    def fn(x, n, b):
        return {"total": (x * 2.5).sum(), "positive": x.sum() > 0, "n": n * 2 + jnp.argmax(x), "not": ~b}

    x, n, b = jnp.arange(3.0), jnp.asarray([2**30, -(2**31)], jnp.int32), jnp.asarray([True, False])
    result = jaxparity.compare(fn, x, n, b, paths=["eager", "tflite"])
    assert result.path("tflite").verdict == "identical", result.path("tflite").message
    assert [(a.name, a.shape) for a in result.outputs] == [("out/n", (2,)), ("out/not", (2,)),
                                                          ("out/positive", ()), ("out/total", ())]


@pytest.mark.slow
def test_a_bfloat16_model_is_reported_in_the_converters_own_words(examples):
    case = load_case(str(examples / "conv_bf16.py"))
    with pytest.raises(PathError) as raised:
        TFLitePath().run(case.fn, case.args)
    message = str(raised.value)
    assert message.startswith("TFLite cannot convert this model: ")
    assert "failed to legalize operation 'tfl." in message and "explicitly marked illegal" in message
    assert "bfloat16" in message  # our hint: what the model computes in, and what converts instead

    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "tflite"])
    p = result.path("tflite")
    assert p.verdict == "error" and "TFLite cannot convert this model" in p.message
    assert not result.passed  # asked for and not run


def test_bad_options_are_refused_with_the_choices():
    with pytest.raises(PathOptionError, match="xnnpack, builtin, reference"):
        jaxparity.paths.make_path("tflite:kernels=gpu")
    with pytest.raises(PathOptionError, match="none or default"):
        jaxparity.paths.make_path("tflite:optimizations=int8")
    with pytest.raises(PathOptionError, match="positive integer"):
        jaxparity.paths.make_path("tflite:threads=0")
    with pytest.raises(PathOptionError, match="no option 'XLA_FLAGS'"):
        jaxparity.paths.make_path("tflite:XLA_FLAGS=--xla_cpu_enable_fast_math=true")
    assert jaxparity.paths.make_path("tflite:keep=m.tflite,kernels=builtin,threads=2").spec == (
        "tflite:keep=m.tflite,kernels=builtin,threads=2"
    )


def test_without_litert_the_path_is_unavailable_and_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    reason = TFLitePath().unavailable_reason()
    assert reason and "pip install 'jaxparity[tflite]'" in reason and "ai-edge-litert" in reason
    result = jaxparity.compare(lambda x: x * 2, jnp.ones(3), paths=["eager", "jit", "tflite"])
    assert result.path("tflite").verdict == "unavailable" and result.path("jit").verdict == "identical"


def test_the_runtime_is_installed_here():
    assert TFLitePath().unavailable_reason() is None


@pytest.mark.slow
@pytest.mark.parametrize("factory", [
    "make_nnx_module",  # an NNX module as the argument: its Rngs' key crosses as key data
    "make_nnx_dropout_rngs",  # flax's NNX MNIST tutorial: Dropout(rngs=...) in eval mode
    "make_bilstm",  # flax's sst2 BiLSTM: nn.scan, flip_sequences
    "make_partitioned",  # LogicallyPartitioned parameter boxes
])
def test_real_flax_models_serve_and_convert_to_tflite_within_rounding_of_eager(factory):
    """Real linen and NNX models through the SavedModel and the TFLite converter: every path runs, and
    its values stay within rounding of eager's (not a wrong graph)."""
    import json

    from conftest import CASES, run_cli

    run = run_cli("compare", f"{CASES / 'frameworks.py'}:{factory}", "--paths", "eager,savedmodel,tflite",
                  "--json", "-")
    doc = json.loads(run.stdout)
    for spec in ("savedmodel", "tflite"):
        p = next(p for p in doc["paths"] if p["spec"] == spec)
        assert p["status"] == "ok", (spec, p["message"])
        worst = max(lf["diff"]["max_ulp"] for lf in p["leaves"])
        eager_noise = max(lf["baseline_error_vs_f64"]["max_ulp"] for lf in p["leaves"])
        assert worst <= max(64, 4 * eager_noise), (spec, worst, eager_noise)


def test_a_converter_error_at_a_library_line_is_traced_to_the_users_line():
    """The TFLite converter names the line where an op was created, inside flax for a flax helper
    (lm1b: "flax/linen/attention.py:910: error: failed to legalize operation 'tfl.not_equal'"); the
    user's own line that led there comes with it."""
    from flax import linen as nn

    from jaxparity.localize.program import flatten
    from jaxparity.localize.refusals import located_hint

    def fn(a, b):
        return nn.combine_masks(a, b, dtype=jnp.bfloat16)  # the user's line

    args = (jnp.ones((1, 1, 2, 2), bool), jnp.ones((1, 1, 2, 2), bool))
    inside = next(op for op in flatten(fn, args).ops if "flax" in (op.info.source or ""))
    message = f'{inside.info.source}:11: error: failed to legalize operation \'tfl.logical_and\''
    hint = located_hint(fn, args, message)
    assert hint is not None and hint.startswith(f"#{inside.info.index} {inside.info.primitive} at ")
    assert "test_tflite.py:" in hint and "flax" not in hint
    assert located_hint(fn, args, "error: no line named here") is None


def _conv(x, k):  # a library's line: the conv the model calls, through it
    return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def test_a_refusal_at_a_line_that_creates_no_op_of_its_kind_names_the_ops_created_there():
    """Keras's MobileNetV3 on TFLite: "keras/src/backend/jax/nn.py:762: failed to legalize 'tfl.transpose'"
    (TensorFlow lowers the bf16 convolution through transposes): no transpose is created at that line, so the
    ops that are, the first with its module and the count of the others, are named."""
    from jaxparity.localize.program import flatten
    from jaxparity.localize.refusals import line_hint, located_hint

    def fn(x, k1, k2):
        return _conv(_conv(x, k1), k2)

    args = (jnp.ones((1, 4, 4, 2), jnp.bfloat16), jnp.ones((3, 3, 2, 2), jnp.bfloat16),
            jnp.ones((3, 3, 2, 2), jnp.bfloat16))
    convs = [op.info for op in flatten(fn, args).ops if op.info.primitive == "conv_general_dilated"]
    message = f"{convs[0].source}:13: error: failed to legalize operation 'tfl.transpose' that was explicitly marked"
    assert located_hint(fn, args, message) is None  # no op of the kind named there
    hint = line_hint(fn, args, message)
    assert hint == f"{convs[0].source} creates #{convs[0].index} conv_general_dilated and 1 more op " \
                   "(conv_general_dilated)", hint
    assert line_hint(fn, args, "error: no line named here") is None


_GROUP = np.array([0, 1, 1, 2, 0, 2, 1, 0], np.int32)


def _grouped_loss(theta, y):
    return jnp.sum((theta[_GROUP] - y) ** 2)  # the gather whose gradient is a scatter-add


def test_a_kernel_the_interpreter_refuses_is_named_at_the_users_line():
    """The gradient of ``theta[group]`` converts to a STABLEHLO_SCATTER that LiteRT's interpreter cannot prepare
    ("Node number 3 (STABLEHLO_SCATTER) failed to prepare", issue 55): the verdict names the scatter-add, the line
    of the indexing that it is the gradient of, and how it came (transpose(jvp(...)))."""
    import inspect

    line = inspect.getsourcelines(_grouped_loss)[1] + 1
    result = jaxparity.compare(jax.grad(_grouped_loss), jnp.array([0.1, 0.2, 0.3], jnp.float32),
                               jnp.linspace(-1, 1, 8, dtype=jnp.float32), paths=["eager", "tflite"])
    v = next(v for v in result.verdicts if v.kind == "could not run")
    assert "STABLEHLO_SCATTER" in result.path("tflite").message
    at = next(n for n in v.notes if n.startswith("at "))
    assert at.startswith("at ") and f"test_tflite.py:{line} #" in at and " scatter-add in transpose(jvp(" in at, at
