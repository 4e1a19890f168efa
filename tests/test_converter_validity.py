"""Converter validity first: a converted model its own checker rejects is the converter's fault, named by its node,
the JAX op it converts and the user's line (``paths.onnx_check``); a converter's refusal names the op the failing
op came from (``localize.refusals.located_hint``)."""

from __future__ import annotations


import jax
import jax.numpy as jnp
import onnx
import pytest
from onnx import TensorProto, helper

import jaxparity
from jaxparity.localize.program import flatten
from jaxparity.localize.refusals import converted_from, located_hint
from jaxparity.paths.onnx_check import fault, rejected
from conftest import valid_result

PATHS = ["eager", "onnx", "onnx-ref"]


def _einsum_model(elem: int, declared_out: int | None = None) -> onnx.ModelProto:
    """A one-node model: Einsum over two inputs of type ``elem`` (its output declared ``declared_out``)."""
    a = helper.make_tensor_value_info("a", elem, [2, 4, 8])
    b = helper.make_tensor_value_info("b", elem, [2, 8, 3])
    out = helper.make_tensor_value_info("y", declared_out or elem, [2, 4, 3])
    node = helper.make_node("Einsum", ["a", "b"], ["y"], name="node_Einsum_0", equation="bij,bjk->bik")
    return helper.make_model(helper.make_graph([node], "g", [a, b], [out]), opset_imports=[helper.make_opsetid("", 23)])


def test_the_checker_names_a_bf16_einsum_with_its_dtypes_and_passes_a_float32_one():
    assert rejected(_einsum_model(TensorProto.FLOAT)) is None
    found = rejected(_einsum_model(TensorProto.BFLOAT16))
    assert found is not None
    (node,) = found[1]
    assert (node.op_type, node.name) == ("Einsum", "node_Einsum_0")
    assert node.inputs == ("bfloat16", "bfloat16") and node.outputs == ("bfloat16",)
    assert "bfloat16" in node.what


def test_an_output_declared_other_than_inferred_is_named_in_dtypes_not_numbers():
    mean = helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="ReduceMean_0", keepdims=0)
    model = helper.make_model(helper.make_graph(
        [mean], "g", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [-1])]), opset_imports=[helper.make_opsetid("", 23)])
    (node,) = rejected(model)[1]
    assert node.op_type == "ReduceMean" and node.outputs == ("float32",) and node.inputs[0] == "bfloat16"
    assert "(bfloat16) vs (float32)" in node.what, node.what
    # the checker's own text may go on after the second code (a miniGPT's Reshape): both are named
    from jaxparity.paths.onnx_check import _named_types

    said = _named_types("elem type differs from existing elem type: (16) vs (1)\n\n==> Context: Bad node spec")
    assert said.startswith("elem type differs from existing elem type: (bfloat16) vs (float32)\n"), said


def test_the_rejected_node_is_placed_at_the_op_its_recorded_call_converted():
    """jax2onnx's record: a primitive's call and a whole call (jax.numpy.einsum); the node feeding the whole
    call's output is placed at the dot_general after the tanh, with the user's line."""

    def fn(a, b):
        return jnp.einsum("bij,bjk->bik", jnp.tanh(a), b)  # the user's line

    args = (jnp.ones((2, 4, 8), jnp.bfloat16), jnp.ones((2, 8, 3), jnp.bfloat16))
    ops = [op.info for op in flatten(fn, args).ops]
    dot = next(op for op in ops if op.primitive == "dot_general")
    assert dot.index > 0  # the tanh comes first: the index is the program's, not the call's
    calls = [{"sequence_id": 0, "primitive_name": "tanh", "outputs_aval": [[[2, 4, 8], "bfloat16", "ShapedArray"]],
              "outputs_onnx_names": ["a"]},
             {"sequence_id": 1, "primitive_name": "jax.numpy.einsum",
              "outputs_aval": [[[2, 4, 3], "bfloat16", "ShapedArray"]], "outputs_onnx_names": ["y"]}]
    model = _einsum_model(TensorProto.BFLOAT16)
    why, found = rejected(model)
    blame = fault(model, "jax2onnx 0.0", why, found, calls, fn, args)
    assert blame.layer == "converter" and (blame.node, blame.op_type) == ("node_Einsum_0", "Einsum")
    assert (blame.primitive, blame.op, blame.call) == ("dot_general", dot.index, "jax.numpy.einsum")
    assert blame.source is not None and "test_converter_validity.py:" in blame.source
    assert f"it converts #{dot.index} dot_general (jax.numpy.einsum) at " in blame.text
    unplaced = fault(model, "jax2onnx 0.0", why, found, [], fn, args)  # no record: the node alone
    assert unplaced.primitive is None and unplaced.op is None and "node node_Einsum_0 (Einsum" in unplaced.text


@pytest.mark.slow
@pytest.mark.parametrize("program, op_type, primitive", [
    (lambda a, b: jnp.einsum("bij,bjk->bik", jnp.tanh(a) + 1, b), "Einsum", "dot_general"),
    (lambda a, b: jnp.mean(jnp.tanh(a) @ b, axis=-1, dtype=jnp.float32), "ReduceMean", "reduce_sum"),
])
def test_an_invalid_bf16_model_is_the_converters_fault_on_both_runtimes(program, op_type, primitive):
    """jax2onnx 0.17.1 writes a bf16 Einsum (the spec allows float16, float and double) and a ReduceMean that takes
    bf16 and declares a float32 output. onnxruntime refused the first and onnx-ref ran both: "could not run"
    and "bit-identical" before; now both paths name the converter, the node, the JAX op and the user's line."""
    a = jax.random.normal(jax.random.key(0), (2, 4, 8)).astype(jnp.bfloat16)
    b = jax.random.normal(jax.random.key(1), (2, 8, 3)).astype(jnp.bfloat16)
    result = jaxparity.compare(program, a, b, paths=PATHS)
    op = next(op.info for op in flatten(program, (a, b)).ops if op.info.primitive == primitive)
    for spec in ("onnx", "onnx-ref"):
        p = result.path(spec)
        assert p.verdict == "error" and p.fault is not None, (spec, p.message)
        assert (p.fault.layer, p.fault.op_type, p.fault.primitive, p.fault.op) == ("converter", op_type, primitive,
                                                                                  op.index), p.fault
        assert "bfloat16" in p.fault.node_inputs and p.fault.source == op.user_source
        assert p.message.startswith("the converter's fault: jax2onnx ") and "onnxruntime" not in p.message
    assert not result.passed
    doc = result.to_dict()
    valid_result(doc)
    assert {p["spec"]: p["fault"]["node"] for p in doc["paths"] if p["fault"]} == {
        "onnx": result.path("onnx").fault.node, "onnx-ref": result.path("onnx").fault.node}

    from rich.console import Console

    from jaxparity.report.terminal import render

    console = Console(record=True, width=200)
    console.print(render(result))
    text = console.export_text()
    assert f"it converts #{op.index} {primitive}" in text
    assert "✗ onnx, onnx-ref could not run: the converter's fault" in text and "report the bfloat16" in text


@pytest.mark.slow
def test_a_valid_bf16_model_has_no_fault():
    x = jnp.linspace(-2, 2, 24, dtype=jnp.bfloat16).reshape(2, 3, 4)
    result = jaxparity.compare(lambda x: jnp.tanh(x) * 2 + x.sum(-1, keepdims=True), x, paths=PATHS)
    assert all(result.path(s).fault is None for s in PATHS)
    assert result.path("onnx-ref").status == "ok", result.path("onnx-ref").message


# -- a converter's refusal names the op the failing op came from

def test_a_converters_op_kind_names_the_primitive_it_came_from():
    assert converted_from("error: failed to legalize operation 'tfl.gather_nd' that was explicitly marked") == {
        "gather"}
    assert converted_from("'tf.GatherNd' op is neither a custom op nor a flex op") == {"gather"}
    assert converted_from("failed to legalize operation 'tfl.mul'") == {"mul"}
    assert converted_from("no op named") == set()


def test_a_legalization_error_at_a_library_line_names_the_gather_not_the_index_fixup():
    """flax's Embed calls jnp.take at one line of flax/linen/linear.py: the negative-index fix-up (lt, add,
    select_n) and the gather are all created there; 'tfl.gather_nd' is the gather."""
    import flax.linen as nn

    model = nn.Embed(10, 4, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    ids = jnp.array([[1, 2, 9]], jnp.int32)
    variables = model.init(jax.random.key(0), ids)

    def embed(v, ids):
        return model.apply(v, ids)  # the user's line

    ops = [op.info for op in flatten(embed, (variables, ids)).ops]
    gather = next(op for op in ops if op.primitive == "gather")
    assert ops[0].primitive == "lt" and ops[0].source == gather.source  # what was named before
    message = f"{gather.source}:11: error: failed to legalize operation 'tfl.gather_nd' that was explicitly marked"
    hint = located_hint(embed, (variables, ids), message)
    assert hint is not None and hint.startswith(f"#{gather.index} gather at "), hint
    logical = f"{gather.source}:11: error: failed to legalize operation 'tfl.less'"
    assert "test_converter_validity.py:" in hint
    assert located_hint(embed, (variables, ids), logical).startswith(f"#{ops[0].index} lt at ")


@pytest.mark.slow
def test_tflites_refusal_of_a_bf16_take_names_the_gather():
    """Through the tflite path: a bf16 jnp.take with possibly negative indices, called by the user and by flax's
    Embed (a library line), refused as 'tfl.gather_nd': the hint names the gather."""
    import flax.linen as nn

    ids = jnp.array([[1, -1, 9]], jnp.int32)

    def take(x, idx):
        h = jnp.tanh(x.astype(jnp.float32))  # float32, which TFLite converts: the gather is not op #0
        return jnp.take(x, idx, axis=0), h

    model = nn.Embed(10, 4, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    variables = model.init(jax.random.key(0), ids)
    table = jax.random.normal(jax.random.key(1), (10, 4)).astype(jnp.bfloat16)

    def embed(v, ids):
        return model.apply(v, ids)

    for fn, args in ((take, (table, ids)), (embed, (variables, ids))):
        gather = next(op.info for op in flatten(fn, args).ops if op.info.primitive == "gather")
        result = jaxparity.compare(fn, *args, paths=["eager", "tflite"])
        message = result.path("tflite").message
        assert "'tfl.gather_nd'" in message, message
        assert f"in your code: #{gather.index} gather at " in message, message


def test_a_whole_call_placed_by_output_types_alone_names_no_unrelated_op():
    """jax2onnx records a miniGPT's nnx.linear_general as float32 where the program computes it in bfloat16; the
    first float32 op of that shape is a LayerNorm's upcast a block later, which was named ("#191
    convert_element_type (nnx.linear_general)"). Without an op of what the rejected node computes in the call's
    span, only the call is named; with one (a MatMul's dot_general), that op."""
    from jaxparity.paths.onnx_check import _op_of

    def fn(x, w):
        h = x @ w.astype(jnp.bfloat16)
        return jnp.tanh(h.astype(jnp.float32))

    args = (jnp.ones((2, 4), jnp.bfloat16), jnp.ones((4, 4), jnp.float32))
    call = {"sequence_id": 0, "primitive_name": "nnx.linear", "outputs_aval": [[[2, 4], "float32", "ShapedArray"]]}
    assert _op_of(call, [call], "Reshape", fn, args) is None
    op = _op_of(call, [call], "MatMul", fn, args)
    assert op is not None and op.primitive == "dot_general"
