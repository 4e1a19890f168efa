"""``onnx`` and ``onnx-ref``: the case converted by jax2onnx, run by onnxruntime or by onnx.reference.

Both paths share one conversion (``convert``): the arguments are flattened with ``jax.tree_util``
and fed, in order, to the ONNX graph's inputs; the outputs are rebuilt into the structure of
``jax.eval_shape(fn, *args)``. bfloat16 (and the other ml_dtypes floats) cross into onnxruntime
as raw bits, so inputs and outputs keep every bit.

A converter may change dtypes (jax2onnx 0.17.1 emits flax linen ``Dense`` of a bf16 model as a
float32 ``Gemm``). ``dtype_findings`` compares the model's dtypes with the jaxpr's and each
difference becomes a note starting ``finding: ``. An output whose ONNX dtype differs from the
declared one is rounded once, to nearest even, into the declared dtype
(``jaxparity.rounding.round_to_dtype``), so it compares with the other paths; a finding says so.

onnxruntime's CPU provider has no bfloat16 arithmetic kernels; ``onnx`` names the op types and
dtypes it lacks (from onnxruntime's kernel registry) instead of showing its raw error.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
import sys
from collections import Counter, defaultdict
from typing import Any, Callable

import numpy as np

from .base import Path, PathError, PathOptionError

__all__ = ["OnnxPath", "OnnxReferencePath", "convert", "dtype_findings"]

_INSTALL = "pip install 'jaxparity[onnx]' (jax2onnx==0.17.1 onnx==1.23.2 onnxruntime==1.31.1)"
# ONNX op types that compute what one JAX primitive computes, for comparing their dtypes.
_SAME_AS = {
    "MatMul": "dot_general", "Gemm": "dot_general", "Einsum": "dot_general", "Conv": "conv_general_dilated",
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "max", "Min": "min", "Neg": "neg",
    "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Erf": "erf", "Sigmoid": "logistic",
    "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max", "ReduceMin": "reduce_min",
}


def _missing(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is None  # how Python (and a test) marks a blocked module
    return importlib.util.find_spec(module) is None


def _np_dtype(elem_type: int) -> np.dtype:
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def convert(fn: Callable[..., Any], args: tuple, opset: int | None = None) -> Any:
    """``fn(*args)`` as an ``onnx.ModelProto``, one graph input per argument leaf, in leaf order."""
    import jax
    import jax2onnx

    leaves, in_tree = jax.tree_util.tree_flatten(args)
    for i, leaf in enumerate(leaves):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            raise PathError(f"input leaf {i} is a PRNG key ({leaf.dtype}); an ONNX graph takes tensors: pass "
                            "jax.random.key_data(key) and rebuild it in fn with jax.random.wrap_key_data")

    def flat_fn(*xs: Any) -> list[Any]:
        return jax.tree_util.tree_leaves(fn(*jax.tree_util.tree_unflatten(in_tree, xs)))

    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves]
    wide = any(x.dtype == np.float64 for x in leaves)
    try:
        return jax2onnx.to_onnx(flat_fn, inputs=specs, model_name="jaxparity", opset=opset or 23,
                                enable_double_precision=wide)
    except Exception as e:
        raise PathError(f"jax2onnx {_version('jax2onnx')} could not convert the function: {_first_line(e)}") from e


def _version(module: str) -> str:
    from importlib.metadata import version

    return version(module)


def _graph_nodes(graph: Any, types: dict[str, int]) -> Any:
    """(node, elem types by value name) for every node, subgraphs (Loop, If, Scan bodies) included."""
    types = {**types, **{v.name: v.type.tensor_type.elem_type
                         for v in [*graph.input, *graph.output, *graph.value_info]}}
    types.update({t.name: t.data_type for t in graph.initializer})
    for node in graph.node:
        yield node, types
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                yield from _graph_nodes(sub, types)


def _jaxpr_ops(jaxpr: Any, found: dict[str, Counter]) -> None:
    """Count each primitive by the dtype of its first operand, nested jaxprs included."""
    from jax.extend import core

    for eqn in jaxpr.eqns:
        if eqn.invars and hasattr(eqn.invars[0].aval, "dtype"):
            found[eqn.primitive.name][np.dtype(eqn.invars[0].aval.dtype).name] += 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else [value]:
                if isinstance(sub, (core.Jaxpr, core.ClosedJaxpr)):
                    _jaxpr_ops(sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub, found)


def _io_findings(kind: str, names: list[str], model_types: list[int], declared: list[Any], tail: str) -> list[str]:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, elem, aval in zip(names, model_types, declared):
        if elem and _np_dtype(elem) != np.dtype(aval.dtype):
            groups[(_np_dtype(elem).name, np.dtype(aval.dtype).name)].append(name)
    return [f"{kind}{'s' if len(n) > 1 else ''} {', '.join(n)} {'are' if len(n) > 1 else 'is'} {have} in the ONNX "
            f"model where the program declares {want}{tail}" for (have, want), n in groups.items()]


def dtype_findings(model: Any, fn: Callable[..., Any], args: tuple) -> list[str]:
    """Sentences naming where the ONNX model's dtypes differ from the dtypes ``fn``'s jaxpr declares."""
    import jax
    import onnx

    from ..pytree import argument_leaves, named_leaves
    from ..rounding import is_float_dtype

    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    graph = model.graph
    findings = _io_findings("input", [n for n, _ in argument_leaves(args)],
                            [v.type.tensor_type.elem_type for v in graph.input], closed.in_avals, "")
    findings += _io_findings("output", [n for n, _ in named_leaves(out_shape, "out")],
                             [v.type.tensor_type.elem_type for v in graph.output], closed.out_avals,
                             "; jaxparity rounds its values once, to nearest even, into the declared dtype")
    declared: dict[str, Counter] = defaultdict(Counter)
    _jaxpr_ops(closed.jaxpr, declared)
    computed: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for node, types in _graph_nodes(onnx.shape_inference.infer_shapes(model).graph, {}):
        prim, elem = _SAME_AS.get(node.op_type), types.get(node.input[0]) if node.input else None
        if prim and elem and is_float_dtype(_np_dtype(elem)):
            computed[(prim, _np_dtype(elem).name)][node.op_type] += 1
    for (prim, dtype), ops in computed.items():
        decl = {d: n for d, n in declared.get(prim, {}).items() if is_float_dtype(np.dtype(d))}
        if decl and dtype not in decl:
            have = ", ".join(f"{op} ({n} op{'s' if n > 1 else ''})" for op, n in ops.items())
            want = " and ".join(f"{d} {prim} ({n} op{'s' if n > 1 else ''})" for d, n in decl.items())
            findings.append(f"the ONNX model computes {have} in {dtype} where the program declares {want}: "
                            "the converter changed the precision")
    return findings


class _OnnxPath(Path):
    """Convert with jax2onnx, then ``execute`` the model (one subclass per runtime)."""

    options_help = {
        "opset": "the ONNX opset jax2onnx targets (default 23)",
        "keep": "a file to save the converted model in, e.g. keep=model.onnx",
    }
    needs: tuple[str, ...] = ("jax2onnx", "onnx")

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # Path's own signature (options, env)
        super().__init__(*args, **kwargs)
        opset = self.options.get("opset", "23")
        if not opset.isdigit():
            raise PathOptionError(f"path {self.name!r}: opset must be a whole number, got {opset!r}")
        self.opset = int(opset)

    def unavailable_reason(self) -> str | None:
        missing = [m for m in self.needs if _missing(m)]
        return f"{', '.join(missing)} not installed: {_INSTALL}" if missing else None

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax
        import onnx

        from ..pytree import host
        from ..rounding import round_to_dtype

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)  # Python scalars get JAX's dtypes
        out_shape = jax.eval_shape(fn, *args)
        model = convert(fn, args, self.opset)
        if self.options.get("keep"):
            onnx.save(model, self.options["keep"])
        self.notes.append(f"converted by jax2onnx {_version('jax2onnx')} (onnx {onnx.__version__}), "
                          f"opset {self.opset}, {len(model.graph.node)} nodes")
        self.notes += [f"finding: {f}" for f in dtype_findings(model, fn, args)]
        leaves = [host(x) for x in jax.tree_util.tree_leaves(args)]
        if len(leaves) != len(model.graph.input):
            raise PathError(f"the ONNX graph has {len(model.graph.input)} inputs for {len(leaves)} argument leaves")
        feeds = {}
        for value, x in zip(model.graph.input, leaves):
            feeds[value.name] = x.astype(_np_dtype(value.type.tensor_type.elem_type))  # a finding when it casts
        outputs = self.execute(model, feeds)
        flat, tree = jax.tree_util.tree_flatten(out_shape)
        if len(outputs) != len(flat):
            raise PathError(f"the ONNX model returned {len(outputs)} outputs where fn returns {len(flat)}")
        for i, (y, want) in enumerate(zip(outputs, flat)):
            if y.shape != want.shape:
                raise PathError(f"ONNX output {i} has shape {y.shape} where fn returns {want.shape}")
            outputs[i] = y if y.dtype == want.dtype else round_to_dtype(y, want.dtype)
        return jax.tree_util.tree_unflatten(tree, outputs)

    def execute(self, model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError


def _ort_value(x: np.ndarray) -> Any:
    import onnxruntime as ort
    from onnx import helper

    if x.dtype.kind == "V":  # ml_dtypes (bfloat16, float8...): hand over the bits
        elem = helper.np_dtype_to_tensor_dtype(x.dtype)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(x).view(f"u{x.itemsize}"), elem)
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))


def _from_ort(value: Any) -> np.ndarray:
    from onnx import TensorProto

    elem = TensorProto.DataType.Value(value.data_type()[len("tensor("):-1].upper())
    dtype = _np_dtype(elem)
    if dtype.kind != "V":
        return np.asarray(value.numpy())
    raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())  # onnxruntime has no numpy bf16
    return np.frombuffer(raw, dtype).reshape(value.shape()).copy()


def _missing_kernels(model: Any) -> dict[str, set[str]]:
    """dtype -> the model's op types that onnxruntime's CPU provider has no kernel for at that dtype.

    Ops onnxruntime only ever inlines from their ONNX function body (CastLike) are skipped."""
    import onnx
    from onnxruntime.capi import _pybind_state as ort_c

    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    kernels = [k for k in ort_c.get_all_opkernel_def() if k.provider == "CPUExecutionProvider"]
    missing: dict[str, set[str]] = defaultdict(set)
    for node, types in _graph_nodes(onnx.shape_inference.infer_shapes(model).graph, {}):
        try:
            schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain, 1), node.domain)
        except Exception:
            continue
        mine = [k for k in kernels if (k.domain, k.op_name) == (node.domain, node.op_type)]
        if not mine and (schema.has_function or schema.has_context_dependent_function):
            continue
        supported = {t for k in mine if k.version_range[0] <= schema.since_version <= k.version_range[1]
                     for ts in k.type_constraints.values() for t in ts}
        for elem in {types.get(name, 0) for name in [*node.input, *node.output]} - {0}:
            if f"tensor({onnx.TensorProto.DataType.Name(elem).lower()})" not in supported:
                missing[_np_dtype(elem).name].add(node.op_type)
    return missing


class OnnxPath(_OnnxPath):
    name = "onnx"
    summary = "jax2onnx model run by onnxruntime's CPU execution provider (default graph optimizations)"
    needs = ("jax2onnx", "onnx", "onnxruntime")

    def execute(self, model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        import onnxruntime as ort

        self.notes.append(f"onnxruntime {ort.__version__}, CPUExecutionProvider")
        try:
            session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            outs = session.run_with_ort_values(None, {k: _ort_value(v) for k, v in feeds.items()})
        except Exception as e:
            m = re.search(r":\s*\d+\s*:\s*([A-Z_]+)\s*:\s*(.*)", str(e))
            code, text = (m[1], m[2].strip()) if m else (type(e).__name__, _first_line(e))
            if code == "NOT_IMPLEMENTED":
                missing = _missing_kernels(model)
                if missing:
                    what = "; ".join(f"no {d} kernel for {', '.join(sorted(ops))}" for d, ops in missing.items())
                    raise PathError(f"onnxruntime's CPU provider has {what} (NOT_IMPLEMENTED); "
                                    "the onnx-ref path runs the same model") from e
            raise PathError(f"onnxruntime {ort.__version__} could not run the converted model ({code}): {text}") from e
        return [_from_ort(v) for v in outs]


class OnnxReferencePath(_OnnxPath):
    name = "onnx-ref"
    summary = "jax2onnx model run by onnx.reference.ReferenceEvaluator (numpy, every dtype)"

    def execute(self, model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        from onnx.reference import ReferenceEvaluator

        self.notes.append("run by onnx.reference.ReferenceEvaluator")
        try:
            return [np.asarray(y) for y in ReferenceEvaluator(model).run(None, feeds)]
        except Exception as e:
            raise PathError(f"onnx.reference could not run the converted model: {_first_line(e)}") from e
