"""The onnx paths: jax2onnx's model run by onnxruntime (``onnx``) and by onnx.reference (``onnx-ref``).

Checked here: bf16 crosses into and out of both runtimes bit for bit; onnxruntime's missing bf16
kernels are a clear error naming the op types; a converter that changes the precision is reported
as a finding (and a faithful model is not); every example either runs or fails clearly.
"""

import json
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import error_bounds as eb
import jaxparity
import jaxparity.paths
from jaxparity.case import load_case
from jaxparity.paths import PathOptionError, make_path
from jaxparity.paths.onnx import OnnxPath, OnnxReferencePath, convert, dtype_findings
from jaxparity.rounding import round_to_dtype

PATHS = ["eager", "jit", "onnx", "onnx-ref"]


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    monkeypatch.setitem(jaxparity.paths.PATHS, "onnx", OnnxPath)
    monkeypatch.setitem(jaxparity.paths.PATHS, "onnx-ref", OnnxReferencePath)


def _findings(path) -> list[str]:
    """The finding notes of a Path or of a PathResult."""
    return [n for n in path.notes if n.startswith("finding: ")]


def _f32_mlp():
    import flax.linen as nn

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.gelu(nn.Dense(64)(x))
            x = nn.relu(nn.Dense(64)(x))
            return nn.Dense(8)(x)

    x = jax.random.normal(jax.random.key(1), (4, 16))
    return MLP().apply, (MLP().init(jax.random.key(0), x), x)


# -- fast: availability and options (nothing is converted)

def test_a_missing_onnxruntime_makes_onnx_unavailable_and_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    reason = make_path("onnx").unavailable_reason()
    assert reason and "onnxruntime" in reason and "pip install 'jaxparity[onnx]'" in reason
    assert make_path("onnx-ref").unavailable_reason() is None  # onnx.reference needs no onnxruntime
    result = jaxparity.compare(lambda x: x + 1, jnp.ones(3), paths=["eager", "onnx"])
    assert result.path("onnx").verdict == "unavailable" and "jaxparity[onnx]" in result.path("onnx").message


def test_a_missing_converter_makes_both_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax2onnx", None)
    for spec in ("onnx", "onnx-ref"):
        assert "jax2onnx not installed" in make_path(spec).unavailable_reason()


def test_options_opset_and_keep_are_checked():
    assert make_path("onnx:opset=18").opset == 18 and make_path("onnx-ref").opset == 23
    with pytest.raises(PathOptionError, match="opset must be a whole number"):
        make_path("onnx:opset=latest")
    with pytest.raises(PathOptionError, match="has no option 'providers'"):
        make_path("onnx:providers=cuda")


# -- slow: conversions

@pytest.mark.slow
def test_bf16_inputs_and_outputs_cross_both_runtimes_bit_exactly(tmp_path):
    import onnx

    bits = np.array([0x3F81, 0x0001, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x4049, 0xC2F7], np.uint16)
    x = bits.view(ml_dtypes.bfloat16)  # 1.0078125, a subnormal, -0, inf, -inf, NaN, 3.14, -123.5
    ints = np.array([2**31 - 1, -(2**31)], np.int32)

    def fn(x, n):
        return {"same": x.reshape(2, 4), "wide": x.astype(jnp.float32), "n": n}

    for spec in ("onnx", "onnx-ref"):
        path = make_path(f"{spec}:keep={tmp_path / spec}.onnx")
        out = path.run(fn, (jnp.asarray(x), jnp.asarray(ints)))
        assert np.asarray(out["same"]).dtype == ml_dtypes.bfloat16, spec
        np.testing.assert_array_equal(np.asarray(out["same"]).view(np.uint16).ravel(), bits, err_msg=spec)
        np.testing.assert_array_equal(np.asarray(out["wide"]).view(np.uint32), x.astype(np.float32).view(np.uint32))
        np.testing.assert_array_equal(np.asarray(out["n"]), ints)  # an output that is an input: not a freed buffer
        kept = onnx.load(str(tmp_path / f"{spec}.onnx"))
        assert f"opset 23, {len(kept.graph.node)} node" in path.notes[0] and not _findings(path)


def test_an_output_that_comes_back_with_size_one_axes_is_reshaped_with_a_note():
    """jax2onnx gives ``jnp.sum(x, axis=())`` of a 0-d array (a log-density's last step in NumPyro) the shape
    (1,): both runtimes' output is reshaped to the declared () and the note says so, as for TFLite; an output
    with other elements stays an error naming both shapes."""
    from jaxparity.paths.base import PathError, as_declared

    def loss(x):
        return jnp.sum(x, axis=()) * 2.0

    for spec in ("onnx", "onnx-ref"):
        path = make_path(spec)
        out = path.run(loss, (jnp.float32(0.75),))
        assert np.shape(out) == () and float(out) == 1.5, spec
        assert "ONNX output 0 came back with shape (1,) where the function returns (): reshaped" in path.notes, spec
    notes: list[str] = []
    assert as_declared(np.ones((1, 3, 1)), jax.ShapeDtypeStruct((3,), np.float32), "out", notes).shape == (3,)
    with pytest.raises(PathError, match=r"out has shape \(2, 3\) where the function returns \(3, 2\)"):
        as_declared(np.ones((2, 3)), jax.ShapeDtypeStruct((3, 2), np.float32), "out", [])


@pytest.mark.slow
def test_seed_case_onnxruntime_has_no_bf16_conv_and_the_reference_evaluator_equals_eager_bit_for_bit(examples):
    case = load_case(str(examples / "conv_bf16.py"))
    result = jaxparity.compare(case.fn, *case.args, paths=PATHS)
    ort = result.path("onnx")
    assert ort.verdict == "error"
    assert ort.message == ("onnxruntime's CPU provider has no bfloat16 kernel for Conv (NOT_IMPLEMENTED); "
                           "the onnx-ref path runs the same model")
    ref = result.path("onnx-ref")
    assert ref.verdict == "identical", ref.message
    assert all(leaf.diff.bitwise_equal for leaf in ref.leaves)
    assert not _findings(ref)  # jax2onnx keeps the seed's bf16 conv and f32 residual add
    assert any("opset 23" in n for n in ref.notes) and any("ReferenceEvaluator" in n for n in ref.notes)


@pytest.mark.slow
def test_a_bf16_matmul_is_named_in_the_error_and_a_faithful_bf16_model_has_no_finding():
    x = jnp.linspace(-2, 2, 12, dtype=jnp.bfloat16).reshape(3, 4)
    w = jnp.linspace(1, -1, 8, dtype=jnp.bfloat16).reshape(4, 2)
    result = jaxparity.compare(lambda x, w: x @ w, x, w, paths=PATHS)
    assert result.path("onnx").verdict == "error"
    assert "no bfloat16 kernel for Gemm (NOT_IMPLEMENTED)" in result.path("onnx").message  # jax2onnx: 2-D dot -> Gemm
    ref = result.path("onnx-ref")
    assert ref.status == "ok" and not _findings(ref), ref.notes


def _f32_mlp_bound(args) -> eb.Bounded:
    """The f64 value of _f32_mlp and the error bound of any float32 evaluation (tests/error_bounds.py):
    Dense(64) on 16 inputs (gamma_17), gelu's tanh form (1.13-Lipschitz, its own roundings and LIB_ULP
    for tanh), Dense(64) (gamma_65, the hidden errors carried through |W|), relu, Dense(8) (gamma_65)."""
    variables, x = args
    p = variables["params"]
    h = eb.gelu_tanh(eb.flax_dense(eb.Bounded.exact(x), p["Dense_0"]))
    h = eb.relu(eb.flax_dense(h, p["Dense_1"]))
    return eb.flax_dense(h, p["Dense_2"])


@pytest.mark.slow
def test_f32_flax_mlp_runs_on_both_within_the_error_bound_as_jit_does_and_has_no_finding():
    fn, args = _f32_mlp()
    result = jaxparity.compare(fn, *args, paths=["jit", "onnx", "onnx-ref"], baseline="jit")
    runs, bound = result._source["runs"], _f32_mlp_bound(args)
    (_, ideal), = runs["f64"].outputs
    # the bound is of this computation (gelu's constants are float32 literals in the program, exact in numpy here)
    np.testing.assert_allclose(ideal, bound.value, rtol=1e-6)
    (_, jit), = runs["jit"].outputs
    eb.assert_within(jit, ideal, bound.err, "jit vs the f64 ideal")
    for spec in ("onnx", "onnx-ref"):
        p = result.path(spec)
        assert p.status == "ok", p.message
        assert not _findings(p), p.notes
        (leaf,) = p.leaves
        assert leaf.dtype == "float32", (spec, leaf.dtype)
        # Each runtime sums in its own order (onnxruntime's MLAS kernels follow the CPU's vector width;
        # measured on one CPU: 16 and 48 ULP from jit, f64 34 ULP from it), so no ULP count is asserted:
        # within the bound of the f64 ideal, and within the sum of both bounds of jit.
        (_, got), = runs[spec].outputs
        eb.assert_within(got, ideal, bound.err, f"{spec} vs the f64 ideal")
        eb.assert_within(got, jit, 2 * bound.err, f"{spec} vs jit")


@pytest.mark.slow
def test_bf16_flax_dense_that_the_converter_computes_in_f32_is_a_finding(examples):
    case = load_case(str(examples / "mlp_bf16.py"))
    result = jaxparity.compare(case.fn, *case.args, paths=PATHS)
    for spec in ("onnx", "onnx-ref"):
        p = result.path(spec)
        assert p.status == "ok", p.message
        assert [leaf.dtype for leaf in p.leaves] == ["bfloat16"]  # rounded back to the declared dtype
        assert "finding: the ONNX model computes Gemm (3 ops) in float32 where the program declares bfloat16 " \
               "dot_general (3 ops): the converter changed the precision" in p.notes, p.notes
        assert any(n.startswith("finding: output out is float32") and "rounds it once" in n for n in p.notes)
    # The bf16 output is the model's f32 output rounded once to nearest even, bit for bit.
    model = convert(case.fn, case.args)
    from onnx.reference import ReferenceEvaluator

    feeds = {v.name: np.asarray(x) for v, x in zip(model.graph.input, jax.tree_util.tree_leaves(case.args))}
    (raw,) = ReferenceEvaluator(model).run(None, feeds)
    assert raw.dtype == np.float32
    out = np.asarray(make_path("onnx-ref").run(case.fn, case.args))
    np.testing.assert_array_equal(out.view(np.uint16), round_to_dtype(raw, ml_dtypes.bfloat16).view(np.uint16))


@pytest.mark.slow
def test_dtype_findings_catch_a_model_that_computes_in_another_precision():
    """A hand-built model (Cast to f32, MatMul, Cast back) for a bf16 matmul: found, whatever the converter."""
    import onnx
    from onnx import TensorProto, helper

    def fn(x, w):
        return x @ w

    args = (jnp.ones((3, 4), jnp.bfloat16), jnp.ones((4, 2), jnp.bfloat16))
    assert dtype_findings(convert(fn, args), fn, args) == []  # jax2onnx keeps this matmul in bf16
    bf16 = TensorProto.BFLOAT16
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["w"], ["w32"], to=TensorProto.FLOAT),
         helper.make_node("MatMul", ["x32", "w32"], ["y32"]),
         helper.make_node("Cast", ["y32"], ["y"], to=bf16)],
        "wide", [helper.make_tensor_value_info("x", bf16, [3, 4]), helper.make_tensor_value_info("w", bf16, [4, 2])],
        [helper.make_tensor_value_info("y", bf16, [3, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    onnx.checker.check_model(model)
    assert dtype_findings(model, fn, args) == [
        "the ONNX model computes MatMul (1 op) in float32 where the program declares bfloat16 dot_general (1 op): "
        "the converter changed the precision"]
    narrow = helper.make_graph(graph.node[:3], "io", graph.input, [helper.make_tensor_value_info("y32", 1, [3, 2])])
    assert "output out is float32 in the ONNX model where the program declares bfloat16" in dtype_findings(
        helper.make_model(narrow, opset_imports=[helper.make_opsetid("", 23)]), fn, args)[0]


@pytest.mark.slow
def test_a_prng_key_input_is_refused_with_what_to_do_instead():
    result = jaxparity.compare(lambda k, x: x + jax.random.normal(k, x.shape), jax.random.key(0), jnp.ones(3),
                               paths=["eager", "onnx-ref"])
    p = result.path("onnx-ref")
    assert p.verdict == "error" and "input arg0 is a PRNG key (key<fry>) the program draws from" in p.message, p.message
    assert "pass the random values in as an input" in p.message


@pytest.mark.slow
def test_an_op_the_converter_cannot_take_is_named_with_the_users_line_and_the_dtype():
    """flax's nn.max_pool in bfloat16: jax2onnx's MaxPool plugin fails on the call as written and its
    reduce_window_max converter takes no bfloat16; the error names the op, the user's line and what to do."""
    import flax.linen as nn

    x = np.random.default_rng(0).standard_normal((1, 8, 8, 4)).astype(jnp.bfloat16)
    result = jaxparity.compare(lambda x: nn.max_pool(x, (2, 2), strides=(2, 2)), x, paths=["eager", "onnx-ref"])
    p = result.path("onnx-ref")
    assert p.verdict == "error", p.message
    assert "cannot convert #0 reduce_window_max at " in p.message and "test_onnx.py:" in p.message, p.message
    assert "(bfloat16[1,8,8,4])" in p.message and "convert a float32 version of it" in p.message


# What each path gives on each example (jax2onnx 0.17.1, onnxruntime 1.31.1): it runs ("ok"), or it
# fails with a PathError whose message contains the given text.
EXPECTED = {
    "conv_bf16.py": {"onnx": "no bfloat16 kernel for Conv (NOT_IMPLEMENTED)", "onnx-ref": "ok"},
    "conv_bf16.py:make_report_input": {"onnx": "no bfloat16 kernel for Conv (NOT_IMPLEMENTED)", "onnx-ref": "ok"},
    "mlp_bf16.py": {"onnx": "ok", "onnx-ref": "ok"},
    "cnn_bf16.py": {"onnx": "no bfloat16 kernel for AveragePool, Conv, Gemm, MaxPool, Relu (NOT_IMPLEMENTED)",
                    "onnx-ref": "ok"},
    # jax2onnx writes the attention's einsums as bf16 Einsum nodes, which the ONNX spec does not allow: the
    # converter's fault, on both runtimes (onnxruntime refused the graph and onnx-ref ran it before).
    "transformer_bf16.py": {"onnx": "the converter's fault: jax2onnx 0.17.1 wrote an ONNX model that ONNX's checker "
                                    "rejects", "onnx-ref": "the converter's fault: jax2onnx 0.17.1"},
}
FINDINGS = {"mlp_bf16.py": "Gemm (3 ops) in float32", "transformer_bf16.py": "Gemm (10 ops) in float32"}


@pytest.mark.slow
@pytest.mark.parametrize("spec", EXPECTED)
def test_every_example_runs_or_fails_clearly(examples, spec):
    case = load_case(str(examples / spec))
    result = jaxparity.compare(case.fn, *case.args, paths=PATHS)
    for name, expected in EXPECTED[spec].items():
        p = result.path(name)
        if expected == "ok":
            assert p.status == "ok", f"{name}: {p.message}"
            assert all(np.isfinite(leaf.error_vs_f64.max_abs) for leaf in p.leaves)
        else:
            assert p.verdict == "error" and expected in p.message, f"{name}: {p.message}"
            assert "Traceback" not in p.message and "/onnxruntime_src/" not in p.message
        found = _findings(p) if p.status == "ok" else [ln for ln in p.message.splitlines() if ln.startswith("finding")]
        if spec in FINDINGS:  # also on an error: the findings follow its message
            assert any(FINDINGS[spec] in f for f in found), (name, found)
        else:
            assert not found, (name, found)


def test_converting_leaves_jax_numpy_as_jax_defines_it():
    """jax2onnx replaces jnp.cumsum process-wide with a wrapper that rejects jnp.cumsum(x, 1); after
    the onnx path ran, the user's jnp must be JAX's again (and the path must still convert cumsum)."""
    import jax.numpy as jnp

    x = jnp.arange(6.0).reshape(2, 3)
    result = jaxparity.compare(lambda x: jnp.cumsum(x, axis=1), x, paths=["eager", "onnx"])
    assert result.path("onnx").status == "ok", result.path("onnx").message
    np.testing.assert_array_equal(np.asarray(jnp.cumsum(x, 1)), np.cumsum(np.asarray(x), 1))


@pytest.mark.slow
@pytest.mark.parametrize("factory, replayed", [
    ("make_nnx_dropout_rngs", "got an unexpected keyword argument 'rngs'"),  # flax's NNX MNIST tutorial
    ("make_bilstm", "Shapes must be 1D sequences"),  # flax's sst2 BiLSTM: jnp.shape patched inside nn.scan
    ("make_partitioned", None),  # boxed parameters: unboxed first
])
def test_real_flax_models_jax2onnx_cannot_take_as_written_convert_and_agree(factory, replayed):
    """jax2onnx patches flax and jax.numpy while it traces; calls that miss those patches fail as written. The
    program as JAX traced it, replayed primitive by primitive (a whole-slice gather index and an N-D
    reduce_window rewritten), converts, and onnxruntime's values stay within rounding of eager's."""
    from conftest import CASES, run_cli

    run = run_cli("compare", f"{CASES / 'frameworks.py'}:{factory}", "--paths", "eager,onnx", "--json", "-")
    doc = json.loads(run.stdout)
    p = next(p for p in doc["paths"] if p["spec"] == "onnx")
    assert p["status"] == "ok", p["message"]
    worst = max(lf["diff"]["max_ulp"] for lf in p["leaves"])
    eager_noise = max(lf["baseline_error_vs_f64"]["max_ulp"] for lf in p["leaves"])
    assert worst <= max(64, 4 * eager_noise), (worst, eager_noise)  # rounding, not a wrong graph
    said = " ".join(p["notes"])
    if replayed:
        assert "converted from the function's jaxpr, primitive by primitive" in said and replayed in said, said
    else:
        assert "jaxpr" not in said, said


def test_a_scan_whose_steps_emit_matrices_runs_on_onnx_reference_stacked_as_onnxruntime_stacks_it():
    """jax2onnx makes lax.scan an ONNX Loop. onnx.reference 1.23 joins a Loop's (8, 4) step outputs with
    np.vstack into (24, 4), where onnxruntime and shape inference give (3, 8, 4); the Transpose after it
    then fails ("Inconsistent permutation"). onnx-ref runs it with the outputs stacked, and says so."""
    def rnn(h0, xs, w):
        def step(h, x):
            h = jnp.tanh(x @ w + h)
            return h, h
        return jnp.swapaxes(jax.lax.scan(step, h0, xs)[1], 0, 1)  # (batch, time, features)

    rng = np.random.default_rng(0)
    args = (jnp.zeros((8, 4), jnp.float32), jnp.asarray(rng.standard_normal((3, 8, 4)), jnp.float32),
            jnp.asarray(rng.standard_normal((4, 4)) / 2, jnp.float32))
    result = jaxparity.compare(rnn, *args, paths=["jit", "onnx", "onnx-ref"], baseline="jit")
    ort, ref = result.path("onnx"), result.path("onnx-ref")
    assert ort.status == "ok" and ref.status == "ok", ref.message
    assert any("joins a Loop's scan outputs with np.vstack" in n and "(8, 4)" in n for n in ref.notes)
    assert not any("np.vstack" in n for n in ort.notes)
    outs = {p: np.asarray(result._source["runs"][p].outputs[0][1]) for p in ("jit", "onnx", "onnx-ref")}
    assert outs["onnx-ref"].shape == (8, 3, 4)
    # Each element within a few float32 ULP of jit's, as onnxruntime's are: the steps stacked in order.
    for p in ("onnx", "onnx-ref"):
        assert np.max(np.abs(outs[p] - outs["jit"])) < 1e-5, p


def test_plugins_for_a_library_the_program_does_not_use_are_imported_only_once_it_is():
    """jax2onnx's Equinox plugins build example modules when imported (seconds of compiles): a program without
    Equinox converts without them, to the same model as with every plugin; an Equinox model converted after
    Equinox is imported gets them. In a fresh process: this one may have imported Equinox already."""
    import subprocess

    script = """
import hashlib, sys
import jax.numpy as jnp, numpy as np
from jaxparity.paths import onnx_plugins
from jaxparity.paths.onnx import _convert

def digest(fn, *args):
    return hashlib.sha256(_convert(fn, args).SerializeToString()).hexdigest()

f = lambda x: jnp.tanh(x @ x.T).sum(0)
x = np.ones((3, 4), np.float32)
if sys.argv[1] == "all":
    onnx_plugins.load = lambda: None  # jax2onnx's own import_all_plugins
print(digest(f, x), "equinox" in sys.modules, onnx_plugins.left_out().get("equinox", 0) > 0)
import equinox as eqx, jax
lin = eqx.nn.Linear(4, 2, key=jax.random.PRNGKey(0))
print(_convert(lambda v: jax.vmap(lin)(v), (x,)).graph.node[0].op_type != "", onnx_plugins.left_out().get("equinox", 0))
"""
    runs = {how: subprocess.run([sys.executable, "-c", script, how], capture_output=True, text=True, timeout=300)
            for how in ("all", "used")}
    for how, run in runs.items():
        assert run.returncode == 0, (how, run.stderr[-2000:])
    (all_digest, *_), _ = [line.split() for line in runs["all"].stdout.splitlines()[-2:]]
    (digest, had_equinox, left_out), (converted, still_left_out) = [
        line.split() for line in runs["used"].stdout.splitlines()[-2:]]
    assert digest == all_digest  # the same model without the Equinox plugins
    assert had_equinox == "False" and left_out == "True"
    assert converted == "True" and still_left_out == "0"  # imported once Equinox was


def test_the_converters_connectivity_check_is_answered_by_the_producer_and_the_model_is_the_same(monkeypatch):
    """jax2onnx 0.17 checks that each value it bound is in the graph by walking the whole graph, per equation
    (a conversion's time grows with the square of its size); ``paths.onnx_binding`` answers from the value's
    producer where that node is in the graph, and leaves every other answer to jax2onnx's walk: the graph is
    byte for byte the one jax2onnx writes alone, and the walk is left with a few of the questions. (Its shape
    annotations, ``value_info``, are not compared: jax2onnx 0.17.1 writes a few of them in one layout or the other
    from one conversion to the next in one process, this check or not: [1,32,8,8] or [1,8,8,32] for the
    ResNet's add_out_17.)"""
    import contextlib

    from conftest import EXAMPLES
    from jax2onnx.converter import output_binding

    def graph(model):
        del model.graph.value_info[:]
        return model.SerializeToString()

    from jaxparity.paths import onnx as onnx_path

    case = load_case(str(EXAMPLES / "transformer_bf16.py"))  # 86 questions for the walk, converted in ~2 s
    walk = output_binding._value_is_graph_connected
    walked: list[int] = []
    monkeypatch.setattr(output_binding, "_value_is_graph_connected",
                        lambda ctx, value: walked.append(1) or walk(ctx, value))
    fast = graph(onnx_path._convert(case.fn, tuple(case.args)))
    left = len(walked)
    walked.clear()
    monkeypatch.setattr("jaxparity.paths.onnx_binding.fast_binding_check", contextlib.nullcontext)
    plain = graph(onnx_path._convert(case.fn, tuple(case.args)))
    assert fast == plain
    assert len(walked) > 50 and left < len(walked) / 10, (left, len(walked))


def _dense_loss(p, x):
    return jnp.mean(jnp.tanh(x @ p["w1"] + p["b1"]) ** 2)  # the product whose gradient jax2onnx writes as a bad Gemm


def test_a_node_the_checker_rejects_in_a_gradient_is_named_at_the_users_line():
    """Issue 55: the gradient of a dense layer converts to a Gemm ONNX's checker rejects; the node was named with
    its primitive only ("it converts dot_general"). The op is placed by its primitive and output types where the
    converter's record does not place it in order: its number, the user's line, and that it is the gradient's."""
    import inspect

    r = np.random.default_rng(0)
    p = {"w1": (r.normal(size=(16, 32)) / 4).astype(np.float32), "b1": np.zeros(32, np.float32)}
    x = r.normal(size=(64, 16)).astype(np.float32)
    line = inspect.getsourcelines(_dense_loss)[1] + 1
    result = jaxparity.compare(jax.grad(_dense_loss), p, x, paths=["eager", "onnx"])
    (v,) = [v for v in result.verdicts if v.kind == "could not run"]
    assert v.fault == "converter", v
    at = next(n for n in v.notes if n.startswith("at "))
    assert f"test_onnx.py:{line}" in at and " dot_general in transpose(jvp())" in at, at
