"""Every op's values along one path.

``eager`` replays the flat program primitive by primitive (what ``jax.disable_jit`` runs);
``declared``/``f64`` go through the float64 interpreter; a compiled path (``jit``, ``export``,
``savedmodel`` and their options) compiles ONE program that also returns every intermediate and
runs it the path's own way. Returning intermediates can change what the compiler fuses, so the
compiled outputs are checked against the path's plain outputs and any disagreement is reported.

Loops keep the carry entering each iteration (``loops.capture``); a probe ``((op, step), ...)``
opens iteration ``step`` of loop ``op`` (nested: outermost first) and returns that body's values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from ..paths import make_path
from ..pytree import host
from .loops.capture import Probe, recorded, run_program, trace_of, traced_program
from .loops.structure import LoopTrace
from .program import FlatProgram, Op, bind_op, is_numeric

__all__ = ["OpValues", "apply_for", "op_values", "program_values"]


@dataclass
class OpValues:
    """Values of every recorded op output along one path (value id -> numpy array), for one program:
    the whole case, or the body of one loop iteration (then ``args`` are that iteration's inputs)."""

    path: str
    values: dict[int, np.ndarray]
    outputs: list[Any]  # numpy arrays (None where a probed body's output was not captured)
    notes: list[str]
    args: dict[int, np.ndarray] = field(default_factory=dict)
    loops: dict[int, LoopTrace] = field(default_factory=dict)  # op index -> carries per iteration
    # The outputs of the whole case in the run that produced these values (a probed compile).
    case_outputs: list[np.ndarray] | None = None
    # Values beyond the capture budget: not kept, only a digest of their bytes (see ``capture_budget``).
    digests: dict[int, str] = field(default_factory=dict)
    reused: str | None = None  # the cache entry these values were read from (None: captured by this run)


def capture_budget() -> int | None:
    """Bytes of per-op values one path keeps (``--max-capture-mb``, read from JAXPARITY_MAX_CAPTURE_MB so
    that worker processes see it); None: no limit. Beyond it, in program order, a value is kept as a
    digest only: compared bit for bit with the baseline's, never replayed."""
    import os

    mb = os.environ.get("JAXPARITY_MAX_CAPTURE_MB")
    return int(float(mb) * 2**20) if mb else None


def _within_budget(values: dict[int, np.ndarray]) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    budget = capture_budget()
    if budget is None:
        return values, {}
    import hashlib

    kept: dict[int, np.ndarray] = {}
    digests: dict[int, str] = {}
    used = 0
    for vid, x in values.items():  # program order
        a = np.asarray(x)
        if used + a.nbytes <= budget:
            kept[vid] = x
            used += a.nbytes
        else:
            digests[vid] = hashlib.sha256(str((a.dtype, a.shape)).encode() + a.tobytes()).hexdigest()
    return kept, digests



def op_by_op(spec: str) -> bool:
    """Does ``spec`` run op by op (so a loop body can be re-run on its own carry with the same values)?"""
    return make_path(spec).runs_op_by_op


def apply_for(spec: str) -> Callable[[Op, list[Any]], Sequence[Any]]:
    """How an op-by-op path computes one op: as JAX binds it, or as the interpreter computes it."""
    mode = make_path(spec).mode
    if mode is None:
        return bind_op
    from ..interpreter import evaluate_eqn

    return lambda op, ins: evaluate_eqn(op.eqn, ins, mode=mode)


def program_values(program: FlatProgram, spec: str, args: Sequence[Any]) -> OpValues:
    """Every value of ``program`` (a case or a loop body) on ``args`` along an op-by-op path."""
    from ..paths.base import jax_config

    traces: dict[int, LoopTrace] = {}
    path = make_path(spec)
    if path.has("op_by_op"):
        with jax_config(path.options), jax.disable_jit():
            values = run_program(program, list(args), apply_for(spec), traces)
    else:
        values = run_program(program, [host(a) for a in args], apply_for(spec), traces)
    return _collect(program, spec, values, [], args, traces)


def op_values(program: FlatProgram, spec: str, flat_args: Sequence[Any], probe: Probe = ()) -> OpValues:
    """Run ``program`` along path ``spec`` and keep every op's outputs (of the probed body, if any): kept in
    jaxparity's cache across commands (``values_key``), so that explaining the same model on the same
    inputs again runs nothing to capture them."""
    from ..cache import cache

    store = cache()
    if store is None:
        return _op_values(program, spec, flat_args, probe)
    made: list[OpValues] = []

    def make(where: Any) -> dict[str, Any]:
        made.append(_op_values(program, spec, flat_args, probe))
        save_values(made[0], where)
        return {"spec": spec}

    entry = store.fetch("op-values", values_key(program, spec, flat_args, probe), make)
    if made:
        return made[0]
    found = load_values(entry.dir)
    if entry.reused and entry.earlier:
        found.reused = entry.short
    return found


# The per-op values in jaxparity's cache are data only: the arrays in an .npz read without pickles
# (``arrayio``), everything else in JSON. A cache restored from elsewhere (a CI cache, a shared home) is then
# never code to run: the worst it can hold is wrong numbers for a key, never a program.
_ARRAYS, _MANIFEST = "values.npz", "values.json"


def save_values(found: OpValues, where: Any) -> None:
    """``found`` written to the directory ``where`` as ``values.npz`` and ``values.json``."""
    import json

    from ..arrayio import save_arrays

    arrays: dict[str, np.ndarray] = {}

    def put(name: str, x: Any) -> str | None:
        if x is None:
            return None
        a = np.asarray(x)
        if a.dtype == object:
            raise TypeError(f"{name}: an object array is not data")
        arrays[name] = a
        return name

    manifest = {
        "path": found.path, "notes": list(found.notes), "digests": {str(k): v for k, v in found.digests.items()},
        "values": {str(k): put(f"v{k}", v) for k, v in found.values.items()},
        "args": {str(k): put(f"a{k}", v) for k, v in found.args.items()},
        "outputs": [put(f"o{j}", v) for j, v in enumerate(found.outputs)],
        "case_outputs": None if found.case_outputs is None else [put(f"c{j}", v)
                                                                 for j, v in enumerate(found.case_outputs)],
        "loops": {str(k): {"trips": t.trips, "limit": t.limit, "impls": list(t.impls),
                           "carries": [put(f"l{k}_{j}", c) for j, c in enumerate(t.carries)]}
                  for k, t in found.loops.items()},
    }
    save_arrays(where / _ARRAYS, arrays)
    (where / _MANIFEST).write_text(json.dumps(manifest))


def load_values(where: Any) -> OpValues:
    """The ``OpValues`` ``save_values`` wrote in ``where``, read as data only."""
    import json

    from ..arrayio import load_arrays

    manifest = json.loads((where / _MANIFEST).read_text())
    arrays = load_arrays(where / _ARRAYS)

    def get(name: str | None) -> Any:
        return None if name is None else arrays[name]

    loops = {int(k): LoopTrace([get(c) for c in t["carries"]], t["trips"], t["limit"], list(t["impls"]))
             for k, t in manifest["loops"].items()}
    case = manifest["case_outputs"]
    return OpValues(manifest["path"], {int(k): get(v) for k, v in manifest["values"].items()},
                    [get(o) for o in manifest["outputs"]], list(manifest["notes"]),
                    {int(k): get(v) for k, v in manifest["args"].items()}, loops,
                    None if case is None else [get(c) for c in case],
                    {int(k): v for k, v in manifest["digests"].items()})


def values_key(program: FlatProgram, spec: str, flat_args: Sequence[Any], probe: Probe = ()) -> str:
    """What decides a path's per-op values: the program (every equation with its parameters, how the values
    flow, each constant's bytes), every input's bytes, the path with its options, JAX's configuration and
    XLA_FLAGS, the capture budgets (per op, and of a loop's iterations), every package that may run it,
    this CPU, and jaxparity's own code. A changed weight, input, option, version or line of jaxparity never
    finds old values."""
    import hashlib
    import os

    from ..cache import fingerprint, machine, package_versions
    from ..paths.staging import config_key
    from .loops import capture

    def digest(x: Any) -> str:
        a = host(x)
        return hashlib.sha256(str((a.dtype, a.shape)).encode() + np.ascontiguousarray(a).tobytes()).hexdigest()

    ops = [(str(op.eqn), [repr(r) if hasattr(r, "val") else r for r in op.inputs], op.outputs) for op in program.ops]
    consts = sorted((vid, digest(x)) for vid, x in program.consts.items())
    return fingerprint("op-values", spec, repr(probe), ops, consts, program.arg_ids, [repr(x) for x in program.out_ids],
                       [digest(x) for x in flat_args], repr(config_key()), os.environ.get("XLA_FLAGS", ""),
                       capture_budget(), capture.CAPTURE_BYTES, capture.MAX_ITERATIONS, package_versions(*_RUNTIMES),
                       machine(), _code_digest())


_RUNTIMES = ("numpy", "ml_dtypes", "tensorflow", "tensorflow-cpu", "ai-edge-litert", "onnx", "onnxruntime",
             "jax2onnx", "iree-base-compiler", "iree-base-runtime")


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """A digest of jaxparity's own source: how it captures and runs is part of what the values are."""
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + f.read_bytes())
    return h.hexdigest()


def _op_values(program: FlatProgram, spec: str, flat_args: Sequence[Any], probe: Probe = ()) -> OpValues:
    if op_by_op(spec):
        if probe:
            raise ValueError("op-by-op paths open a loop body by re-running it (see loops.descend)")
        return program_values(program, spec, flat_args)
    return _compiled(program, spec, flat_args, probe)


def _collect(program: FlatProgram, spec: str, values: dict[int, Any], notes: list[str], args: Sequence[Any],
             traces: dict[int, LoopTrace]) -> OpValues:
    keep, digests = _within_budget({vid: host(values[vid]) for vid in recorded(program)})
    inputs = {vid: host(a) for vid, a in zip(program.arg_ids, args) if is_numeric(program.avals[vid])}
    return OpValues(spec, keep, [host(x) for x in program.outputs(values)], notes, inputs, traces, digests=digests)


def _compiled(program: FlatProgram, spec: str, flat_args: Sequence[Any], probe: Probe) -> OpValues:
    from ..paths.staging import reused

    rec = recorded(program)

    def make() -> Callable[..., tuple]:
        def instrumented(*args: Any) -> tuple:
            values, level = traced_program(program, args, probe)
            return tuple(program.outputs(values)), tuple(values[vid] for vid in rec), level

        return instrumented

    # One function per program and probe while compile_once() is active (a sweep worker explaining
    # input set after input set): the path compiles it once.
    instrumented = reused("instrumented program", (id(program), probe, tuple(rec)), program, make)
    path = make_path(spec)
    outs, inter, level = path.run(instrumented, tuple(flat_args))
    values, digests = _within_budget(dict(zip(rec, (host(x) for x in inter))))
    case_outputs = [host(x) for x in outs]
    if not probe:
        return OpValues(spec, values, case_outputs, list(path.notes),
                        {vid: host(a) for vid, a in zip(program.arg_ids, flat_args) if is_numeric(program.avals[vid])},
                        trace_of(level["loops"], program), digests=digests)
    # Walk down to the probed body: its program, its values.
    from .loops.structure import body_of

    prog, inner = program, level
    for index, step in probe:
        op = prog.ops[index]
        prog = body_of(op, step if op.info.primitive == "cond" else None).program
        inner = inner["inner"]
    numeric_args = [vid for vid in prog.arg_ids if is_numeric(prog.avals[vid])]  # what the probe kept
    arg_vals = dict(zip(numeric_args, (host(a) for a in inner["args"])))
    body_values = {int(k): host(v) for k, v in inner["values"].items()}
    outs_ = [body_values.get(x) if not hasattr(x, "val") else np.asarray(x.val) for x in prog.out_ids]
    outs_ = [arg_vals.get(x) if o is None and not hasattr(x, "val") else o for o, x in zip(outs_, prog.out_ids)]
    return OpValues(spec, body_values, outs_, list(path.notes), arg_vals, trace_of(inner["loops"], prog), case_outputs)
