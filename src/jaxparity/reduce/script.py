"""The reproducer as a standalone Python script: the region's ops bound as JAX binds them, its inputs
bit for bit, the two computations written out the way jaxparity's paths run them, and a verdict as the
exit status (1 while the two differ, 0 once they agree), so the script doubles as a regression test.

Each computation is a short function of ``(f, args)`` that mirrors one path (``paths/``): eager is
op by op under ``jax.disable_jit``; jit and export compile with the path's XLA options; savedmodel
converts with jax2tf and runs the SavedModel in TensorFlow; tflite, onnx and iree convert and run the
one-region function in that runtime. A declared (float64) baseline cannot be recomputed without
jaxparity: its values are written into the script.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from jax.extend.core import Literal

from ..paths.base import parse_option_value, parse_spec
from ..localize.region import Region
from .source import array_source, literal_source, params_source, primitive_source

__all__ = ["Script", "write_script", "RUNNABLE"]

INLINE_ELEMENTS = 256  # inputs larger than this (in total) go into a sidecar .npz

# How each path is written in a script. ``{options}`` is the path's XLA compile options.
_RUNNERS: dict[str, str] = {
    "eager": '''def run_eager(f, args):  # op by op: each primitive compiled and rounded on its own
    return [np.asarray(y) for y in f(*args)]
''',
    "jit": '''def run_jit(f, args):  # one XLA program, with the path's compile options
    compiled = jax.jit(f).lower(*args).compile(compiler_options={options})
    return [np.asarray(y) for y in compiled(*args)]
''',
    "export": '''def run_export(f, args):  # jax.export -> serialize -> deserialize -> call
    from jax import export
    call = export.deserialize(export.export(jax.jit(f))(*args).serialize()).call
    compiled = jax.jit(call).lower(*args).compile(compiler_options={options})
    return [np.asarray(y) for y in compiled(*args)]
''',
    "savedmodel": '''def run_savedmodel(f, args):  # jax2tf -> SavedModel (left in ./repro_savedmodel) -> TensorFlow
    import tensorflow as tf
    from jax.experimental import jax2tf
    module = tf.Module()
    module.f = tf.function(jax2tf.convert(f, with_gradient=False), autograph=False,
                           input_signature=[tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)) for x in args])
    tf.saved_model.save(module, "repro_savedmodel")
    return [np.asarray(y) for y in tf.saved_model.load("repro_savedmodel").f(*args)]
''',
    "tflite": '''def run_tflite(f, args):  # jax2tf -> SavedModel -> TFLiteConverter -> LiteRT interpreter
    import tempfile
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from jax.experimental import jax2tf
    module = tf.Module()
    module.f = tf.function(lambda *xs: {{f"out{{i}}": y for i, y in enumerate(jax2tf.convert(f)(*xs))}},
                           input_signature=[tf.TensorSpec(x.shape, tf.as_dtype(x.dtype), name=f"in{{i}}")
                                            for i, x in enumerate(args)], autograph=False)
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures={{"serving_default": module.f.get_concrete_function()}})
        model = tf.lite.TFLiteConverter.from_saved_model(tmp).convert()
    runner = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.{resolver}
                         ).get_signature_runner("serving_default")
    out = runner(**{{f"in{{i}}": x for i, x in enumerate(args)}})
    return [np.asarray(out[f"out{{i}}"]) for i in range(len(out))]
''',
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
    "iree": '''def run_iree(f, args):  # StableHLO -> iree-compile (llvm-cpu) -> IREE runtime
    from iree import compiler, runtime
    text = jax.jit(f, keep_unused=True).lower(*args).as_text(dialect="stablehlo")
    vmfb = compiler.compile_str(text, target_backends=["llvm-cpu"], input_type="stablehlo",
                                extra_args={flags})
    out = runtime.load_vm_flatbuffer(vmfb, driver={driver!r}).main(*args)
    return [np.asarray(y.to_host()) for y in (out if isinstance(out, (tuple, list)) else [out])]
''',
}
RUNNABLE = frozenset(_RUNNERS) | {"declared", "f64"}

_REPORT = '''def report(k, e, o):  # prints the elements that differ (NaN equals NaN); returns how many
    e, o = np.ravel(e), np.ravel(o)
    idx = np.flatnonzero((e != o) & ~((np.isnan(e) & np.isnan(o)) if e.dtype.kind in "fcV" else False))
    print(f"output {k}: {idx.size} of {e.size} elements differ", *(f"[{i}] {e[i].item()!r} vs {o[i].item()!r}"
                                                                  for i in idx[:8]))
    return idx.size
'''


@dataclass
class Script:
    text: str
    code_lines: int  # lines of code, data and comments excluded
    sidecar: dict[str, np.ndarray] = field(default_factory=dict)  # arrays for NAME.npz, when too big inline
    fixed: str | None = None  # what --fixed changes


def _runner(spec: str, fix_options: dict[str, str] | None = None) -> str:
    kind, options = parse_spec(spec)
    if fix_options:
        options = {**options, **fix_options}
    lowered = {k: parse_option_value(v) for k, v in options.items() if k.islower() and not k.startswith("jax_")}
    if kind in ("jit", "export"):
        return _RUNNERS[kind].format(options=repr(lowered) if lowered else "None").replace("None or None", "None")
    if kind == "tflite":
        resolver = {"xnnpack": "AUTO", "builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
                    "reference": "BUILTIN_REF"}[options.get("kernels", "xnnpack")]
        return _RUNNERS[kind].format(resolver=resolver)
    if kind in ("onnx", "onnx-ref"):
        return _RUNNERS[kind].format(opset=int(options.get("opset", "23")))
    if kind == "iree":
        flags = [f"--iree-llvmcpu-target-cpu={options.get('target_cpu', 'host')}", "--iree-input-demote-f64-to-f32=false"]
        if options.get("cpu_features"):
            flags.append(f"--iree-llvmcpu-target-cpu-features={','.join(options['cpu_features'].split())}")
        flags += options.get("flags", "").split()
        return _RUNNERS[kind].format(flags=repr(flags), driver=options.get("driver", "local-task"))
    return _RUNNERS[kind]


def _fn_name(spec: str) -> str:
    return "run_" + parse_spec(spec)[0].replace("-", "_")


def _function(region: Region, names: list[str], model_fix: Sequence[str],
              fix_params: dict[str, str] | None = None, fix_instead: str | None = None) -> list[str]:
    """``def f(x0, ...)``: the region's ops bound in program order, the target's outputs returned;
    ``fix_instead``: the name of a function computed instead of the target op under --fixed."""
    prog = region.program
    env = dict(zip(region.inputs, names))
    lines = [f"def f({', '.join(names)}):"]
    lines += [f"    {ln}" for ln in model_fix]
    for k, i in enumerate(region.ops):
        op = prog.ops[i]
        ins = [literal_source(r.val, r.aval.dtype) if isinstance(r, Literal) else env[r] for r in op.inputs]
        params = params_source(dict(op.eqn.params), fix_params if i == region.target else None)
        outs = [f"v{k}_{j}" for j in range(len(op.outputs))]
        for vid, name in zip(op.outputs, outs):
            if vid is not None:
                env[vid] = name
        call = f"{primitive_source(op.info.primitive)}.bind({', '.join(ins)}{', ' if params and ins else ''}{params})"
        target = ", ".join(outs) if op.eqn.primitive.multiple_results else outs[0]
        if op.eqn.primitive.multiple_results and len(outs) == 1:
            target += ","
        where = op.info.user_source or op.info.source or ""
        if fix_instead and i == region.target and not op.eqn.primitive.multiple_results:
            call = f"{fix_instead}({', '.join(ins)}) if FIXED else {call}"
        lines.append(f"    {target} = {call}" + (f"  # {where}" if where else ""))
    lines.append(f"    return {', '.join(env[v] for v in region.outputs)},")
    return lines


def write_script(region: Region, baseline: str, path: str, *, docstring: str, expected: list[np.ndarray] | None,
                 fix_flags: dict[str, str] | None = None, fix_env: dict[str, str] | None = None,
                 model_fix: Sequence[str] = (), fix_params: dict[str, str] | None = None, fix_text: str | None = None,
                 name: str = "repro.py", fix_instead: str | None = None) -> Script:
    """The standalone script for ``region``: ``baseline`` and ``path`` each run ``f``; exit 1 while
    they differ. ``--fixed`` applies ``fix_flags`` (compile options of the path), ``fix_env``
    (environment of the process, e.g. XLA_FLAGS for TensorFlow), ``model_fix`` (lines at the top of
    ``f``), ``fix_params`` (parameters of the target op) or ``fix_instead`` (the source of a function
    computed instead of the target op)."""
    names = [f"x{i}" for i in range(len(region.values))]
    data: list[str] = []
    sidecar: dict[str, np.ndarray] = {}
    path_env = {k: v for k, v in parse_spec(path)[1].items() if k.isupper()}
    uses_fixed = bool(fix_flags or model_fix or fix_params or fix_instead)  # the FIXED name, inside the program
    inline = region.size <= INLINE_ELEMENTS
    code = ["import os", "import sys",
            "sys.excepthook = lambda *e: (sys.__excepthook__(*e), sys.stdout.flush(), os._exit(2))  # failing: exit 2"]
    code += [f"os.environ[{k!r}] = {v!r}  # the path's environment" for k, v in path_env.items()]
    if fix_env:
        code += [f"if '--fixed' in sys.argv:  # {fix_text or 'the fix'}"]
        code += [f"    os.environ[{k!r}] = {v!r}" for k, v in fix_env.items()]
    if not (fix_env or fix_flags or model_fix or fix_params or fix_instead):
        code += ["if '--fixed' in sys.argv:",
                 "    sys.exit(print('no fix was verified for this divergence: --fixed changes nothing') or 2)"]
    code += ["", "import jax", "import numpy as np"] + (["from typing import Any  # the rewrite's annotations"]
                                                       if fix_instead else [])
    if any(primitive_source(region.program.ops[i].info.primitive).startswith("primitives.") for i in region.ops):
        code.append("import jax.extend.core.primitives as primitives")
    if uses_fixed:
        code += ["", "FIXED = '--fixed' in sys.argv"]
    if inline:
        data += [f"{n} = {array_source(v)}" for n, v in zip(names, region.values)]
    else:
        for n, v in zip(names, region.values):
            a = np.asarray(v)
            sidecar[n] = a.view(f"uint{8 * a.dtype.itemsize}") if a.dtype.kind in "fV" else a
        stem = os.path.splitext(name)[0]
        data.append(f"_npz = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), {stem + '.npz'!r}))")
        data += [f"{n} = _npz[{n!r}].view({_dtype(np.asarray(v).dtype)})" for n, v in zip(names, region.values)]
    fix_lines = [f"if FIXED:  # {fix_text or 'the fix'}"] + [f"    {ln}" for ln in model_fix] if model_fix else []
    instead = fix_instead.split("def ", 1)[1].split("(", 1)[0] if fix_instead else None
    body = _function(region, names, fix_lines, fix_params, instead)
    if fix_instead:  # the rewrite, as jaxparity verified it, before f
        body = [f"# with --fixed: {fix_text or 'the fix'}", *fix_instead.rstrip().splitlines(), "", "", *body]
    if fix_params and not model_fix:
        body.insert(1, f"    # with --fixed: {fix_text or 'the fix'}")
    runners = []
    for spec, flags in ((baseline, None), (path, fix_flags)):
        kind = parse_spec(spec)[0]
        if kind in ("declared", "f64") or (kind == "eager" and spec == baseline and not flags):
            continue  # written into the script as values / as the plain call of f
        text = _runner(spec)
        if flags:
            fixed = _runner(spec, flags)
            fn = _fn_name(spec)
            text = (text.replace(f"def {fn}(", f"def {fn}_as_found(", 1) + "\n\n" +
                    fixed.replace(f"def {fn}(", f"def {fn}_fixed(", 1) + "\n\n" +
                    f"{fn} = {fn}_fixed if FIXED else {fn}_as_found\n")
        if text not in runners:
            runners.append(text)
    expected_lines = []
    if parse_spec(baseline)[0] in ("declared", "f64"):
        expected_lines.append(f"EXPECTED = [  # {baseline}: the program's declared semantics, computed by jaxparity")
        expected_lines += [f"    {array_source(e)}," for e in expected or []]
        expected_lines.append("]")
        first = "EXPECTED"
    elif parse_spec(baseline)[0] == "eager":
        first = f"[np.asarray(y) for y in f({', '.join(names)})]"  # eager: op by op, each primitive on its own
    else:
        first = f"{_fn_name(baseline)}(f, args)"
    args = f"({', '.join(names)}{',' if len(names) == 1 else ''})"
    main = [f"expected, observed = {first.replace('args', args)}, {_fn_name(path)}(f, {args})  # {baseline}, {path}",
            _versions_line(baseline, path),
            "sys.exit(1 if sum(report(k, e, o) for k, (e, o) in enumerate(zip(expected, observed))) else 0)"]
    text = "\n".join([f'"""{docstring.rstrip()}\n"""', "", *code, "", *data, "", "", *body, "", "",
                      *[r + "\n" for r in runners], _REPORT, "", *expected_lines, *main]) + "\n"
    while "\n\n\n\n" in text:
        text = text.replace("\n\n\n\n", "\n\n\n")
    counted = [*code, *body, *runners, _REPORT, *main]
    n = sum(1 for block in counted for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#"))
    return Script(text, n, sidecar, fix_text if (uses_fixed or fix_env) else None)


def _dtype(dtype: np.dtype) -> str:
    return f"np.{dtype.name}" if dtype.kind != "V" and dtype.name in np.sctypeDict else f"jax.numpy.{dtype.name}"


def _versions_line(baseline: str, path: str) -> str:
    """A line printing the versions of what ran (the modules the two computations imported)."""
    mods = ["jax", "jaxlib", "tensorflow", "ai_edge_litert", "onnxruntime", "onnx"]
    return (f"print(*(f'{{m}} {{sys.modules[m].__version__}}' for m in {mods!r} "
            "if hasattr(sys.modules.get(m), '__version__')), sep=', ')")
