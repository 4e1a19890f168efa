"""``onnx`` and ``onnx-ref``: the case converted by jax2onnx, run by onnxruntime or by onnx.reference.

One conversion (``convert``) serves both: argument leaves, in ``jax.tree_util`` order, feed the graph
inputs in order; outputs are rebuilt as ``jax.eval_shape(fn, *args)``; ml_dtypes (bfloat16) cross in
and out of onnxruntime as raw bits. A converter may change dtypes (jax2onnx 0.17.1 emits a bf16 linen
``Dense`` as a float32 ``Gemm``): ``dtype_findings`` compares the model's dtypes with the jaxpr's and
each difference is a ``finding: `` note. An output whose ONNX dtype differs from the declared one is
rounded once, to nearest even, into the declared dtype (``rounding.round_to_dtype``) so it compares
with the other paths; its finding says so. onnxruntime's CPU provider has no bfloat16 arithmetic
kernels: ``onnx`` then names the op types and dtypes it lacks, from onnxruntime's kernel registry.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import importlib.util
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any, Callable

import numpy as np

from .base import Path, PathError, PathOptionError, as_declared

__all__ = ["OnnxPath", "OnnxReferencePath", "convert", "dtype_findings"]

_INSTALL = "pip install 'jaxparity[onnx]' (jax2onnx, onnx, onnxruntime)"
# ONNX op types that compute what one JAX primitive computes, for comparing their dtypes.
_SAME_AS = {"MatMul": "dot_general", "Gemm": "dot_general", "Einsum": "dot_general", "Conv": "conv_general_dilated",
            "Sigmoid": "logistic", "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max", "ReduceMin": "reduce_min",
            **{op: op.lower() for op in "Add Sub Mul Div Max Min Neg Tanh Exp Log Sqrt Erf".split()}}


def _np_dtype(elem_type: int) -> np.dtype:
    from onnx import helper
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}".rstrip(": ")


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _namespaces() -> tuple[Any, ...]:
    import jax

    return (jax.numpy, jax.lax)


# jax.numpy / jax.lax as JAX defines them, read before this module imports jax2onnx: jax2onnx replaces
# some of their functions process-wide (jax2onnx 0.17: jnp.cumsum by a wrapper that rejects
# jnp.cumsum(x, 1)). Read at first use, not at import: importing the paths must not import JAX (the
# command line's own process never needs it).
_PRISTINE: dict[str, dict[str, Any]] = {}


def _pristine() -> dict[str, dict[str, Any]]:
    if not _PRISTINE:
        _PRISTINE.update({m.__name__: dict(vars(m)) for m in _namespaces()})
    return _PRISTINE


@contextmanager
def _jax2onnx_patches() -> Iterator[None]:
    """Whatever jax2onnx replaces in jax.numpy/jax.lax while it converts is put back to JAX's own
    after, so that converting for the onnx path never changes the user's jnp."""
    pristine_all = _pristine()
    try:
        yield
    finally:
        for m in _namespaces():
            pristine = pristine_all[m.__name__]
            for k, v in list(vars(m).items()):
                if pristine.get(k, v) is not v:
                    setattr(m, k, pristine[k])


def convert(fn: Callable[..., Any], args: tuple, opset: int = 23, record: str | None = None) -> Any:
    """``fn(*args)`` as an ``onnx.ModelProto`` with one graph input per argument leaf, in leaf order.
    ``record``: a file where jax2onnx writes each call it converted (``record_primitive_calls_file``: a flax
    module or a jax.nn function converted whole, or a primitive), with its output tensors' names.

    The model converted before from the same program (its StableHLO with source locations and name
    scopes: jax2onnx converts a flax module's call as a whole), opset and versions comes from jaxparity's
    cache; its metadata then holds ``CACHED`` (the entry)."""
    from ..cache import cache, fingerprint, package_versions

    store = cache()
    if record is not None or store is None:
        return _convert(fn, args, opset, record)
    import onnx

    from .staging import staged

    stage, leaves = staged(fn, _unbox(args))
    key = fingerprint("onnx", stage.program_key(leaves), opset,
                      package_versions("jax2onnx", "onnx", "onnx-ir", "flax"))

    def make(where: Any) -> dict[str, Any]:
        (where / "model.onnx").write_bytes(_convert(fn, args, opset).SerializeToString())
        return {}

    entry = store.fetch("onnx", key, make)
    model = onnx.load_from_string((entry.dir / "model.onnx").read_bytes())
    if entry.reused and entry.earlier:
        mark = model.metadata_props.add()
        mark.key, mark.value = CACHED, entry.short
    return model


CACHED = "jaxparity.cache_entry"  # metadata of a model read back from jaxparity's cache (never saved with keep=)


def _convert(fn: Callable[..., Any], args: tuple, opset: int = 23, record: str | None = None) -> Any:
    import jax

    _pristine()  # before jax2onnx is first imported
    import jax2onnx

    from .staging import keys_as_data, staged

    stage, leaves = staged(fn, _unbox(args))
    # A typed PRNG key goes in as its key data (an ONNX graph takes tensors), wrapped again inside: a key the
    # model holds and does not use (an NNX module's Rngs in eval mode) then costs nothing.
    flat_fn, data, impls = keys_as_data(stage.flat, leaves)
    if any(impl is not None for impl in impls):
        from .. import jaxcompat

        _, used = jaxcompat.dce_jaxpr(jax.make_jaxpr(stage.flat)(*leaves).jaxpr)
        from ..pytree import argument_leaves

        names = [name for name, _ in argument_leaves(_unbox(args))]  # the same flattening as staged's
        for i, (impl, read) in enumerate(zip(impls, used)):
            if impl is not None and read:  # jax2onnx would draw its own random numbers (ONNX RandomNormal...)
                raise PathError(f"input {names[i]} is a PRNG key ({leaves[i].dtype}) the program draws from; an ONNX "
                                "graph takes tensors and has no threefry: pass the random values in as an input, or "
                                "make the model deterministic where it is served")
    leaves = data

    def to_onnx(function: Callable[..., Any]) -> Any:
        from .onnx_binding import fast_binding_check

        with _jax2onnx_patches(), fast_binding_check():
            from . import onnx_plugins

            onnx_plugins.load()  # not those for model libraries the program does not use (seconds of compiles)
            extra = {"record_primitive_calls_file": record} if record is not None else {}
            return jax2onnx.to_onnx(function, inputs=[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves],
                                    model_name="jaxparity", opset=opset,
                                    enable_double_precision=any(x.dtype == np.float64 for x in leaves), **extra)

    try:
        return _deterministic(to_onnx(flat_fn))
    except PathError:
        raise
    except Exception as e:
        as_written = f"jax2onnx {version('jax2onnx')} could not convert the function: {_first_line(e)}"
    # Its plugins patch flax and jax.numpy while it traces: the model's own calls can miss them. The
    # program as JAX traced it, replayed primitive by primitive, meets none of them.
    from .onnx_replay import replayed

    try:
        model = _deterministic(to_onnx(replayed(flat_fn, leaves)))
    except PathError:
        raise
    except Exception as e:
        from ..localize.refusals import primitive_hint

        reason = _first_line(e)
        op = primitive_hint(fn, args, reason)
        if op is None:
            raise PathError(f"{as_written}; nor from the function's jaxpr: {reason}") from e
        narrow = [d for d in ("bfloat16", "float16") if d in reason]
        advice = (f" (a {narrow[0]} model: convert a float32 version of it; ONNX Runtime's CPU provider has no "
                  f"{narrow[0]} arithmetic kernels either)" if narrow else "")
        raise PathError(f"jax2onnx {version('jax2onnx')} cannot convert {op}: {reason}{advice}. Converting the "
                        f"function as written failed before that: {as_written.split(': ', 1)[1]}") from e
    entry = model.metadata_props.add()
    entry.key, entry.value = REPLAYED, as_written
    return model


REPLAYED = "jaxparity.converted_from_jaxpr"  # metadata of a model converted from the replayed trace
# ONNX ops that draw new numbers on every run: what jax2onnx makes of JAX's random numbers.
_RANDOM_OPS = ("RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Multinomial", "Bernoulli")


def _deterministic(model: Any) -> Any:
    """``model``, unless jax2onnx turned the program's random numbers (threefry: the same numbers for the same
    key) into ONNX ops that draw other ones each run: then nothing it computes can be compared."""
    import onnx

    constants = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}

    def training(node: Any) -> bool:  # a Dropout whose training_mode is not a constant False masks at random
        if len(node.input) < 3 or not node.input[2]:
            return False
        mode = constants.get(node.input[2])
        return mode is None or bool(np.asarray(mode).any())

    drawn = sorted({n.op_type + (" (training mode)" if n.op_type == "Dropout" else "")
                    for n, _ in _graph_nodes(model.graph, {})
                    if n.op_type in _RANDOM_OPS or (n.op_type == "Dropout" and training(n))})
    if drawn:
        raise PathError(f"jax2onnx {version('jax2onnx')} converted the program's random numbers into ONNX "
                        f"{', '.join(drawn)}, which draws other numbers on every run (JAX's threefry gives the same "
                        "ones for the same key): nothing it computes can be compared with JAX")
    return model


def _unbox(args: tuple) -> tuple:
    """Flax's parameter boxes (``nn.Partitioned``, ``nn.LogicallyPartitioned``: one child each, so the leaves
    keep their order) taken off: jax2onnx's linen plugins take the arrays, not the boxes."""
    meta = sys.modules.get("flax.core.meta")
    return meta.unbox(args) if meta is not None else args


def _graph_nodes(graph: Any, types: dict[str, int]) -> Iterator[tuple[Any, dict[str, int]]]:
    """(node, elem type by value name) for every node, subgraphs (Loop, If, Scan bodies) included."""
    values = [*graph.input, *graph.output, *graph.value_info]
    types = {**types, **{v.name: v.type.tensor_type.elem_type for v in values},
             **{t.name: t.data_type for t in graph.initializer}}
    for node in graph.node:
        yield node, types
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                yield from _graph_nodes(sub, types)


def _jaxpr_ops(jaxpr: Any, found: dict[str, Counter]) -> None:
    """Count each primitive by the dtype of its first operand, nested jaxprs included."""
    import jax
    from jax.extend import core
    for eqn in jaxpr.eqns:
        dtype = getattr(eqn.invars[0].aval, "dtype", None) if eqn.invars else None
        if dtype is not None and not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):  # a key has no numpy dtype
            found[eqn.primitive.name][np.dtype(dtype).name] += 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else [value]:
                if isinstance(sub, (core.Jaxpr, core.ClosedJaxpr)):
                    _jaxpr_ops(sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub, found)


def _io_findings(kind: str, names: list[str], values: Any, avals: list[Any], tail: str = "") -> list[str]:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, value, aval in zip(names, values, avals):
        elem = value.type.tensor_type.elem_type
        if elem and not _is_key(aval) and _np_dtype(elem) != np.dtype(aval.dtype):  # a key goes in as its data
            groups[(_np_dtype(elem).name, np.dtype(aval.dtype).name)].append(name)
    return [f"{kind}{'s' if len(n) > 1 else ''} {', '.join(n)} {'are' if len(n) > 1 else 'is'} {have} in the ONNX "
            f"model where the program declares {want}{tail}" for (have, want), n in groups.items()]


def _is_key(aval: Any) -> bool:
    import jax

    return jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key)


def dtype_findings(model: Any, fn: Callable[..., Any], args: tuple) -> list[str]:
    """A sentence per difference between the ONNX model's dtypes and those ``fn``'s jaxpr declares: graph
    inputs, outputs, and compute ops (Gemm/MatMul vs dot_general...) by operand dtype after shape inference."""
    import jax
    import onnx
    from ..pytree import argument_leaves, named_leaves
    from ..rounding import is_float_dtype
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    findings = _io_findings("input", [n for n, _ in argument_leaves(args)], model.graph.input, closed.in_avals)
    findings += _io_findings("output", [n for n, _ in named_leaves(out_shape, "out")], model.graph.output,
                             closed.out_avals, "; jaxparity rounds it once, to nearest even, to the declared dtype")
    declared: dict[str, Counter] = defaultdict(Counter)
    _jaxpr_ops(closed.jaxpr, declared)
    computed: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for node, types in _graph_nodes(onnx.shape_inference.infer_shapes(model).graph, {}):
        prim, elem = _SAME_AS.get(node.op_type), types.get(node.input[0], 0) if node.input else 0
        if prim and elem and is_float_dtype(_np_dtype(elem)):
            computed[(prim, _np_dtype(elem).name)][node.op_type] += 1
    for (prim, dtype), ops in computed.items():
        decl = {d: n for d, n in declared.get(prim, {}).items() if is_float_dtype(np.dtype(d))}
        if decl and dtype not in decl:
            have = ", ".join(f"{op} ({_count(n, 'op')})" for op, n in ops.items())
            want = " and ".join(f"{d} {prim} ({_count(n, 'op')})" for d, n in decl.items())
            findings.append(f"the ONNX model computes {have} in {dtype} where the program declares {want}: "
                            "the converter changed the precision")
    return findings


def _recorded(fn: Callable[..., Any], args: tuple, opset: int) -> tuple[Any, list[dict[str, Any]]]:
    """``fn`` converted again with jax2onnx's ``record_primitive_calls_file``: the model, and each call it
    converted (a primitive, or a flax module / jax.numpy function converted whole) as jax2onnx records it, in
    order; no record where this jax2onnx cannot write one. Kept in jaxparity's cache with the model."""
    import inspect
    import json
    import pathlib
    import tempfile

    import jax2onnx

    if "record_primitive_calls_file" not in inspect.signature(jax2onnx.to_onnx).parameters:
        return convert(fn, args, opset), []
    from ..cache import cache, fingerprint, package_versions

    def make(where: Any) -> dict[str, Any]:  # the model and its record, kept together: the record names its values
        record = os.path.join(str(where), "calls.json")
        (where / "model.onnx").write_bytes(convert(fn, args, opset, record=record).SerializeToString())
        if not os.path.exists(record):  # no record written: the model stands without it
            with open(record, "w") as f:
                json.dump([], f)
        return {}

    store = cache()
    if store is None:
        with tempfile.TemporaryDirectory() as tmp:
            make(pathlib.Path(tmp))
            return _read_recorded(pathlib.Path(tmp))
    from .staging import staged

    stage, leaves = staged(fn, _unbox(args))
    key = fingerprint("onnx-record", stage.program_key(leaves), opset,
                      package_versions("jax2onnx", "onnx", "onnx-ir", "flax"))
    return _read_recorded(store.fetch("onnx-record", key, make).dir)


def _read_recorded(where: Any) -> tuple[Any, list[dict[str, Any]]]:
    import json

    import onnx

    model = onnx.load_from_string((where / "model.onnx").read_bytes())
    try:
        calls = json.loads((where / "calls.json").read_text())
    except (OSError, ValueError):
        calls = []
    return model, [c for c in calls if isinstance(c, dict)]


# The converter's faults placed lately, by (the rejected model, the function): a run per input sample places it once.
_FAULTS: dict[tuple[bytes, int], Any] = {}


# How a reproducer runs a function on each ONNX runtime (``Path.repro_runner``); ``{opset}``: the target opset.
_RUNNERS = {
    "onnx": '''def run_onnx(f, args):  # jax2onnx -> onnxruntime (CPU execution provider)
    import jax2onnx
    import onnxruntime as ort
    model = jax2onnx.to_onnx(f, inputs=[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in args], opset={opset})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {{i.name: x for i, x in zip(session.get_inputs(), args)}})
''',
    "onnx-ref": '''def run_onnx_ref(f, args):  # jax2onnx -> onnx.reference.ReferenceEvaluator
    import jax2onnx
    from onnx.reference import ReferenceEvaluator
    model = jax2onnx.to_onnx(f, inputs=[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in args], opset={opset})
    return [np.asarray(y) for y in ReferenceEvaluator(model).run(
        None, {{i.name: x for i, x in zip(model.graph.input, args)}})]
''',
}


class _OnnxPath(Path):
    """Convert with jax2onnx, then ``execute`` the model: one subclass per runtime."""
    refuses_random = True
    capabilities = frozenset({"other_compiler"})
    heavy = True
    cost = 1.5  # jax2onnx converts equation by equation, then the checker and the runtime's session
    options_help = {"opset": "the ONNX opset jax2onnx targets (default 23)",
                    "keep": "a file to save the converted model in, e.g. keep=model.onnx",
                    "set_attribute": "attributes set on the converted model's nodes before it runs, OPTYPE.NAME=VALUE "
                    "separated by spaces (set_attribute=Resize.exclude_outside=1): a fix tried on the model the "
                    "runtime serves, not on the conversion"}
    converter = "jax2onnx"

    def repro_runner(self, extra: Mapping[str, str] | None = None) -> str | None:
        return _RUNNERS[self.name].format(opset=int(self.repro_options(extra).get("opset", "23")))
    # Attributes of a node whose other values are other semantics of the JAX op the converter mapped to it:
    # each one is tried on the served model, where that kernel is where the path departs (``kernel_variants``).
    ATTRIBUTE_VARIANTS: dict[str, dict[str, tuple[str, ...]]] = {
        "Resize": {"exclude_outside": ("0", "1"), "cubic_coeff_a": ("-0.5", "-0.75"),
                   "coordinate_transformation_mode": ("half_pixel", "pytorch_half_pixel", "align_corners",
                                                      "asymmetric")},
    }
    needs: tuple[str, ...] = ("jax2onnx", "onnx")

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # Path's own signature
        super().__init__(*args, **kwargs)
        if not self.options.get("opset", "23").isdigit():
            raise PathOptionError(f"path {self.name!r}: opset must be a whole number, got {self.options['opset']!r}")
        self.opset = int(self.options.get("opset", "23"))
        self.attributes = _parse_attributes(self.name, self.options.get("set_attribute", ""))

    def kernel_variants(self, kernel: Any) -> list[tuple[str, str]]:
        """(what, spec) for each other value of the attributes of ``kernel`` (a node of this path's
        artifact) that ``ATTRIBUTE_VARIANTS`` knows: this path with that attribute set on every such node."""
        found = []
        for name, values in self.ATTRIBUTE_VARIANTS.get(kernel.kind, {}).items():
            now = kernel.attributes.get(name, "")
            for value in values:
                if value == now or (not now and value == values[0]):  # the first value is ONNX's default
                    continue
                setting = f"{kernel.kind}.{name}={value}"
                opts = {**self.options, "set_attribute": " ".join([*self.options.get("set_attribute", "").split(),
                                                                    setting])}
                spec = self.name + ":" + ",".join(f"{k}={v}" for k, v in opts.items())
                found.append((f"the converter wrote {name}={now or values[0] + ', the default'}", spec))
        return found

    def _with_attributes(self, model: Any) -> Any:
        """The converted model with ``set_attribute`` applied to its nodes."""
        import onnx

        for op_type, name, value in self.attributes:
            nodes = [n for n in model.graph.node if n.op_type == op_type]
            if not nodes:
                raise PathOptionError(f"{self.name}: set_attribute {op_type}.{name}: the converted model has no "
                                      f"{op_type} node (it has {', '.join(sorted({n.op_type for n in model.graph.node}))})")
            for node in nodes:
                for a in list(node.attribute):
                    if a.name == name:
                        node.attribute.remove(a)
                number = re.fullmatch(r"-?\d+", value) or re.fullmatch(r"-?\d*\.\d+(e-?\d+)?", value)
                parsed: Any = (int(value) if "." not in value and "e" not in value else float(value)) if number else value
                node.attribute.append(onnx.helper.make_attribute(name, parsed))
        return model

    def unavailable_reason(self) -> str | None:
        missing = [m for m in self.needs if (sys.modules[m] is None if m in sys.modules  # None: blocked
                                             else importlib.util.find_spec(m) is None)]
        return f"{', '.join(missing)} not installed: {_INSTALL}" if missing else None

    def execute(self, model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError  # the runtime's part

    def _feeds(self, model: Any, args: tuple) -> dict[str, np.ndarray]:
        import jax

        from ..pytree import host

        leaves = [host(x) for x in jax.tree_util.tree_leaves(args)]
        if len(leaves) != len(model.graph.input):
            raise PathError(f"the ONNX graph has {len(model.graph.input)} inputs for {len(leaves)} argument leaves")
        return {v.name: np.ascontiguousarray(x.astype(_np_dtype(v.type.tensor_type.elem_type)))
                for v, x in zip(model.graph.input, leaves)}  # cast where the converter retyped an input

    def _converted_with_calls(self, fn: Callable[..., Any], args: tuple) -> tuple[Any, list[tuple[str, tuple[str, ...]]]]:
        """The converted model (this path's attributes set) and jax2onnx's record of the calls it converted,
        in order: (name, output tensor names); no record where this jax2onnx cannot write one."""
        model, calls = _recorded(fn, args, self.opset)
        return self._with_attributes(model), [(str(c.get("primitive_name", "")), tuple(c.get("outputs_onnx_names") or ()))
                                              for c in calls]

    def _checked(self, model: Any, fn: Callable[..., Any], args: tuple, findings: list[str]) -> None:
        """Raise the converter's fault (``onnx_check``), the model's ``findings`` after it, where ONNX's checker
        rejects the model jax2onnx wrote: neither runtime is judged on it. The calls jax2onnx converted,
        recorded in a second conversion, place the rejected node in the program; only a rejected model pays."""
        from .onnx_check import fault, rejected

        found = rejected(model)
        if found is None:
            return
        key = (hashlib.sha256(model.SerializeToString()).digest(), id(fn))  # many samples: placed once
        blame = _FAULTS.get(key)
        if blame is None:
            recorded, calls = _recorded(fn, args, self.opset)
            if calls:  # the calls name the values of the model they were recorded with
                model, found = recorded, rejected(recorded) or found
            blame = _FAULTS[key] = fault(model, f"jax2onnx {version('jax2onnx')}", found[0], found[1], calls, fn, args)
            while len(_FAULTS) > 8:
                _FAULTS.pop(next(iter(_FAULTS)))
        raise PathError("\n".join([blame.text, *findings]), fault=blame)

    def artifact(self, fn: Callable[..., Any], args: tuple) -> Any:
        """The ONNX graph as jax2onnx converted it: its nodes (op types and attributes), initializers and
        Constant nodes as stored, and every value of its top-level graph from one run of that same graph by
        this path's runtime, each value made a graph output (no second conversion)."""
        import jax
        import onnx

        from .artifact import Artifact, Kernel, Tensor

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)
        model, calls = self._converted_with_calls(fn, args)
        inferred = onnx.shape_inference.infer_shapes(model)
        graph = inferred.graph
        typed = {v.name: v for v in [*graph.value_info, *graph.output, *graph.input]}
        outputs = [o.name for o in graph.output]
        extra = [typed[n] for node in graph.node for n in node.output if n in typed and n not in outputs]
        observed = onnx.ModelProto()
        observed.CopyFrom(model)
        del observed.graph.output[:]
        observed.graph.output.extend([*(typed[n] for n in outputs), *extra])
        feeds = self._feeds(model, args)
        values = self.execute(observed, feeds)
        names = [*outputs, *(v.name for v in extra)]
        index: dict[str, int] = {}

        def tensor(name: str) -> int:
            return index.setdefault(name, len(index))

        for v in graph.input:
            tensor(v.name)
        stored: dict[str, np.ndarray | None] = {init.name: onnx.numpy_helper.to_array(init)
                                                for init in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant" and node.attribute:
                stored[node.output[0]] = onnx.numpy_helper.to_array(node.attribute[0].t) \
                    if node.attribute[0].type == onnx.AttributeProto.TENSOR else None
        kernels: list[Kernel] = []
        for node in graph.node:
            if node.op_type == "Constant":
                continue
            attributes = {a.name: (v.decode() if isinstance(v := onnx.helper.get_attribute_value(a), bytes) else str(v))
                          for a in node.attribute}
            kernels.append(Kernel(len(kernels), node.op_type, tuple(tensor(n) if n else -1 for n in node.input),
                                  tuple(tensor(n) for n in node.output), attributes))
        by_name = {**{k: np.asarray(v) for k, v in feeds.items()}, **{k: np.asarray(v) for k, v in stored.items()
                                                                      if v is not None}}
        by_name.update(zip(names, (np.asarray(v) for v in values)))
        tensors = {i: Tensor(i, name, tuple(by_name[name].shape) if name in by_name else (),
                             by_name[name].dtype.name if name in by_name else "?", name in stored)
                   for name, i in index.items()}
        whole = tuple((name, tuple(index[n] for n in outs if n in index)) for name, outs in calls if "." in name)
        found = Artifact(f"the ONNX graph (run by {self.name})", tuple(kernels), tensors,
                         {index[n]: by_name[n] for n in index if n in by_name}, tuple(index[n] for n in outputs),
                         converted=whole)
        if whole:
            counts = Counter(name for name, _ in whole)
            found.notes.append(
                f"jax2onnx converted {len(whole)} of the {len(calls)} calls it recorded whole ("
                + ", ".join(f"{n} ×{k}" if k > 1 else n for n, k in counts.items()) + "): the served graph holds "
                "their outputs, not their inner ops' (a program that returns every intermediate, converted "
                "primitive by primitive, is another graph)")
        found.notes.append(f"read the ONNX graph back: {len(kernels)} nodes "
                           f"({', '.join(sorted({k.kind for k in kernels}))}), every value observed in one run")
        return found

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax
        import onnx
        from ..rounding import round_to_dtype
        args = jax.tree_util.tree_map(jax.numpy.asarray, args)  # Python scalars get JAX's dtypes
        model = convert(fn, args, self.opset)
        findings = [f"finding: {f}" for f in dtype_findings(model, fn, args)]
        self._checked(model, fn, args, findings)  # the model as jax2onnx wrote it, before any attribute of ours
        model = self._with_attributes(model)
        if self.attributes:
            self.notes.append("set on the converted model: " + ", ".join(f"{t}.{n}={v}" for t, n, v in self.attributes))
        cached = next((p.value for p in model.metadata_props if p.key == CACHED), None)
        if cached:
            kept = [p for p in model.metadata_props if p.key != CACHED]
            del model.metadata_props[:]
            model.metadata_props.extend(kept)
        if self.options.get("keep"):
            onnx.save(model, self.options["keep"])
        self.notes.append(f"converted by jax2onnx {version('jax2onnx')} (onnx {onnx.__version__}), "
                          f"opset {self.opset}, {_count(len(model.graph.node), 'node')}")
        if cached:
            self.notes.append(f"ONNX model reused from jaxparity's cache (entry {cached}: same program, opset and "
                              "versions; --no-cache converts again)")
        replayed = next((p.value for p in model.metadata_props if p.key == REPLAYED), None)
        if replayed:
            self.notes.append("converted from the function's jaxpr, primitive by primitive (jax2onnx's plugins patch "
                              f"flax and jax.numpy, and the model's own calls missed them); as written: {replayed}")
        self.notes += findings
        feeds = self._feeds(model, args)
        try:
            outputs = self.execute(model, feeds)
        except PathError as e:
            raise PathError("\n".join([str(e), *findings])) from e
        flat, tree = jax.tree_util.tree_flatten(jax.eval_shape(fn, *args))
        if len(outputs) != len(flat):
            raise PathError(f"the ONNX model returned {len(outputs)} outputs where fn returns {len(flat)}")
        for i, (y, want) in enumerate(zip(outputs, flat)):
            y = as_declared(y, want, f"ONNX output {i}", self.notes)
            outputs[i] = y if y.dtype == want.dtype else round_to_dtype(y, want.dtype)
        return jax.tree_util.tree_unflatten(tree, outputs)


def _parse_attributes(path: str, text: str) -> list[tuple[str, str, str]]:
    """'Resize.exclude_outside=1 Resize.cubic_coeff_a=-0.75' -> [(op type, attribute, value), ...]."""
    found = []
    for item in text.split():
        m = re.fullmatch(r"([A-Za-z][\w]*)\.(\w+)=(\S+)", item)
        if not m:
            raise PathOptionError(f"{path}: set_attribute takes OPTYPE.NAME=VALUE items separated by spaces "
                                  f"(Resize.exclude_outside=1), not {item!r}")
        found.append((m[1], m[2], m[3]))
    return found


def _missing_kernels(model: Any) -> dict[str, set[str]]:
    """dtype -> op types lacking a CPU kernel at that dtype; ops only ever inlined (CastLike) are skipped."""
    import onnx
    from onnxruntime.capi import _pybind_state as ort_c
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    kernels = [k for k in ort_c.get_all_opkernel_def() if k.provider == "CPUExecutionProvider"]
    missing: dict[str, set[str]] = defaultdict(set)
    for node, types in _graph_nodes(onnx.shape_inference.infer_shapes(model).graph, {}):
        if not onnx.defs.has(node.op_type, opsets.get(node.domain, 1), node.domain):
            continue
        schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain, 1), node.domain)
        mine = [k for k in kernels if (k.domain, k.op_name) == (node.domain, node.op_type)]
        if not mine and (schema.has_function or schema.has_context_dependent_function):  # type: ignore[attr-defined]
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
    same_artifact = "onnx-ref"
    needs = ("jax2onnx", "onnx", "onnxruntime")
    distributions = ("jax2onnx", "onnxruntime")

    def execute(self, model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        import onnxruntime as ort
        from onnx import TensorProto, helper
        self.notes.append(f"run by onnxruntime {ort.__version__}, CPUExecutionProvider")
        try:
            session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            inputs = {k: ort.OrtValue.ortvalue_from_numpy(x) if x.dtype.kind != "V"  # ml_dtypes go in as bits
                      else ort.OrtValue.ortvalue_from_numpy_with_onnx_type(x.view(f"u{x.itemsize}"),
                                                                           helper.np_dtype_to_tensor_dtype(x.dtype))
                      for k, x in feeds.items()}  # alive until the outputs are copied: they may alias inputs
            outs = session.run_with_ort_values(None, inputs)
        except Exception as e:
            m = re.search(r":\s*\d+\s*:\s*([A-Z_]+)\s*:\s*(.*)", str(e))
            code, text = (m[1], m[2].strip()) if m else (type(e).__name__, _first_line(e))
            missing = _missing_kernels(model) if code == "NOT_IMPLEMENTED" else {}
            if missing:
                what = "; ".join(f"no {d} kernel for {', '.join(sorted(ops))}" for d, ops in missing.items())
                raise PathError(f"onnxruntime's CPU provider has {what} (NOT_IMPLEMENTED); "
                                "the onnx-ref path runs the same model") from e
            raise PathError(f"onnxruntime {ort.__version__} could not run the converted model ({code}): {text}") from e
        results = []
        for v in outs:  # .numpy() knows no bfloat16: ml_dtypes come back as their bits
            dtype = _np_dtype(TensorProto.DataType.Value(v.data_type()[len("tensor("):-1].upper()))
            results.append(np.array(v.numpy()) if dtype.kind != "V" else np.frombuffer(
                ctypes.string_at(v.data_ptr(), v.tensor_size_in_bytes()), dtype).reshape(v.shape()).copy())
        return results


class OnnxReferencePath(_OnnxPath):
    name = "onnx-ref"
    summary = "jax2onnx model run by onnx.reference.ReferenceEvaluator (numpy, every dtype)"
    same_artifact = "onnx"
    cost = 0.2  # after onnx, in its worker: the same converted model
    distributions = ("jax2onnx", "onnx")

    def execute(self, model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        import onnx
        from onnx.reference import ReferenceEvaluator

        self.notes.append("run by onnx.reference.ReferenceEvaluator")
        loop, stacked = _stacking_loop()
        try:
            outputs = [np.asarray(y) for y in ReferenceEvaluator(model, new_ops=[loop] if loop else None)
                       .run(None, feeds)]
        except Exception as e:
            raise PathError(f"onnx.reference could not run the converted model: {_first_line(e)}") from e
        if stacked:
            shapes = ", ".join(sorted({str(s) for s in stacked}))
            self.notes.append(
                f"onnx.reference {onnx.__version__} joins a Loop's scan outputs with np.vstack: it concatenates "
                f"per-iteration outputs of rank 2 or more along their first axis (here {shapes}) where ONNX Runtime, "
                "ONNX shape inference and its own rank-1 results stack them on a new leading axis; run with a Loop "
                "that stacks them (onnx.reference's own Loop, its scan outputs reshaped)")
        return outputs


def _stacking_loop() -> tuple[Any, list[tuple[int, ...]]]:
    """onnx.reference's ``Loop`` with its scan outputs stacked on a new leading axis, and the list where it
    records each per-iteration shape it had to restack; (None, []) where this onnx's Loop is not built as
    expected (onnx 1.23: ``_run`` gathers the body's outputs through an instance ``_run_body``).

    ONNX Runtime and shape inference give a scan output of per-iteration shape S the shape (n, *S);
    onnx.reference's ``np.vstack`` gives that only for rank-1 S and (n * S[0], *S[1:]) beyond, which the
    next op (a Transpose with a rank-3 perm) then rejects, or silently reads in another layout."""
    try:
        from onnx.reference.ops.op_loop import Loop as ReferenceLoop
    except ImportError:
        return None, []
    stacked: list[tuple[int, ...]] = []

    class Loop(ReferenceLoop):  # type: ignore[misc, valid-type]
        op_domain = ""

        def _run(self, *args: Any, **kwargs: Any) -> Any:
            body, seen = getattr(self, "_run_body", None), []
            if body is None or not self.K:
                return super()._run(*args, **kwargs)

            def counted(*a: Any, **k: Any) -> Any:
                out = body(*a, **k)
                seen.append([np.shape(o) for o in out[len(out) - self.K:]])
                return out

            self._run_body = counted
            try:
                res = list(super()._run(*args, **kwargs))
            finally:
                self._run_body = body
            if seen:
                first = len(res) - self.K if len(res) >= self.K else 0
                for k, shape in enumerate(seen[-1]):
                    want = (len(seen), *shape)
                    got = np.asarray(res[first + k])
                    if got.shape != want and got.size == int(np.prod(want)):
                        res[first + k] = got.reshape(want)
                        stacked.append(tuple(shape))
            return tuple(res)

    return Loop, stacked
