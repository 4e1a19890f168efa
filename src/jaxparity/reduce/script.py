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
from typing import Any

import numpy as np
from jax.extend.core import Literal

from ..paths import PATHS, make_path
from ..paths.base import parse_spec
from ..localize.program import FlatProgram
from ..localize.region import Region
from .source import array_source, literal_source, params_source, primitive_source

__all__ = ["Script", "function_source", "runnable", "runnable_paths", "write_script"]

INLINE_ELEMENTS = 256  # inputs larger than this (in total) go into a sidecar .npz

def runnable(spec: str) -> bool:
    """Can a reproducer compute ``spec``: a path that writes its own runner (``Path.repro_runner``), or a
    reference whose values are written into the script?"""
    path = make_path(spec)
    return path.reference or path.repro_runner() is not None


def runnable_paths() -> list[str]:
    """The names of the paths a reproducer can compute, for messages."""
    return sorted(name for name in PATHS if runnable(name))

_REPORT = '''def report(k, e, o):  # prints the elements that differ (NaN equals NaN); returns how many
    e, o = np.ravel(e), np.ravel(o)
    idx = np.flatnonzero((e != o) & ~((np.isnan(e) & np.isnan(o)) if e.dtype.kind in "fcV" else False))
    print(f"output {k}: {idx.size} of {e.size} elements differ", *(f"[{i}] {e[i].item()!r} vs {o[i].item()!r}"
                                                                  for i in idx[:8]))
    return idx.size
'''

# With a fix verified as two roundings of the same math (explain's fix search: within a few ULP), --fixed
# counts only the elements further apart than that.
_REPORT_ULP = '''def ulps(e, o):  # how many floats of their dtype lie between e and o, from their bit patterns
    bits = 8 * e.dtype.itemsize
    key = [np.where(i < 0, -(1 << (bits - 1)) - i, i) for i in (x.view(f"i{e.dtype.itemsize}").astype(np.int64)
                                                                for x in (e, o))]
    return np.abs(key[0] - key[1])


def report(k, e, o):  # prints the elements that differ (NaN equals NaN; with --fixed: by more than ULP); how many
    e, o = np.ravel(e), np.ravel(o)
    bad = (e != o) & ~((np.isnan(e) & np.isnan(o)) if e.dtype.kind in "fcV" else False)
    if ULP and e.dtype.kind in "fV":
        bad &= ulps(e, o) > ULP
    idx = np.flatnonzero(bad)
    print(f"output {k}: {idx.size} of {e.size} elements differ" + (f" by more than {ULP} ULP" if ULP else ""),
          *(f"[{i}] {e[i].item()!r} vs {o[i].item()!r}" for i in idx[:8]))
    return idx.size
'''


@dataclass
class Script:
    text: str
    code_lines: int  # lines of code, data and comments excluded
    sidecar: dict[str, np.ndarray] = field(default_factory=dict)  # arrays for NAME.npz, when too big inline
    fixed: str | None = None  # what --fixed changes


def _runner(spec: str, fix_options: dict[str, str] | None = None) -> str:
    text = make_path(spec).repro_runner(fix_options)
    if text is None:
        raise ValueError(f"{spec}: a reproducer cannot run this path")
    return text


def _fn_name(spec: str) -> str:
    return "run_" + parse_spec(spec)[0].replace("-", "_")


def _bind_line(op: Any, ins: list[str], outs: list[str], fix_params: dict[str, str] | None = None) -> tuple[str, str]:
    """(the names it assigns, the call): one op bound as JAX binds it, on the named inputs."""
    params = params_source(dict(op.eqn.params), fix_params)
    call = f"{primitive_source(op.info.primitive)}.bind({', '.join(ins)}{', ' if params and ins else ''}{params})"
    target = ", ".join(outs) if op.eqn.primitive.multiple_results else outs[0]
    if op.eqn.primitive.multiple_results and len(outs) == 1:
        target += ","
    return target, call


def _operand(ref: Any, env: dict[int, str]) -> str:
    return literal_source(ref.val, ref.aval.dtype) if isinstance(ref, Literal) else env[ref]  # type: ignore[attr-defined]  # a Literal's aval is a ShapedArray


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
        ins = [_operand(r, env) for r in op.inputs]
        outs = [f"v{k}_{j}" for j in range(len(op.outputs))]
        for vid, name in zip(op.outputs, outs):
            if vid is not None:
                env[vid] = name
        target, call = _bind_line(op, ins, outs, fix_params if i == region.target else None)
        where = op.info.user_source or op.info.source or ""
        if fix_instead and i == region.target:
            call = f"{fix_instead}({', '.join(ins)}) if FIXED else {call}"
        lines.append(f"    {target} = {call}" + (f"  # {where}" if where else ""))
    lines.append(f"    return {', '.join(env[v] for v in region.outputs)},")
    return lines


def function_source(name: str, program: FlatProgram, comment: str = "", several: bool = False) -> str:
    """``def NAME(a0, ...)``: a whole flat program (a change the fix search made to one op, traced on the op's
    inputs) written as the primitives it binds, its constants bit for bit; it returns the program's outputs
    (one value, or a tuple where there are several or ``several`` says the op has several). Raises ``NotWritable`` where a parameter has no source."""
    env: dict[int, str] = {vid: f"a{i}" for i, vid in enumerate(program.arg_ids)}
    lines = [f"def {name}({', '.join(env[v] for v in program.arg_ids)}):" + (f"  # {comment}" if comment else "")]
    for k, (vid, value) in enumerate(program.consts.items()):
        env[vid] = f"c{k}"
        lines.append(f"    c{k} = {array_source(np.asarray(value))}")
    for k, op in enumerate(program.ops):
        outs = [f"t{k}_{j}" for j in range(len(op.outputs))]
        env.update((vid, out) for vid, out in zip(op.outputs, outs) if vid is not None)
        target, call = _bind_line(op, [_operand(r, env) for r in op.inputs], outs)
        lines.append(f"    {target} = {call}")
    results = [_operand(r, env) for r in program.out_ids]
    lines.append(f"    return {results[0] if len(results) == 1 and not several else ', '.join(results) + ','}")
    return "\n".join(lines) + "\n"


def write_script(region: Region, baseline: str, path: str, *, docstring: str, expected: list[np.ndarray] | None,
                 fix_flags: dict[str, str] | None = None, fix_env: dict[str, str] | None = None,
                 model_fix: Sequence[str] = (), fix_params: dict[str, str] | None = None, fix_text: str | None = None,
                 name: str = "repro.py", fix_instead: str | None = None, fix_ulp: int = 0) -> Script:
    """The standalone script for ``region``: ``baseline`` and ``path`` each run ``f``; exit 1 while
    they differ. ``--fixed`` applies ``fix_flags`` (compile options of the path), ``fix_env``
    (environment of the process, e.g. XLA_FLAGS for TensorFlow), ``model_fix`` (lines at the top of
    ``f``), ``fix_params`` (parameters of the target op) or ``fix_instead`` (the source of a function
    computed instead of the target op); ``fix_ulp``: with --fixed, elements this many ULP apart or fewer agree
    (a fix verified as two roundings of the same math)."""
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
    if any(primitive_source(region.program.ops[i].info.primitive).startswith("primitives.") for i in region.ops) \
            or "primitives." in (fix_instead or ""):
        code.append("import jax.extend.core.primitives as primitives")
    if uses_fixed:
        code += ["", "FIXED = '--fixed' in sys.argv"]
    if fix_ulp:
        code += [f"ULP = {fix_ulp} if '--fixed' in sys.argv else 0  # with --fixed: two roundings of the same math"]
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
        p = make_path(spec)
        if p.reference or (p.has("op_by_op") and spec == baseline and not flags):
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
    report = _REPORT_ULP if fix_ulp else _REPORT
    expected_lines = []
    if make_path(baseline).reference:
        expected_lines.append(f"EXPECTED = [  # {baseline}: the program's declared semantics, computed by jaxparity")
        expected_lines += [f"    {array_source(e)}," for e in expected or []]
        expected_lines.append("]")
        first = "EXPECTED"
    elif make_path(baseline).has("op_by_op"):
        first = f"[np.asarray(y) for y in f({', '.join(names)})]"  # eager: op by op, each primitive on its own
    else:
        first = f"{_fn_name(baseline)}(f, args)"
    args = f"({', '.join(names)}{',' if len(names) == 1 else ''})"
    main = [f"expected, observed = {first.replace('args', args)}, {_fn_name(path)}(f, {args})  # {baseline}, {path}",
            _versions_line(baseline, path),
            "sys.exit(1 if sum(report(k, e, o) for k, (e, o) in enumerate(zip(expected, observed))) else 0)"]
    text = "\n".join([f'"""{docstring.rstrip()}\n"""', "", *code, "", *data, "", "", *body, "", "",
                      *[r + "\n" for r in runners], report, "", *expected_lines, *main]) + "\n"
    while "\n\n\n\n" in text:
        text = text.replace("\n\n\n\n", "\n\n\n")
    counted = [*code, *body, *runners, report, *main]
    lines_of_code = sum(1 for block in counted for ln in block.splitlines()
                        if ln.strip() and not ln.strip().startswith("#"))
    return Script(text, lines_of_code, sidecar, fix_text if (uses_fixed or fix_env) else None)


def _dtype(dtype: np.dtype) -> str:
    return f"np.{dtype.name}" if dtype.kind != "V" and dtype.name in np.sctypeDict else f"jax.numpy.{dtype.name}"


def _versions_line(baseline: str, path: str) -> str:
    """A line printing the versions of what ran (the modules the two computations imported)."""
    mods = ["jax", "jaxlib", "tensorflow", "ai_edge_litert", "onnxruntime", "onnx"]
    return (f"print(*(f'{{m}} {{sys.modules[m].__version__}}' for m in {mods!r} "
            "if hasattr(sys.modules.get(m), '__version__')), sep=', ')")
