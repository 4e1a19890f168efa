"""Whether jax2onnx wrote a valid ONNX model, by ONNX's own checker, and which op of the program a node it
rejects came from.

A converter can write a model the ONNX spec does not allow: a bf16 ``Einsum`` (the spec's Einsum takes
float16, float and double), a ``ReduceMean`` that takes bf16 and declares a float32 output. onnxruntime then
refuses the graph and onnx.reference may run it anyway; neither says anything about the runtime. So before
either runs it, ``onnx.checker.check_model(model, full_check=True)`` (strict shape and type inference
included) judges the model, and a rejected one is the converter's ``Fault``: the node (op type, name, its
input and output dtypes), the JAX op it converts (the primitive and its index in the per-op view, matched
through jax2onnx's record of the calls it converted) and the user's line.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..result import Fault

__all__ = ["Rejected", "fault", "rejected"]

# Over protobuf's 2 GiB a model can be checked only from a file: such a model is not checked here.
_LIMIT = 2**31 - 1
# The primitives an ONNX op type computes, for naming the op of a whole call (jax.numpy.einsum) the node is in.
_COMPUTES = {"MatMul": ("dot_general",), "Gemm": ("dot_general",), "Einsum": ("dot_general",),
             "Conv": ("conv_general_dilated",), "ReduceMean": ("reduce_sum", "div"), "ReduceSum": ("reduce_sum",),
             "ReduceMax": ("reduce_max",), "ReduceMin": ("reduce_min",), "Gather": ("gather",),
             "GatherND": ("gather",), "GatherElements": ("gather",), "Cast": ("convert_element_type",),
             "Sigmoid": ("logistic",), "Softmax": ("exp", "div"), "CumSum": ("cumsum",), "TopK": ("top_k",)}
# How the checker names a node: "(op_type:Einsum, node name: node_Einsum_0): ..." (inference), or
# "Bad node spec for node. Name: n OpType: Einsum" (the node checker).
_INFERENCE = re.compile(r"\(op_type:(?P<op>[^,]+), node name: (?P<name>[^)]*)\):\s*(?P<what>.*?)(?=\s*\(op_type:|\Z)",
                        re.S)
_NODE_SPEC = re.compile(r"Name: (?P<name>\S*) OpType: (?P<op>\S+)")


@dataclass(frozen=True)
class Rejected:
    """One node the checker rejects: what the checker says of it, with the dtypes the model gives its values."""

    op_type: str
    name: str
    what: str  # the checker's words, elem type numbers named ("(16) vs (1)" -> "bfloat16 vs float32")
    inputs: tuple[str, ...]  # dtypes of its inputs ("?" where the model does not say)
    outputs: tuple[str, ...]
    output_names: tuple[str, ...]


def rejected(model: Any) -> tuple[str, list[Rejected]] | None:
    """``None`` where ONNX's checker (``full_check``: strict shape and type inference) accepts ``model``;
    otherwise (the checker's first line, the nodes it names). A model too large to check in memory passes."""
    import onnx

    if model.ByteSize() > _LIMIT:
        return None
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        text = _named_types(str(e).strip())
    else:
        return None
    nodes = {n.name: n for n, _ in _all_nodes(model.graph)}
    types = _value_types(model)
    found: list[Rejected] = []
    for m in [*_INFERENCE.finditer(text), *_NODE_SPEC.finditer(text)]:
        node = nodes.get(m["name"])
        if node is None or any(r.name == node.name for r in found):
            continue
        what = m.groupdict().get("what") or text.split("==>")[0]
        found.append(Rejected(node.op_type, node.name, " ".join(what.split()),
                              tuple(types.get(n, "?") for n in node.input if n),
                              tuple(types.get(n, "?") for n in node.output if n), tuple(node.output)))
    return " ".join(text.splitlines()[0].split()), found


def fault(model: Any, converter: str, why: str, found: Sequence[Rejected],
          calls: Sequence[dict[str, Any]], fn: Callable[..., Any] | None = None, args: tuple = ()) -> Fault:
    """The converter's fault for a model the checker rejects (``why``: its first line; ``found``: the nodes it
    names): the first node, and the op of ``fn`` it came from where jax2onnx's record (``calls``: its
    ``record_primitive_calls_file``) places it in the program's per-op view."""
    node = found[0] if found else None
    primitive = index = source = stack = call = None
    if node is not None:
        call = _call_of(model, node.output_names, calls)
        op = _op_of(call, calls, node.op_type, fn, args) if call is not None and fn is not None else None
        if op is None and call is not None and fn is not None:  # not placed in order: by its primitive and types
            op = _only_op(call, fn, args)
        if op is not None:
            primitive, index, source, stack = op.primitive, op.index, op.user_source or op.source, op.name_stack
        elif call is not None:
            primitive = str(call.get("primitive_name"))
    blame = Fault(layer="converter", converter=converter, check=_CHECK, what=node.what if node else why, text="",
                  node=node.name if node else None, op_type=node.op_type if node else None,
                  node_inputs=node.inputs if node else (), node_outputs=node.outputs if node else (),
                  primitive=primitive, op=index, source=source, name_stack=stack or None,
                  call=str(call["primitive_name"]) if call is not None and "." in str(call.get("primitive_name", ""))
                  else None, others=len(found) - 1 if found else 0)
    return dataclasses.replace(blame, text=_sentence(blame))


_CHECK = "onnx.checker.check_model(full_check=True)"


def _sentence(f: Fault) -> str:
    """The fault in words: "the converter's fault: jax2onnx 0.17.1 wrote an ONNX model that ONNX's checker rejects
    (...): node node_Einsum_3 (Einsum, bfloat16, bfloat16 -> bfloat16): <the checker's words>; it converts #3
    dot_general (jax.numpy.einsum) at model.py:5", and what to do."""
    text = f"the converter's fault: {f.converter} wrote an ONNX model that ONNX's checker rejects ({f.check})"
    if f.node is not None:
        text += (f": node {f.node} ({f.op_type}, {', '.join(f.node_inputs) or 'no inputs'} -> "
                 f"{', '.join(f.node_outputs) or 'no outputs'}): {f.what}")
        if f.primitive is not None:
            whole = f" ({f.call})" if f.call and f.primitive not in (f.call, f.call.rsplit(".", 1)[-1]) else ""
            at = f" at {f.source}" if f.source else ""
            module = f", in {f.name_stack}" if f.name_stack else ""
            text += f"; it converts {f'#{f.op} ' if f.op is not None else ''}{f.primitive}{whole}{at}{module}"
        if f.others:
            text += f" (and {f.others} more node{'s' if f.others > 1 else ''} the checker rejects)"
    else:
        text += f": {f.what}"
    narrow = [d for d in ("bfloat16", "float16") if d in (*f.node_inputs, *f.node_outputs)]
    who = f.converter.split()[0]
    advice = (f"convert a float32 version of the model, or report the {narrow[0]} {f.op_type or 'node'} to {who}"
              if narrow else f"report it to {who}")
    return (f"{text}. No runtime is judged on a model the spec does not allow (onnx and onnx-ref run the same "
            f"model): {advice}")


def _named_types(text: str) -> str:
    """The checker's elem type numbers as dtype names: "differs from existing elem type: (16) vs (1)" ->
    "... (bfloat16) vs (float32)"."""
    from onnx import helper

    def name(m: re.Match) -> str:
        try:
            return f"({np.dtype(helper.tensor_dtype_to_np_dtype(int(m[1]))).name})"
        except (KeyError, TypeError, ValueError):
            return m[0]

    return re.sub(r"\((\d+)\)(?= vs |\s*$|\s*[.;,\n])", name, text)  # "... (1)\n\n==> Context": the last


def _all_nodes(graph: Any) -> list[tuple[Any, Any]]:
    """(node, its graph) for every node, subgraphs (Loop, If, Scan bodies) included."""
    found = []
    for node in graph.node:
        found.append((node, graph))
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                found += _all_nodes(sub)
    return found


def _value_types(model: Any) -> dict[str, str]:
    """dtype name per value: as the model declares it (graph inputs, outputs, value_info, initializers), else as
    ONNX's own (lenient) inference gives it."""
    import onnx

    def declared(graph: Any) -> dict[str, int]:
        types = {t.name: t.data_type for t in graph.initializer}
        types.update({v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.output, *graph.value_info]
                      if v.type.tensor_type.elem_type})
        return types

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - inference is a courtesy here: the checker's words stand without it
        inferred = model
    def graphs(top: Any) -> list[Any]:  # each graph once (``_all_nodes`` names a graph per node of it)
        return list({id(g): g for g in [top, *(g for _, g in _all_nodes(top))]}.values())

    found: dict[str, int] = {}
    for graph in graphs(inferred.graph):
        found.update(declared(graph))
    for graph in graphs(model.graph):
        found.update(declared(graph))  # the converter's own declarations win: they are what is rejected
    return {k: np.dtype(onnx.helper.tensor_dtype_to_np_dtype(v)).name for k, v in found.items()
            if v in onnx.TensorProto.DataType.values()}


def _call_of(model: Any, outputs: Sequence[str], calls: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The recorded call whose output the node's outputs are, or the first call downstream of them (a node
    inside a call's lowering feeds that call's output)."""
    by_output: dict[str, dict[str, Any]] = {}
    for call in calls:
        for name in call.get("outputs_onnx_names") or ():
            by_output.setdefault(name, call)
    consumers: dict[str, list[Any]] = {}
    for node, _ in _all_nodes(model.graph):
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    seen, frontier, reached = set(), list(outputs), []
    while frontier:
        name = frontier.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in by_output:
            reached.append(by_output[name])
            continue
        frontier += [o for node in consumers.get(name, ()) for o in node.output]
    return min(reached, key=lambda c: c.get("sequence_id", 0)) if reached else None


def _only_op(call: dict[str, Any], fn: Callable[..., Any], args: tuple) -> Any:
    """The program's one op of the call's primitive with the call's output types (a gradient's dot_general of
    shape [1,32] among others of other shapes); None where there is none, or more than one."""
    from ..localize.program import flatten

    name = str(call.get("primitive_name", "")).rsplit(".", 1)[-1]
    outs = tuple(f"{a[1]}[{','.join(map(str, a[0]))}]" for a in call.get("outputs_aval") or ()
                 if isinstance(a, (list, tuple)) and len(a) >= 2)
    try:
        found = [op.info for op in flatten(fn, args).ops if op.info.primitive == name and op.info.outputs == outs]
    except Exception:  # noqa: BLE001 - a courtesy: the node stands without its op
        return None
    return found[0] if len(found) == 1 else None


def _op_of(call: dict[str, Any], calls: Sequence[dict[str, Any]], op_type: str, fn: Callable[..., Any],
           args: tuple) -> Any:
    """The op of the program's per-op view (``localize.program.flatten``) that ``call`` converted: the recorded
    calls aligned with the program's ops in order, a primitive's call with the next op of that primitive and
    output types, a whole call (jax.numpy.einsum) with the ops up to the next one giving its output types; of
    those, the op that computes what ``op_type`` does (a primitive's call: that op). None where it cannot be
    placed."""
    from ..localize.program import flatten

    try:
        ops = [op.info for op in flatten(fn, args).ops]
    except Exception:  # noqa: BLE001 - a courtesy: the node stands without its op
        return None
    cursor = 0
    for c in sorted(calls, key=lambda c: c.get("sequence_id", 0)):
        name = str(c.get("primitive_name", ""))
        outs = tuple(f"{a[1]}[{','.join(map(str, a[0]))}]" for a in c.get("outputs_aval") or ()
                     if isinstance(a, (list, tuple)) and len(a) >= 2)
        end = next((k for k in range(cursor, len(ops)) if ops[k].outputs == outs
                    and ("." in name or ops[k].primitive == name.rsplit(".", 1)[-1])), None)
        if end is None:
            continue
        span = ops[cursor:end + 1] if "." in name else [ops[end]]
        if c is call:
            wanted = _COMPUTES.get(op_type, ())
            found = next((op for op in reversed(span) if op.primitive in wanted), None)
            # A whole call is placed by its output types alone, which another op may share (jax2onnx records an
            # nnx.linear_general as float32 where the program computes it in bfloat16, and the first float32 op
            # of that shape is a LayerNorm's upcast a block later): without an op of what the node computes in
            # its span, no op is named, only the call.
            return found if found is not None or "." in name else span[-1]
        cursor = end + 1
    return None
