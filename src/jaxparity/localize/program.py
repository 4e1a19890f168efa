"""A case's jaxpr flattened into one list of ops, the unit in which divergence is localized.

Call-like equations (``jit``, ``custom_jvp_call``, ``custom_vjp_call``, ``remat``) are inlined, so
every op the user's model runs is one entry with its own values; control flow (``cond``,
``while``, ``scan``) stays one op, since its inner values exist only per iteration: its body is a
program of its own (``flatten_jaxpr``), opened by ``localize.loops`` one iteration at a time. Each op keeps
its equation, its Flax module path (name stack) and two source lines: where the primitive was
created (often inside flax) and the user's own line that led to it.
"""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr, Literal

from ..jaxcompat import user_frames

__all__ = ["RANDOM_PRIMITIVES", "FlatProgram", "Op", "OpInfo", "bind_op", "flatten", "flatten_jaxpr", "frame_line", "is_numeric", "library_frames",
           "lines_downstream", "op_sources", "user_line"]

# jax 0.9.2 names of call-like primitives and the param holding their body.
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "remat2": "jaxpr",
          "checkpoint": "jaxpr"}

_LIBRARY_DIRS = tuple({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                       sysconfig.get_paths()["stdlib"]})


@dataclass(frozen=True)
class OpInfo:
    """What a report says about one op (plain values, serializable)."""

    index: int
    primitive: str
    inputs: tuple[str, ...]  # "bfloat16[1,1,2]"
    outputs: tuple[str, ...]
    name_stack: str  # Flax module path, e.g. "GroupedConvResidual/Conv_0"
    source: str | None  # where the primitive was created, "flax/linen/linear.py:700"
    user_source: str | None  # the user's own line that led to it, "conv_bf16.py:29"
    # Where each input comes from: "op12" (op 12's output; "op12:1" its second), "arg3" (the
    # program's 4th flattened argument), "const" (a closed-over array) or "literal".
    operands: tuple[str, ...] = ()
    # The installed library's function the op was created in, innermost ("StudentT.log_prob"): what names it where
    # the name stack holds only transformations (a NumPyro log-density's "transpose(jvp())"); None in the user's code.
    call: str | None = None


@dataclass(frozen=True)
class Op:
    info: OpInfo
    eqn: Any  # jax.extend.core.JaxprEqn
    inputs: tuple[int | Literal, ...]  # value ids, or literals
    outputs: tuple[int | None, ...]  # value ids (None for dropped outputs)


@dataclass(frozen=True)
class FlatProgram:
    ops: tuple[Op, ...]
    arg_ids: tuple[int, ...]
    out_ids: tuple[int | Literal, ...]
    consts: dict[int, Any]  # value id -> constant (closed-over arrays of the jaxpr and inlined bodies)
    avals: dict[int, Any]  # value id -> abstract value (shape, dtype)
    in_tree: Any
    out_tree: Any

    def evaluate(self, args: Sequence[Any], apply: Callable[[Op, list[Any]], Sequence[Any]]) -> dict[int, Any]:
        """All values of the program, each op computed by ``apply(op, input_values)``."""
        values: dict[int, Any] = dict(self.consts)
        values.update(zip(self.arg_ids, args))
        for op in self.ops:
            ins = [x.val if isinstance(x, Literal) else values[x] for x in op.inputs]
            for vid, out in zip(op.outputs, apply(op, ins)):
                if vid is not None:
                    values[vid] = out
        return values

    def outputs(self, values: dict[int, Any]) -> list[Any]:
        return [x.val if isinstance(x, Literal) else values[x] for x in self.out_ids]


def _relative(path: str) -> str:
    for base in _LIBRARY_DIRS:
        if path.startswith(base):
            return os.path.relpath(path, base)
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else path
    except ValueError:
        return path


# Frames that are never the user's: installed libraries (jax, flax...), the standard library, and
# jaxparity itself (its wrappers, e.g. round_like_declared, run the user's function).
_NOT_USER = _LIBRARY_DIRS + (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)


def _sources(eqn: Any, outer: tuple[str | None, str | None] = (None, None)) -> tuple[str | None, str | None]:
    """(where the primitive was created, the user's own line that led to it). An op created inside a
    jitted library helper (``jnp.cumsum``, ``jax.image.resize``) has no frame of the user's in its own
    traceback (JAX traced the helper once, maybe from another call): it takes its call's, ``outer``."""
    frames = user_frames(eqn.source_info)
    fmt = lambda f: f"{_relative(f.file_name)}:{f.start_line}"  # noqa: E731
    inner = fmt(frames[0]) if frames else outer[0]
    user = next((f for f in frames if not f.file_name.startswith(_NOT_USER)), None)
    return inner, fmt(user) if user else outer[1]


def frame_line(frame: Any) -> str:
    """'equinox/_errors.py:111' (an installed library's file) or 'model.py:16' (relative to here) of a frame."""
    return f"{_relative(frame.file_name)}:{frame.start_line}"


def library_frames(frames: Sequence[Any]) -> tuple[list[Any], Any | None]:
    """(the installed libraries' frames ahead of the user's first, innermost first; the user's first frame or
    None) of ``frames`` (innermost first, as ``jaxcompat.user_frames`` gives them)."""
    site = tuple({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    at = next((i for i, f in enumerate(frames) if not f.file_name.startswith(_NOT_USER)), len(frames))
    return [f for f in frames[:at] if f.file_name.startswith(site)], frames[at] if at < len(frames) else None


def user_line(eqn: Any) -> str | None:
    """The user's own line that led to ``eqn`` ("model.py:12"), else where its primitive was created."""
    inner, user = _sources(eqn)
    return user or inner


def lines_calling(program: FlatProgram, name: str) -> list[str]:
    """The user's lines ("model.py:42") whose ops come from a call of ``name`` (a function's short name, as
    ``log_sigmoid`` of ``jax.nn.log_sigmoid``): read from the equations' own frames and the source text."""
    import linecache

    found: dict[str, None] = {}
    for op in program.ops:
        user = next((f for f in user_frames(op.eqn.source_info) if not f.file_name.startswith(_NOT_USER)), None)
        if user is None:
            continue
        text = linecache.getline(user.file_name, user.start_line)
        if f"{name}(" in text:
            found[f"{_relative(user.file_name)}:{user.start_line}"] = None
    return list(found)


def _aval_str(aval: Any) -> str:
    return f"{aval.dtype}[{','.join(map(str, getattr(aval, 'shape', ())))}]"


def flatten(fn: Callable[..., Any], args: tuple) -> FlatProgram:
    """Trace ``fn(*args)`` and flatten its jaxpr into one list of ops."""
    closed = jax.make_jaxpr(fn)(*args)
    _, in_tree = jax.tree_util.tree_flatten(args)
    out_tree = jax.tree_util.tree_structure(jax.eval_shape(fn, *args))
    return flatten_jaxpr(closed, in_tree=in_tree, out_tree=out_tree)


def flatten_jaxpr(closed: ClosedJaxpr, *, stack: str = "", outer: tuple[str | None, str | None] = (None, None),
                  in_tree: Any = None, out_tree: Any = None) -> FlatProgram:
    """Flatten one closed jaxpr (a whole program, or the body of a loop or branch: then ``stack`` is
    the loop's module path and ``outer`` its source lines, which ops without a user frame inherit)."""
    ops: list[Op] = []
    consts: dict[int, Any] = {}
    avals: dict[int, Any] = {}
    counter = iter(range(1 << 62))
    origin: dict[int, str] = {}  # value id -> operand name (see OpInfo.operands)

    def new_id(var: Any) -> int:
        vid = next(counter)
        avals[vid] = var.aval
        return vid

    def inline(jaxpr: Jaxpr, const_vals: Sequence[Any], in_refs: Sequence[int | Literal], stack: str,
               outer: tuple[str | None, str | None] = (None, None)) -> list:
        env: dict[Any, int | Literal] = {}
        for var, val in zip(jaxpr.constvars, const_vals):
            env[var] = vid = new_id(var)
            consts[vid] = val
            origin[vid] = "const"
        env.update(zip(jaxpr.invars, in_refs))
        read = lambda x: x if isinstance(x, Literal) else env[x]  # noqa: E731
        for eqn in jaxpr.eqns:
            name_stack = "/".join(filter(None, [stack, str(eqn.source_info.name_stack)]))
            refs = [read(x) for x in eqn.invars]
            body = eqn.params.get(_CALLS.get(eqn.primitive.name, ""), None)
            if body is not None:
                inner, inner_consts = (body.jaxpr, body.consts) if isinstance(body, ClosedJaxpr) else (body, ())
                outs = inline(inner, inner_consts, refs, name_stack, _sources(eqn, outer))
                for var, ref in zip(eqn.outvars, outs):
                    if type(var).__name__ != "DropVar":
                        env[var] = ref
                continue
            out_ids = tuple(None if type(v).__name__ == "DropVar" else new_id(v) for v in eqn.outvars)
            for j, (var, vid) in enumerate(zip(eqn.outvars, out_ids)):
                if vid is not None:
                    env[var] = vid
                    origin[vid] = f"op{len(ops)}" + (f":{j}" if len(out_ids) > 1 else "")
            source, user = _sources(eqn, outer)
            library, _ = library_frames(user_frames(eqn.source_info))
            info = OpInfo(
                index=len(ops),
                primitive=eqn.primitive.name,
                inputs=tuple(_aval_str(x.aval) for x in eqn.invars),
                outputs=tuple(_aval_str(v.aval) for v in eqn.outvars),
                name_stack=name_stack,
                source=source,
                user_source=user,
                operands=tuple("literal" if isinstance(r, Literal) else origin[r] for r in refs),
                call=library[0].function_name if library else None,
            )
            ops.append(Op(info, eqn, tuple(refs), out_ids))
        return [read(x) for x in jaxpr.outvars]

    arg_ids = tuple(new_id(v) for v in closed.jaxpr.invars)
    origin.update((vid, f"arg{k}") for k, vid in enumerate(arg_ids))
    out_ids = inline(closed.jaxpr, closed.consts, arg_ids, stack, outer)
    return FlatProgram(tuple(ops), arg_ids, tuple(out_ids), consts, avals, in_tree, out_tree)


def op_sources(op: Op) -> tuple[str | None, str | None]:
    """The (created at, user line) pair an op's sub-programs (loop bodies, branches) inherit."""
    return op.info.source, op.info.user_source


def is_numeric(aval: Any) -> bool:
    """Values a path can return and we can compare: not PRNG keys, not tokens."""
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and np.dtype(dtype).kind in "biufcV"


# The primitives of JAX's random-number generator: what a key flows through (converters into TFLite and ONNX
# have no kernel for threefry's 32-bit unsigned shifts and rotations, nor a type for a typed key; the hunt keeps
# an input that feeds them as it is).
RANDOM_PRIMITIVES = frozenset({"threefry2x32", "random_bits", "random_seed", "random_wrap", "random_unwrap",
                               "random_split", "random_fold_in", "random_clone", "rng_bit_generator"})


def bind_op(op: Op, ins: Sequence[Any]) -> list[Any]:
    """``op``'s primitive on ``ins`` with its recorded params, as tracing it under the current JAX config would
    bind it (``jaxcompat.as_configured``: a path's ``jax_default_matmul_precision`` applies to a replay too)."""
    from ..jaxcompat import as_configured

    out = op.eqn.primitive.bind(*ins, **as_configured(op.eqn.params))
    return list(out) if op.eqn.primitive.multiple_results else [out]


def lines_downstream(program: FlatProgram, op: Op, depth: int = 3) -> list[str]:
    """The op's line, then those of the ops that read its result, up to ``depth`` steps on (a form such as the
    softmax overflows at its exp and ends at a division written on the next line)."""
    lines, seen, frontier = [], {op.info.index}, [op]
    for _ in range(depth + 1):
        nxt = []
        for o in frontier:
            line = o.info.user_source or o.info.source
            if line and line not in lines:
                lines.append(line)
            outs = {v for v in o.outputs if v is not None}
            nxt += [c for c in program.ops if c.info.index not in seen and outs & {r for r in c.inputs
                                                                                     if isinstance(r, int)}]
        seen |= {o.info.index for o in nxt}
        frontier = nxt
    return lines
