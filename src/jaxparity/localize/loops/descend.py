"""Open the loops and branches that diverge on their own: which iteration departs first, and which
op inside its body.

A loop op is a local divergence of its program when, on the same inputs, the path's loop gives
other results than the baseline's. Its first departing iteration is the first whose results differ
from the baseline's implementation of ONE iteration run on the path's own carry and inputs (the
carries come from the path's own compiled program; see ``capture``). Earlier iterations agree even
if their carries already differ by inherited noise; so the iteration found is where the loop itself
goes wrong. That iteration's body is then captured in full and localized like any program, and any
loop or branch inside it is opened the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.extend.core import Literal

from ...metrics import ulp_distance
from ...pytree import host
from ..localizer import Localization, LocalDivergence, LoopFrame, localize, replayable, single_op_path, values_equal
from ..program import FlatProgram, bind_op
from ..semantics import region_fma
from ..values import OpValues, op_by_op, op_values, program_values
from .capture import Probe
from .structure import Body, LoopTrace, body_of, loop_kind

__all__ = ["first_departing", "frame_key", "open_loops"]

MAX_OPENED = 3  # loops opened per program level: the first few local divergences tell the story
MAX_DEPTH = 8


def frame_key(frames: Sequence[LoopFrame]) -> tuple[tuple[int, int | None], ...]:
    """Which body a divergence lies in: (loop op index, iteration or branch) for each level."""
    return tuple((f.op.index, f.branch if f.kind == "cond" else f.iteration) for f in frames)


def _read(program: FlatProgram, ref: Any, vals: OpValues) -> Any:
    if isinstance(ref, Literal):
        return ref.val
    for table in (vals.values, vals.args, program.consts):
        if ref in table:
            return table[ref]
    return None


def _differ(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Any value that differs (PRNG keys compared by their key data; uncaptured ones skipped)."""
    return any(x is not None and y is not None and not values_equal(host(x), host(y)) for x, y in zip(a, b))


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return all(x is not None and y is not None and host(x).tobytes() == host(y).tobytes()
               and host(x).shape == host(y).shape for x, y in zip(a, b))


_REPLAY_FNS: dict[int, tuple[FlatProgram, Any]] = {}


def replay_iteration(baseline: str, body: Body, ins: Sequence[Any]) -> list[np.ndarray]:
    """One iteration of ``body`` on ``ins``, as ``baseline`` computes it: op by op (eager, the
    interpreter), or the body compiled on its own with the baseline's options (jit, export)."""
    return _replay(baseline, body.program, ins)


def replay_condition(baseline: str, body: Body, ins: Sequence[Any]) -> bool:
    """A while loop's condition on ``ins`` (its constants, then the carry), as ``baseline`` computes it."""
    assert body.cond is not None, "only a while loop has a condition"
    return bool(np.asarray(_replay(baseline, body.cond, ins)[0]))


def _replay(baseline: str, prog: Any, ins: Sequence[Any]) -> list[np.ndarray]:
    if op_by_op(baseline):
        return [host(x) for x in program_values(prog, baseline, ins).outputs]
    hit = _REPLAY_FNS.get(id(prog))
    if hit is None or hit[0] is not prog:
        hit = (prog, lambda *xs: prog.outputs(prog.evaluate(list(xs), bind_op)))
        _REPLAY_FNS[id(prog)] = hit
        while len(_REPLAY_FNS) > 16:
            _REPLAY_FNS.pop(next(iter(_REPLAY_FNS)))
    as_jax = tuple(jax.numpy.asarray(x) for x in ins)
    return [host(x) for x in single_op_path(baseline).run(hit[1], as_jax)]


def first_departing(body: Body, path: str, baseline: str, p_ins: list[Any], p_outs: list[Any], p_trace: LoopTrace,
                    b_ins: list[Any], b_outs: list[Any], b_trace: LoopTrace | None) -> tuple[int, str] | None:
    """The first iteration whose results differ from what the baseline computes for that one
    iteration from the same carry and inputs; and how that was established."""
    can_replay = replayable(baseline)
    for t in range(p_trace.captured):
        ins_p = body.iteration_inputs(p_ins, p_trace, t)
        if ins_p is None:
            return None
        outs_p = body.iteration_outputs(p_outs, p_trace, t)
        ins_b = body.iteration_inputs(b_ins, b_trace, t) if b_trace is not None else None
        if ins_b is not None and _same(ins_p, ins_b):
            outs_b = body.iteration_outputs(b_outs, b_trace, t)  # type: ignore[arg-type]
            if all(o is not None for o in outs_b) or not can_replay:
                if _differ(outs_p, outs_b):
                    return t, (f"iteration {t} is the first whose results differ from {baseline}'s although its "
                               "carry and inputs are the same on both")
                continue
        if can_replay:
            if _differ(outs_p, replay_iteration(baseline, body, ins_p)):
                return t, (f"iteration {t} is the first whose results differ from {baseline}'s implementation of "
                           f"that one iteration, run on {path}'s own carry and inputs")
    return None


def carry_ulp(p_trace: LoopTrace, b_trace: LoopTrace | None, limit: int = 4096) -> tuple[int, ...]:
    """Per iteration, the largest ULP difference between the two sides' entering carries."""
    if b_trace is None:
        return ()
    out = []
    for t in range(min(p_trace.captured, b_trace.captured, limit)):
        worst = 0
        for a, b in zip(p_trace.carries, b_trace.carries):
            if a is None or b is None:
                continue
            u = ulp_distance(np.asarray(a[t]), np.asarray(b[t]))
            worst = max(worst, int(np.where(u < 0, np.iinfo(np.int64).max, u).max(initial=0)))
        out.append(worst)
    return tuple(out)


def _module(op: Any, body: Body) -> str:
    """The loop's module path: what its body's ops share (``Stack/layers`` for an ``nn.scan`` named
    ``layers``), else the loop op's own."""
    stacks = [o.info.name_stack for o in body.program.ops if o.info.name_stack]
    if not stacks:
        return op.info.name_stack
    common = stacks[0].split("/")
    for st in stacks[1:]:
        parts = st.split("/")
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    own = [p for p in op.info.name_stack.split("/") if p]
    if common[: len(own)] != own or len(common) <= len(own):
        return op.info.name_stack
    return "/".join(common[: len(own) + 1])  # the scanned module itself, not the module inside it


def _iteration_io(body: Body, step: int, ins: list[Any], outs: list[Any],
                  trace: LoopTrace | None) -> tuple[list[Any] | None, list[Any]]:
    """One side's inputs and results of iteration (or branch) ``step``, as far as captured."""
    if body.kind == "cond":
        return list(ins[1:]), list(outs)
    if trace is None or step >= trace.captured:
        return None, [None] * len(body.program.out_ids)
    return body.iteration_inputs(ins, trace, step), body.iteration_outputs(outs, trace, step)


def _body_values(spec: str, body: Body, step: int, ins: list[Any], outs: list[Any], trace: LoopTrace | None,
                 case: FlatProgram, flat_args: Sequence[Any], probe: Probe,
                 fallback: list[Any] | None) -> tuple[OpValues, str | None]:
    """The body's values at ``step`` along ``spec``. An op-by-op path re-runs the body on its own
    iteration inputs (the same values by construction). A compiled path compiles the body on its own,
    returning every intermediate, and runs it on its own captured carry and inputs: kept when it
    reproduces that iteration's results bit for bit; else the values are captured inside the path's
    whole compiled program (a probe: slower to compile, the loop as the path runs it)."""
    inputs, expected = _iteration_io(body, step, ins, outs, trace)
    if op_by_op(spec):
        note = None
        if inputs is None:
            if fallback is None:
                raise ValueError(f"{spec} did not capture the inputs of that iteration")
            inputs, note = fallback, (f"{spec} did not run this iteration with its own carry: its body was run on "
                                      "the path's inputs instead")
        return program_values(body.program, spec, inputs), note
    if inputs is not None and all(e is not None for e in expected):
        alone = op_values(body.program, spec, [jax.numpy.asarray(x) for x in inputs])
        if not _differ(alone.outputs, expected):
            return alone, None
    return op_values(case, spec, flat_args, probe), (
        f"{spec}: the body compiled on its own does not reproduce the iteration's results; its values were "
        "captured inside the whole compiled program instead")


def open_loops(program: FlatProgram, loc: Localization, path_vals: OpValues, base_vals: OpValues, *, case: FlatProgram,
               flat_args: Sequence[Any], plain_outputs: Sequence[np.ndarray] | None = None, probe: Probe = (),
               frames: tuple[LoopFrame, ...] = (), depth: int = 0, keep: dict | None = None) -> Localization:
    """``loc`` with each local divergence at a loop or branch replaced by the local divergences inside
    the iteration (or branch) where it departs on its own, recursively. ``keep``, when given, receives
    each opened body's program and both sides' values, keyed by ``frame_key`` of its frames."""
    local: list[LocalDivergence] = []
    notes = list(loc.notes)
    opened = 0
    for d in loc.local:
        op = program.ops[d.op.index]
        kind = loop_kind(op)
        if kind is None or opened >= MAX_OPENED or depth >= MAX_DEPTH:
            local.append(d)
            continue
        opened += 1
        try:
            inner, inner_notes = _open(program, op, d, path_vals, base_vals, case, flat_args, plain_outputs, probe,
                                       frames, depth, keep)
        except Exception as e:  # opening is extra evidence: the loop op stays the finding
            inner, inner_notes = [d], [f"#{d.op.index} {kind} could not be opened ({type(e).__name__}: "
                                       f"{str(e).strip().splitlines()[0] if str(e).strip() else ''})"]
        local.extend(inner)
        notes.extend(inner_notes)
    return dataclasses.replace(loc, local=tuple(local), notes=tuple(dict.fromkeys(notes)))


def _open(program: FlatProgram, op: Any, d: LocalDivergence, path_vals: OpValues, base_vals: OpValues,
          case: FlatProgram, flat_args: Sequence[Any], plain_outputs: Sequence[np.ndarray] | None, probe: Probe,
          frames: tuple[LoopFrame, ...], depth: int, keep: dict | None) -> tuple[list[LocalDivergence], list[str]]:
    path, baseline = path_vals.path, base_vals.path
    kind = loop_kind(op)
    p_ins = [_read(program, r, path_vals) for r in op.inputs]
    b_ins = [_read(program, r, base_vals) for r in op.inputs]
    p_outs = [path_vals.values.get(v) if v is not None else None for v in op.outputs]
    b_outs = [base_vals.values.get(v) if v is not None else None for v in op.outputs]
    notes: list[str] = []
    p_trace = b_trace = None
    if kind == "cond":
        n = len(op.eqn.params["branches"])
        step = int(np.clip(np.asarray(p_ins[0]), 0, n - 1))
        body = body_of(op, step)
        frame = LoopFrame(d.op, kind, branch=step, module=_module(op, body))
        fallback = p_ins[1:]
        if b_ins[0] is not None and int(np.clip(np.asarray(b_ins[0]), 0, n - 1)) != step:
            return [d], [f"#{d.op.index} cond: {path} took branch {step}, {baseline} another: the branch index "
                         "differs, so the divergence lies before it"]
    else:
        body = body_of(op)
        p_trace, b_trace = path_vals.loops.get(op.info.index), base_vals.loops.get(op.info.index)
        if p_trace is None:
            return [d], [f"#{d.op.index} {kind}: {path}'s loop carries were not captured"]
        if p_trace.captured < p_trace.trips:
            notes.append(f"#{d.op.index} {kind} ran {p_trace.trips} iterations on {path}; the carries of the first "
                         f"{p_trace.captured} were captured (capture budget), later ones were not searched")
        if b_trace is not None and b_trace.trips != p_trace.trips:
            notes.append(f"#{d.op.index} {kind} ran {p_trace.trips} iterations on {path} and {b_trace.trips} on "
                         f"{baseline}")
        found = first_departing(body, path, baseline, p_ins, p_outs, p_trace, b_ins, b_outs, b_trace)
        if found is None:
            why = ("no captured iteration departs on its own" if replayable(baseline) else
                   f"{baseline} runs whole programs only, and no iteration with the same carry on both sides "
                   "gives other results")
            return [d], notes + [f"#{d.op.index} {kind}: {why}; the loop is reported as one op"]
        step, how = found
        frame = LoopFrame(d.op, kind, step, p_trace.trips, None, carry_ulp(p_trace, b_trace), how, _module(op, body))
        fallback = body.iteration_inputs(p_ins, p_trace, step)
    new_probe = probe + ((op.info.index, step),)
    pb, note_p = _body_values(path, body, step, p_ins, p_outs, p_trace, case, flat_args, new_probe, fallback)
    bb, note_b = _body_values(baseline, body, step, b_ins, b_outs, b_trace, case, flat_args, new_probe, fallback)
    notes += [n for n in (note_p, note_b) if n]
    if pb.case_outputs is not None and plain_outputs is not None:
        moved = sum(int(np.count_nonzero(ulp_distance(np.asarray(a), np.asarray(b))))
                    for a, b in zip(pb.case_outputs, plain_outputs) if np.asarray(a).shape == np.asarray(b).shape)
        if moved:
            notes.append(f"capturing the body of {frame.describe()} changed {moved} output element{'s' if moved > 1 else ''} of {path} (the "
                         "compiler fused differently): its per-op values are evidence, not the fused program")
    inner = localize(body.program, pb, bb, [], baseline)
    here = frames + (frame,)
    if keep is not None:
        keep[frame_key(here)] = (body.program, pb, bb)
    inner = dataclasses.replace(inner, local=tuple(dataclasses.replace(x, within=here) for x in inner.local))
    inner = open_loops(body.program, inner, pb, bb, case=case, flat_args=flat_args, plain_outputs=plain_outputs,
                       probe=new_probe, frames=here, depth=depth + 1, keep=keep)
    notes += [f"in {frame.describe()}: {n}" for n in inner.notes]
    if not inner.local:
        how = f" ({frame.how})" if frame.how else ""
        detail = (f"{frame.describe()} departs on its own{how}, but its body's ops all agree when observed one by "
                  "one: the difference lives in how the compiler fuses the body")
        if body.kind == "cond":
            r_ins, r_outs, r_base = p_ins[1:], p_outs, b_outs
        else:
            r_ins = body.iteration_inputs(p_ins, p_trace, step)  # type: ignore[arg-type]
            r_outs = body.iteration_outputs(p_outs, p_trace, step)  # type: ignore[arg-type]
            r_base = (body.iteration_outputs(b_outs, b_trace, step) if b_trace is not None and step < b_trace.captured
                      else [None] * len(r_outs))
        semantics = region_fma(body.program, r_ins, r_outs, r_base) if r_ins is not None else ()
        return [dataclasses.replace(d, detail=detail, semantics=d.semantics + semantics)], notes
    return list(inner.local), notes
