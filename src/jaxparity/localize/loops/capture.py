"""Run a program while keeping what its loops do: the carry entering every iteration, and, for the
iteration a probe names, every value of its body.

Two ways, one per kind of path:
- op by op (``eager``, ``declared``, ``f64``): each loop runs as a Python loop over its body, exactly
  as ``jax.disable_jit`` and the interpreter run it, so a body can later be re-run on the path's own
  carry with the same values;
- compiled (``jit``, ``export``, ``savedmodel``...): the loop stays a loop inside the path's own
  compiled program and returns more: a ``scan`` stacks its entering carry as extra outputs; a
  ``while`` writes it into a bounded buffer (``max_iterations`` entries, then a spill slot) because
  its trip count is data; the probed iteration's body values go into buffers in the carry, written
  when the iteration counter equals the probed step; a probed ``cond`` returns the taken branch's
  values, zeros from the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jax.extend.core import Literal

from ...pytree import host
from ..program import FlatProgram, Op, bind_op, is_numeric
from .structure import Body, LoopTrace, body_of, carry_impls, key_impl, loop_kind, numeric_carry

__all__ = ["Probe", "run_op", "run_program", "traced_program"]

Probe = tuple[tuple[int, int], ...]  # ((op index, iteration or branch), ...), outermost first

# A while loop keeps the carry of at most this many iterations, and at most CAPTURE_BYTES of it;
# past that, later iterations are counted, not captured, and the report says so.
MAX_ITERATIONS = 4096
CAPTURE_BYTES = 256 << 20


def iteration_limit(body: Body, limit: int) -> int:
    """How many iterations of ``body``'s carry a while loop keeps."""
    per = sum(int(np.prod(_data_aval(a).shape)) * np.dtype(_data_aval(a).dtype).itemsize
              for a, k in zip(body.carry_avals(), numeric_carry(body)) if k)
    return max(1, min(limit, CAPTURE_BYTES // max(per, 1)))


def _ins(program: FlatProgram, op: Op, values: dict[int, Any]) -> list[Any]:
    return [x.val if isinstance(x, Literal) else values[x] for x in op.inputs]


def recorded(program: FlatProgram) -> list[int]:
    """Value ids worth keeping: numeric outputs of ops (not keys, not tokens)."""
    return [vid for op in program.ops for vid in op.outputs if vid is not None and is_numeric(program.avals[vid])]


# ------------------------------------------------------------------------------ op by op
def run_program(program: FlatProgram, args: Sequence[Any], apply: Callable[[Op, list[Any]], Sequence[Any]],
                traces: dict[int, LoopTrace], *, max_iterations: int = MAX_ITERATIONS) -> dict[int, Any]:
    """Every value of ``program``, each op computed by ``apply``; its scan and while loops run here as
    Python loops over their bodies (the same ops, the same values) and leave their carries in ``traces``."""
    values: dict[int, Any] = dict(program.consts)
    values.update(zip(program.arg_ids, args))
    for op in program.ops:
        outs = run_op(op, _ins(program, op, values), apply, traces, max_iterations=max_iterations)
        for vid, out in zip(op.outputs, outs):
            if vid is not None:
                values[vid] = out
    return values


def run_op(op: Op, ins: list[Any], apply: Callable[[Op, list[Any]], Sequence[Any]],
           traces: dict[int, LoopTrace] | None = None, *, max_iterations: int = MAX_ITERATIONS) -> Sequence[Any]:
    """One op op by op: a loop as a Python loop over its body, a cond by running the taken branch,
    each at every level, as ``jax.disable_jit`` runs ``lax.scan``/``while_loop``/``cond`` (binding the
    loop primitive instead would compile the whole loop with XLA, fusions and all)."""
    kind = loop_kind(op)
    if kind in ("scan", "while"):
        outs, trace = _python_loop(body_of(op), ins, apply, max_iterations)
        if traces is not None:
            traces[op.info.index] = trace
        return outs
    if kind == "cond":
        n = len(op.eqn.params["branches"])
        branch = body_of(op, int(np.clip(np.asarray(ins[0]), 0, n - 1))).program
        return branch.outputs(run_program(branch, ins[1:], apply, {}, max_iterations=max_iterations))
    return apply(op, ins)


def _stack(items: list[Any], aval: Any) -> Any:
    import jax

    if not items:
        return np.zeros((0, *aval.shape[1:]), aval.dtype)
    if any(isinstance(y, jax.Array) for y in items):
        return jax.numpy.stack(items)
    return np.stack([np.asarray(y) for y in items])


def _python_loop(body: Body, ins: list[Any], apply: Callable, limit: int) -> tuple[list[Any], LoopTrace]:
    consts, carry, xs = body.split(ins)
    keep = numeric_carry(body)
    if body.kind == "while":
        limit = iteration_limit(body, limit)
    history: list[list[np.ndarray]] = [[] for _ in carry]
    prog = body.program
    n = body.n_carry

    trips = 0
    if body.kind == "scan":
        length = body.trips or 0
        ys: list[list[Any]] = [[None] * length for _ in prog.out_ids[n:]]
        for t in range(length):
            _remember(history, carry, keep, limit)
            j = body.xs_index(t)
            outs = prog.outputs(run_program(prog, list(consts) + list(carry) + [x[j] for x in xs], apply, {}))
            carry = outs[:n]
            for k, y in enumerate(outs[n:]):
                ys[k][j] = y
            trips += 1
        stacked = [_stack(y, v.aval) for y, v in zip(ys, body.op.eqn.outvars[n:])]
        outs = list(carry) + stacked
    else:
        assert body.cond is not None
        cconsts = ins[: int(body.params["cond_nconsts"])]
        while True:
            _remember(history, carry, keep, limit)
            go = body.cond.outputs(run_program(body.cond, list(cconsts) + list(carry), apply, {}))[0]
            if not bool(np.asarray(go)):
                break
            carry = prog.outputs(run_program(prog, list(consts) + list(carry), apply, {}))
            trips += 1
        for h in history:  # the last entry is the carry that left the loop, not one entering an iteration
            if len(h) > trips:
                h.pop()
        outs = list(carry)
    carries = [np.stack(h) if k and h else (np.zeros((0, *_data_aval(a).shape), _data_aval(a).dtype) if k else None)
               for h, k, a in zip(history, keep, body.carry_avals())]
    return outs, LoopTrace(carries, trips, limit if body.kind == "while" else None, impls=carry_impls(body))


def _data_aval(aval: Any) -> Any:
    """The abstract value a carry is kept as: itself, or a key's key data (uint32)."""
    import jax

    if key_impl(aval) is None:
        return aval
    return jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(aval.shape, aval.dtype))


def _as_data(x: Any) -> Any:
    import jax

    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(x)
    return x


def _remember(history: list[list[np.ndarray]], carry: Sequence[Any], keep: list[bool], limit: int) -> None:
    for h, v, k in zip(history, carry, keep):
        if k and len(h) < limit:
            h.append(host(v))


# ------------------------------------------------------------------------------ compiled

def traced_program(program: FlatProgram, args: Sequence[Any], probe: Probe = (), *,
                   max_iterations: int = MAX_ITERATIONS) -> tuple[dict[int, Any], dict[str, Any]]:
    """Trace ``program`` (inside a function a path compiles): its values, and what its loops and the
    probed iteration leave behind, as a pytree ``{"loops": {op: {"carries", "trips"}}, "inner": ...}``;
    ``inner`` holds the probed body's ``{"args", "values", "loops", "inner"}``."""
    values: dict[int, Any] = dict(program.consts)
    values.update(zip(program.arg_ids, args))
    loops: dict[int, Any] = {}
    inner: Any = None
    for op in program.ops:
        ins = _ins(program, op, values)
        kind = loop_kind(op)
        step = probe[0][1] if probe and probe[0][0] == op.info.index else None
        rest = probe[1:] if step is not None else ()
        if kind == "scan":
            outs, loops[op.info.index], got = _traced_scan(body_of(op), ins, step, rest, max_iterations)
        elif kind == "while":
            outs, loops[op.info.index], got = _traced_while(body_of(op), ins, step, rest, max_iterations)
        elif kind == "cond" and step is not None:
            outs, got = _traced_cond(op, ins, step, rest, max_iterations)
        else:
            outs, got = bind_op(op, ins), None
        if got is not None:
            inner = got
        for vid, out in zip(op.outputs, outs):
            if vid is not None:
                values[vid] = out
    return values, {"loops": loops, "inner": inner}


def _level(program: FlatProgram, args: Sequence[Any], probe: Probe, limit: int) -> tuple[list[Any], dict[str, Any]]:
    """The program's outputs and everything a probe keeps of this level."""
    values, rest = traced_program(program, args, probe, max_iterations=limit)
    cap = {"args": [a for a, vid in zip(args, program.arg_ids) if is_numeric(program.avals[vid])],
           "values": {vid: values[vid] for vid in recorded(program)}, **rest}
    return program.outputs(values), cap


def _zeros_like_capture(fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    import jax

    shapes = jax.eval_shape(fn, *args)
    return jax.tree_util.tree_map(lambda s: jax.numpy.zeros(s.shape, s.dtype), shapes)


def _traced_scan(body: Body, ins: list[Any], k: int | None, rest: Probe, limit: int):
    import jax
    from jax import lax

    consts, init, xs = body.split(ins)
    keep = numeric_carry(body)
    prog, n = body.program, body.n_carry

    def step(state: Any, x: Any) -> Any:
        i, carry = state
        body_args = list(consts) + list(carry) + list(x)
        cap = None
        if k is None:
            outs = prog.outputs(prog.evaluate(body_args, bind_op))
        else:  # every value of every iteration, stacked like the scan's own outputs; iteration k kept below
            outs, cap = _level(prog, body_args, rest, limit)
        entering = [_as_data(c) for c, kk in zip(carry, keep) if kk]
        return (i + 1, list(outs[:n])), (list(outs[n:]), entering, cap)

    (trips, carry), (ys, entering, caps) = lax.scan(
        step, (jax.numpy.int32(0), list(init)), list(xs), length=body.trips,
        reverse=bool(body.params["reverse"]), unroll=body.params.get("unroll", 1))
    if body.params["reverse"]:  # stacked by slice index; execution step t used slice trips-1-t
        entering = [e[::-1] for e in entering]
    it = iter(entering)
    carries = [next(it) if kk else None for kk in keep]
    got = None if k is None else jax.tree_util.tree_map(lambda c: c[body.xs_index(k)], caps)
    return list(carry) + list(ys), {"carries": carries, "trips": trips}, got


def _traced_while(body: Body, ins: list[Any], k: int | None, rest: Probe, limit: int):
    import jax
    from jax import lax

    assert body.cond is not None
    consts, init, _ = body.split(ins)
    cconsts = ins[: int(body.params["cond_nconsts"])]
    keep = numeric_carry(body)
    prog, cond = body.program, body.cond
    kept = iteration_limit(body, limit)
    # One more slot than kept: iterations past the limit write into it (dynamic_update_slice clamps).
    hist0 = [jax.numpy.zeros((kept + 1, *_data_aval(a).shape), _data_aval(a).dtype)
             for a, kk in zip(body.carry_avals(), keep) if kk]
    bufs0 = None
    if k is not None:
        bufs0 = _zeros_like_capture(lambda *a: _level(prog, a, rest, limit)[1], list(consts) + list(init))

    def go(state: Any) -> Any:
        _, carry, _, _ = state
        return cond.outputs(cond.evaluate(list(cconsts) + list(carry), bind_op))[0]

    def step(state: Any) -> Any:
        i, carry, hist, bufs = state
        slot = jax.numpy.minimum(i, kept)
        entering = [_as_data(c) for c, kk in zip(carry, keep) if kk]
        hist = [lax.dynamic_update_index_in_dim(h, c, slot, 0) for h, c in zip(hist, entering)]
        body_args = list(consts) + list(carry)
        if k is None:
            outs = prog.outputs(prog.evaluate(body_args, bind_op))
        else:
            outs, cap = _level(prog, body_args, rest, limit)
            bufs = jax.tree_util.tree_map(lambda c, b: jax.numpy.where(i == k, c, b), cap, bufs)
        return i + 1, list(outs), hist, bufs

    trips, carry, hist, bufs = lax.while_loop(go, step, (jax.numpy.int32(0), list(init), hist0, bufs0))
    it = iter(h[:kept] for h in hist)
    carries = [next(it) if kk else None for kk in keep]
    return list(carry), {"carries": carries, "trips": trips}, bufs


def _traced_cond(op: Op, ins: list[Any], branch: int, rest: Probe, limit: int):
    from jax import lax

    n = len(op.eqn.params["branches"])
    taken = body_of(op, branch).program
    zeros = _zeros_like_capture(lambda *a: _level(taken, a, rest, limit)[1], ins[1:])

    def make(j: int) -> Callable[..., Any]:
        prog = body_of(op, j).program

        def run(*operands: Any) -> Any:
            if j == branch:
                return _level(prog, operands, rest, limit)
            return prog.outputs(prog.evaluate(list(operands), bind_op)), zeros
        return run

    outs, cap = lax.switch(ins[0], [make(j) for j in range(n)], *ins[1:])
    return list(outs), cap


def trace_of(loops: dict[int, Any], program: FlatProgram) -> dict[int, LoopTrace]:
    """LoopTraces from what ``traced_program`` captured for ``program``'s loops, on the host."""
    out = {}
    for idx, got in loops.items():
        trips = int(np.asarray(got["trips"]))
        carries = [None if c is None else host(c) for c in got["carries"]]
        out[idx] = LoopTrace(carries, trips, impls=carry_impls(body_of(program.ops[idx])))
    return out
