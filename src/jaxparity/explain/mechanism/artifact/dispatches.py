"""Per dispatch: where returning every intermediate changes a runtime's outputs (IREE keeps bf16 values in
float32 inside a dispatch, and a value returned must be stored), the runtime's own units are the view. Each
dispatch's stored values are captured from a run that leaves the outputs bit for bit unchanged
(``Path.dispatches``, ``paths/iree_dispatches.py``); each dispatch's ops are then run on its own captured
inputs, as the program declares them (each op rounded) and in the formulations a compiler may have chosen
(float32 inside the dispatch, its contraction's result rounded or not), and the one that gives the runtime's
stored values bit for bit is named."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DispatchFinding", "accumulated", "dispatch_findings", "findings", "form", "rounds_inside"]

_NARROW = ("bfloat16", "float16")
_CONTRACTIONS = ("dot_general", "conv_general_dilated")


@dataclass(frozen=True)
class DispatchFinding:
    """One dispatch on its own captured inputs: how many of its stored elements the program's declared ops
    give otherwise, by up to how many ULP, and the formulation that reproduces them (None: none tried does)."""

    name: str
    ops: tuple[int, ...]
    size: int  # stored elements
    differ: int  # of them, where the declared ops on the dispatch's inputs give another value
    max_ulp: int
    reproduced_by: str | None


def _wide(x: Any) -> Any:
    import jax.numpy as jnp

    x = jnp.asarray(x)
    return x.astype(jnp.float32) if x.dtype.name in _NARROW else x


def _bind(op: Any, ins: list[Any], inside: str, block: int = 0) -> list[Any]:
    """``op`` in the formulation ``inside``: "declared" (as the program binds it), "f32" (narrow values computed
    in float32; a contraction accumulates in float32 and its result is rounded to its narrow dtype, as a kernel
    that writes its accumulator to a narrow buffer does), "f32-kept" (the contraction's result kept in float32
    too) or "blocked" (as "f32", the contraction adding ``block`` terms at a time in float32 and rounding the
    running sum to its narrow dtype between blocks: the kernel's accumulator is its narrow output)."""
    import jax.numpy as jnp

    from ....interpreter.accumulation import blocked_conv, blocked_dot_general
    from ....localize.program import bind_op

    if inside == "declared":
        return bind_op(op, ins)
    if inside.startswith("ordered:"):  # as declared, each sum added in the order read off the runtime's own kernel
        return _ordered(op, ins, inside.split(":", 1)[1]) or bind_op(op, ins)
    params = dict(op.eqn.params)
    narrow = [v.aval.dtype.name in _NARROW for v in op.eqn.outvars]
    if op.info.primitive in _CONTRACTIONS and narrow[0]:
        dtype = op.eqn.outvars[0].aval.dtype
        if inside == "blocked":
            how = blocked_dot_general if op.info.primitive == "dot_general" else blocked_conv
            got = how(params, np.asarray(ins[0]), np.asarray(ins[1]), dtype, block)
            if got is None:
                raise ValueError(f"{op.info.primitive} cannot be accumulated in blocks here")
            return [jnp.asarray(got.astype(dtype))]
        params["preferred_element_type"] = np.dtype(np.float32)
        out = op.eqn.primitive.bind(*[_wide(x) for x in ins], **params)
        return [out.astype(dtype) if inside == "f32" else out]
    if op.info.primitive == "convert_element_type" and params.get("new_dtype") is not None \
            and np.dtype(params["new_dtype"]).name in _NARROW and jnp.asarray(ins[0]).dtype.kind == "f":
        return [_wide(ins[0])]  # a narrowing convert inside the dispatch: held in float32 too
    if not any(narrow):
        return bind_op(op, ins)
    try:
        return bind_op(op, [_wide(x) for x in ins])
    except Exception:  # noqa: BLE001 - an op that takes no float32 operands here: as declared
        return bind_op(op, ins)


def _ordered(op: Any, ins: list[Any], spec: str) -> list[Any] | None:
    """A sum over one axis added in the order ``spec``'s kernel adds a sum of that length (``summation.order_of``,
    probed once per length), each addition rounded to float32; None where it is no such sum or no fixed order."""
    import jax.numpy as jnp

    from ..summation import evaluate

    x = np.asarray(ins[0]) if op.info.primitive == "reduce_sum" and len(ins) == 1 else None
    axes = tuple(op.eqn.params.get("axes", ())) if x is not None else ()
    if x is None or len(axes) != 1 or x.dtype.name not in ("float32", "bfloat16"):
        return None
    order = _order(spec, x.shape[axes[0]], x.dtype.name)
    if order is None:
        return None
    rows = np.moveaxis(x, axes[0], -1)
    out = evaluate(order, rows.reshape(-1, rows.shape[-1])).reshape(rows.shape[:-1])
    return [jnp.asarray(out.astype(x.dtype))]


@functools.lru_cache(maxsize=64)
def _order(spec: str, n: int, dtype: str) -> Any:
    from ..summation import order_of

    import ml_dtypes  # noqa: F401 - registers bfloat16 with numpy

    found = order_of(spec, n, np.dtype(dtype))
    return None if isinstance(found, str) else found.tree


def _declared(program: Any, flat_args: Sequence[Any], stored: dict[int, np.ndarray]) -> dict[int, Any]:
    """Every value of the program, each op as declared on the runtime's own stored values (a stored value is
    the runtime's, whatever the replay gives)."""
    import jax

    from ....localize.program import bind_op

    values: dict[int, Any] = dict(program.consts)
    values.update(zip(program.arg_ids, flat_args))
    with jax.default_device(jax.devices("cpu")[0]):
        for op in program.ops:
            ins = [x.val if hasattr(x, "val") else values[x] for x in op.inputs]
            for v, out in zip(op.outputs, bind_op(op, ins)):
                if v is not None:
                    values[v] = stored[v] if v in stored else out
    return values


def _dispatch(program: Any, d: Any, values: dict[int, Any], inside: str, block: int = 0) -> dict[int, np.ndarray]:
    """The values dispatch ``d`` stores, its ops run in the formulation ``inside`` on its own inputs (``values``:
    the runtime's stored values where it stored them), each stored value rounded to its declared dtype."""
    import jax

    from ....rounding import round_to_dtype

    local: dict[int, Any] = {}
    found: dict[int, np.ndarray] = {}
    with jax.default_device(jax.devices("cpu")[0]):
        for i in d.ops:
            op = program.ops[i]
            ins = [x.val if hasattr(x, "val") else local.get(x, values.get(x)) for x in op.inputs]
            for v, out in zip(op.outputs, _bind(op, ins, inside, block)):
                if v is None:
                    continue
                local[v] = out
                if v in d.stores:
                    declared = program.avals[v].dtype
                    got = np.asarray(out)
                    found[v] = round_to_dtype(got.astype(np.float64), declared) if got.dtype != declared else got
    return found


def _blocks(program: Any, d: Any) -> list[int]:
    """The block sizes a narrow contraction of the dispatch may accumulate in: each power of two below its
    contracted length."""
    from ....localize.localizer import _contraction_length

    found: list[int] = []
    for i in d.ops:
        op = program.ops[i]
        if op.info.primitive in _CONTRACTIONS and op.info.outputs and op.info.outputs[0].startswith(_NARROW):
            n = _contraction_length(op)
            found += [2 ** k for k in range(n.bit_length()) if 2 ** k < n]
    return sorted(set(found), reverse=True)


def dispatch_findings(path: Any, program: Any, flat_args: Sequence[Any], path_out: Sequence[np.ndarray],
                      run: Callable[[Any, tuple], Any] | None = None) -> tuple[list[DispatchFinding], str]:
    """Each dispatch of ``path`` on its own captured inputs (``DispatchFinding``), and a sentence on how they
    were captured; ([], why) where they could not be (the capture changed the path's outputs)."""
    from ....metrics import ulp_distance
    from ....paths.iree_dispatches import capture_stores

    dispatches = path.dispatches(program, flat_args)
    outs, stored = capture_stores(run or path.run, program, flat_args, dispatches)
    moved = sum(int(np.asarray(a).tobytes() != np.asarray(b).tobytes()) for a, b in zip(outs, path_out))
    if moved or len(outs) != len(path_out):
        return [], (f"returning the {len(stored)} values {path}'s dispatches store changes {moved} of its outputs: "
                    "no view per dispatch either")
    values = _declared(program, flat_args, stored)
    found = []
    for d in dispatches:
        declared = _dispatch(program, d, values, "declared")
        size = differ = worst = 0
        for v in d.stores:
            theirs = np.asarray(stored[v])
            with np.errstate(invalid="ignore"):
                u = np.abs(ulp_distance(np.asarray(declared[v]), theirs))
            size, differ, worst = size + theirs.size, differ + int((u != 0).sum()), max(worst, int(u.max(initial=0)))
        reproduced = None if differ else "declared"
        contracts = any(program.ops[i].info.primitive in _CONTRACTIONS for i in d.ops)
        sums = any(program.ops[i].info.primitive == "reduce_sum" for i in d.ops)
        forms = ([("f32", 0)] if contracts else []) + [("f32-kept", 0)] + [("blocked", b) for b in _blocks(program, d)] \
            + ([(f"ordered:{path.spec}", 0)] if sums else [])
        for inside, block in forms if differ else ():
            try:
                mine = _dispatch(program, d, values, inside, block)
            except Exception:  # noqa: BLE001 - a formulation that does not apply to these ops
                continue
            if all(np.asarray(mine[v]).tobytes() == np.asarray(stored[v]).tobytes() for v in d.stores):
                reproduced = f"blocked:{block}" if inside == "blocked" else inside
                break
        found.append(DispatchFinding(d.name, d.ops, size, differ, worst, reproduced))
    n = len(dispatches)
    how = (f"{n} dispatch{'es' if n != 1 else ''} of {path}, the {len(stored)} value{'s' if len(stored) != 1 else ''} "
           f"{'they store' if n != 1 else 'it stores'} captured from its own run (its outputs unchanged by returning them)")
    return found, how


_FORMS = {"f32": "in float32, its contraction rounded to its narrow output and the rest rounded only where stored",
          "f32-kept": "in float32, rounded only where stored"}


def form(name: str) -> str:
    """The words of a formulation (``DispatchFinding.reproduced_by``)."""
    if name.startswith("ordered:"):
        return (f"as declared, each sum added in the order {name.split(':', 1)[1]}'s own kernel adds one of its "
                "length (read off the kernel by the summation-order probe)")
    if name.startswith("blocked:"):
        return (f"in float32, its contraction adding {name.split(':')[1]} terms at a time and rounding the running sum "
                "to its narrow output between them, the rest rounded only where stored")
    return _FORMS.get(name, name)


def findings(ctx: Any) -> tuple[list[DispatchFinding], str] | None:
    """``dispatch_findings`` for the path explained, once per explanation (``ctx.memo``); None where they could
    not be captured (said in the notes)."""
    if "dispatches" not in ctx.memo:
        try:
            ctx.memo["dispatches"] = dispatch_findings(ctx.path, ctx.program, ctx.flat_args, ctx.path_out,
                                                       run=lambda f, a: ctx.path.run(f, a))
        except Exception as e:  # noqa: BLE001 - no view per dispatch: the other experiments decide
            ctx.memo["dispatches"] = None
            ctx.notes.append(f"{ctx.path}'s dispatches could not be captured ({type(e).__name__}: "
                             f"{str(e).splitlines()[0][:200]})")
            return None
        found, how = ctx.memo["dispatches"]
        if not found:  # why there is no view per dispatch; the findings themselves travel on the explanation
            ctx.notes.append(how)
    return ctx.memo["dispatches"]


def rounds_inside(program: Any, f: DispatchFinding) -> bool:
    """Does the dispatch compute narrow arithmetic besides a contraction (what float32 inside it rounds otherwise
    than the program's declared ops), not data movement only?"""
    from ....fixes.rounding import _EXACT

    for i in f.ops:
        op = program.ops[i].info
        if op.primitive not in _CONTRACTIONS and op.primitive not in _EXACT and op.primitive != "convert_element_type" \
                and op.outputs and op.outputs[0].startswith(_NARROW):
            return True
    return False


def accumulated(findings_: Sequence[DispatchFinding]) -> list[DispatchFinding]:
    """The dispatches reproduced only with their contraction accumulated a block at a time in its narrow output."""
    return [f for f in findings_ if f.differ and (f.reproduced_by or "").startswith("blocked:")]
