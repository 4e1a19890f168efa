"""Which local divergences carry the difference the user sees in the outputs.

Localization finds every op whose own output departs from the baseline's on the same inputs; most of
them are harmless (a 1 ULP rounding that a later bf16 cast erases) and one or two carry the output
error. Blame measures that by injection: the baseline's replay of the program, with one divergence's
own values (the path's output of that op, or of the loop holding it) put in place of the baseline's,
everything downstream recomputed the baseline's way. How much of the path's output difference that
replay reproduces is the divergence's *share*. Ops downstream whose recomputed values equal the
baseline's bit for bit stop the propagation, so a divergence that dies out costs a few ops.

Shares need not add up: two divergences may matter only together (a threshold that each alone does not
cross) and many tiny ones may matter only together because the program amplifies them (cancellation
in a one-pass variance). Leaving one divergence out of all of them injected together measures what
it is *needed* for; divergences with a share or a need are the carriers, the rest are noise. Where no
single divergence or small group carries the error but all of them together do, the op that amplifies
them is blamed, with its condition.

The replay needs a baseline that runs one op (eager, declared, or jit/export compiling one op); for a
whole-program baseline (a SavedModel, ONNX, IREE...) eager propagates the injected values instead,
and the blame says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jax.extend.core import Literal

from ..metrics import as_wide, signed_zero_flips, ulp_distance
from ..rounding import is_float_dtype
from .program import FlatProgram, Op
from .work import BUDGET, ITERATION_BUDGET, Work, op_units, program_units

__all__ = ["Amplifier", "Blame", "Carrier", "amplifier_of", "blame", "reproduced"]

# A norm-wise relative difference below any float format's rounding (float64's unit roundoff is 1.1e-16):
# inputs that "differ" by a subnormal's worth, from which no gain is measured (lm1b's masked logits gave
# "turns relative differences of 1.3e-45 into 2.2e-07").
NEGLIGIBLE = 1e-30
CARRIES = 0.05  # a share (alone, or needed among all) of at least this much of the output difference carries it
MAX_ALONE = 24  # units replayed one by one exactly; of more, each one's share is screened (``_Screen``)
SCREEN_CHECKS = 2  # of many divergences, those with the largest screened shares replayed exactly to check the screen
SCREEN_AGREES = 0.02  # a screen within this of the exact shares it was checked on stands for the rest
SCREEN_METHOD = "a compiled replay (XLA, unoptimized, every declared rounding kept)"
SMALL_ULP = 64  # a carrier this close to the baseline on its own inputs: what makes it large is looked for
AMPLIFIES = 1e3  # relative difference grown at least this many times across one op: an amplifier


@dataclass(frozen=True)
class Carrier:
    """One divergence (a position in ``Localization.local``; inside a loop, the first divergence of the
    loop it sits in) and how much of the output difference it carries."""

    divergence: int  # position in Localization.local
    top_index: int  # the op (or loop op) of the case's own program whose values were injected
    alone: float  # share of the output difference reproduced with only this divergence injected (0..1)
    needed: float  # share lost when it is left out of all the divergences injected together (0..1)
    # Per differing output (name, share alone), largest first.
    outputs: tuple[tuple[str, float], ...] = ()
    # A scan loop injected whole: per execution step, the share its own error carries when only that
    # iteration's error is injected (largest first, those that carry some of it), and how many were measured.
    iterations: tuple[tuple[int, float], ...] = ()
    iterations_measured: int = 0
    iterations_with_error: int = 0  # iterations that add an error of their own (the others inject nothing)
    screened: bool = False  # its share alone was measured on the compiled screen (``Blame.screened``), not replayed

    @property
    def share(self) -> float:
        return max(self.alone, self.needed)


@dataclass(frozen=True)
class Amplifier:
    """An op that turns small differences in its inputs into large ones in its output."""

    index: int  # op in the case's program
    primitive: str
    where: str  # the user's line (or where the op was created)
    gain: float  # relative difference out / relative difference in
    before: float  # largest norm-wise relative difference of its inputs (OpDrift.rel_norm)
    after: float  # norm-wise relative difference of its output
    condition: float | None  # for add/sub: max (|a| + |b|) / |a ± b| on the baseline's values (cancellation)
    pattern: str | None  # a recognised ill-conditioned form ("one-pass variance"), where one is
    remedy: str | None  # its well-conditioned form


@dataclass(frozen=True)
class Blame:
    """How the output difference of one path divides among its local divergences."""

    method: str  # how the rest of the program was replayed ("eager's implementation, op by op")
    outputs: tuple[tuple[str, float], ...]  # differing outputs: (name, max abs difference), largest first
    together: float  # share reproduced with every local divergence injected at once
    carriers: tuple[Carrier, ...]  # largest share first
    noise: tuple[int, ...]  # positions in Localization.local that carry nothing measurable
    acting_together: tuple[int, ...] = ()  # carriers that carry little alone but are needed among all
    amplifier: Amplifier | None = None  # where many small divergences carry the error only together
    unmeasured: int = 0  # divergences not replayed alone (over MAX_ALONE, or past the work budget)
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    why_unmeasured: str = ""  # why the unmeasured divergences were not replayed alone
    # Of many divergences, those whose share alone was measured on a compiled replay of the whole program
    # (``SCREEN_METHOD``) rather than the baseline's own, and the largest difference between the two on
    # those replayed both ways (the screen's shares stand only where it is within SCREEN_AGREES).
    screened: int = 0
    screen_gap: float | None = None

    @property
    def lead(self) -> Carrier | None:
        return self.carriers[0] if self.carriers else None

    @property
    def overlapping(self) -> int:
        """How many divergences each reproduce half or more of the output difference alone: where several
        do, no one of them is the cause (any of them sets off the same difference)."""
        return sum(c.alone >= 0.5 for c in self.carriers)

    @property
    def collective(self) -> bool:
        """No divergence carries the error alone or is needed for it, yet all of them together do."""
        return self.together >= 0.5 and not self.carriers


def reproduced(replayed: np.ndarray, base: np.ndarray, target: np.ndarray, clip: bool = True) -> float | None:
    """The share of ``target - base`` that ``replayed`` reproduces, in [0, 1]; None where target and base
    agree. Finite elements: 1 - |replayed - target|^2 / |base - target|^2 summed over the differing
    elements (least squares); elements where a side is NaN or inf: reproduced when the replay has the
    target's value class (NaN, +inf, -inf); the two parts weighted by their counts of elements."""
    # a 0-d output (a loss): one element, as a 1-d array of one (a scalar takes no boolean mask)
    target, base, replayed = (np.atleast_1d(np.asarray(x)) for x in (target, base, replayed))
    numeric = target.dtype.kind in "fciub" or is_float_dtype(target.dtype)  # bf16, fp8: kind 'V'
    if target.shape != base.shape or replayed.shape != target.shape or not numeric:
        return None
    differ = ulp_distance(target, base) != 0
    if not differ.any():
        return None
    t, b, r = as_wide(target), as_wide(base), as_wide(replayed)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(t) & np.isfinite(b)
        fin = differ & finite
        n_f = int(fin.sum())
        share_f = 0.0
        if n_f:
            gap = np.abs(b[fin] - t[fin]) ** 2
            miss = np.where(np.isfinite(r[fin]), np.abs(r[fin] - t[fin]) ** 2, gap)
            total = float(gap.sum())
            share_f = 1.0 - float(np.minimum(miss, 4 * gap).sum()) / total if total > 0 else 0.0
        nf = differ & ~finite
        n_nf = int(nf.sum())
        same_class = (np.isnan(r[nf]) & np.isnan(t[nf])) | (r[nf] == t[nf])
        share = ((max(share_f, 0.0) if clip else share_f) * n_f + float(same_class.sum())) / (n_f + n_nf)
    return float(min(max(share, 0.0), 1.0)) if clip else float(min(share, 1.0))


class _Replay:
    """The baseline's replay of a program with some ops' local errors injected: at an injected op, the
    replay's own result plus what the path's op added on its own inputs (its output minus the baseline's
    result of the op on the path's inputs), so an injection carries that op's own divergence and none of
    what it inherited from earlier ops."""

    def __init__(self, program: FlatProgram, base_values: dict[int, Any], path_values: dict[int, Any],
                 base_args: dict[int, Any], path_args: dict[int, Any],
                 step: Callable[[Op, list[Any]], Sequence[Any]], work: Work) -> None:
        self.program, self.base, self.path, self.step, self.work = program, base_values, path_values, step, work
        self.units: dict[int, float] = {}  # op index -> what replaying it alone is charged
        self.args, self.path_args = base_args, path_args
        self.producers = {vid: op for op in program.ops for vid in op.outputs if vid is not None}
        self.filled: dict[int, Any] = {}  # baseline values that were not recorded (keys...), computed once
        self.own: dict[int, list[Any]] = {}  # op index -> the baseline's result on the path's inputs
        self.device: dict[int, Any] = {}  # the baseline's values as the arrays ``step`` takes, made once
        self.ops_run = 0

    def _base_value(self, ref: Any) -> Any:
        if isinstance(ref, Literal):
            return ref.val
        for source in (self.base, self.args, self.program.consts, self.filled):
            if ref in source:
                return source[ref]
        op = self.producers[ref]  # not recorded (a PRNG key, a token): compute it the baseline's way
        outs = self._run(op, [self._base_value(r) for r in op.inputs])
        for vid, out in zip(op.outputs, outs):
            if vid is not None:
                self.filled[vid] = out
        return self.filled[ref]

    def _path_value(self, ref: Any) -> Any:
        if isinstance(ref, Literal):
            return ref.val
        for source in (self.path, self.path_args):
            if ref in source:
                return source[ref]
        return self._base_value(ref)  # not recorded on the path (a key): the same on both sides

    def _run(self, op: Op, ins: list[Any]) -> list[Any]:
        from ..pytree import host

        return [host(x) for x in self._run_raw(op, ins)]

    def _run_raw(self, op: Op, ins: list[Any]) -> list[Any]:
        self.ops_run += 1
        if op.info.index not in self.units:
            self.units[op.info.index] = op_units(op.eqn)
        self.work.charge(self.units[op.info.index])
        return list(self.step(op, ins))

    def _base_device(self, ref: Any) -> Any:
        """The baseline's value of ``ref`` as a device array (a numpy value is copied once, not per op)."""
        import jax.numpy as jnp

        if isinstance(ref, Literal):
            return ref.val
        if ref not in self.device:
            v = self._base_value(ref)
            self.device[ref] = jnp.asarray(v) if isinstance(v, np.ndarray) else v
        return self.device[ref]

    def injectable(self, op: Op) -> bool:
        return all(vid is None or vid in self.path or not _numeric(self.program, vid) for vid in op.outputs)

    def _baseline_on_path_inputs(self, op: Op) -> list[Any]:
        if op.info.index not in self.own:
            ins = [self._path_value(r) for r in op.inputs]
            same = all(_bitwise(a, self._base_value(r)) for a, r in zip(ins, op.inputs) if not isinstance(r, Literal))
            self.own[op.info.index] = ([self._base_value(v) if v is not None else None for v in op.outputs] if same
                                       else self._run(op, ins))
        return self.own[op.info.index]

    def outputs(self, inject: set[int], stop: float, replaced: dict[int, list[Any]] | None = None
                ) -> list[Any] | None:
        """The program's outputs with the local errors of the ops ``inject`` (indices) added, and the ops of
        ``replaced`` giving those outputs instead (one iteration's error carried through its loop); None
        once the work spent reaches ``stop``."""
        from ..pytree import host

        changed: dict[int, Any] = {}  # on the host, compared with the baseline's
        fed: dict[int, Any] = {}  # the same values as the step returned them, fed to the next op
        replaced = replaced or {}
        for op in self.program.ops:
            touched = any(not isinstance(r, Literal) and r in changed for r in op.inputs)
            if op.info.index not in inject and op.info.index not in replaced and not touched:
                continue
            if self.work.spent >= stop:
                return None
            raw = None
            outs: list[Any]
            if touched:
                ins = [fed[r] if not isinstance(r, Literal) and r in fed else self._base_device(r) for r in op.inputs]
                raw = self._run_raw(op, ins)
                outs = [host(x) for x in raw]
            else:
                outs = [self._base_value(v) if v is not None else None for v in op.outputs]
            if op.info.index in replaced:
                outs, raw = list(replaced[op.info.index]), None
            if op.info.index in inject:
                own = self._baseline_on_path_inputs(op)
                outs = [_add_local(o, self.path[v], r) if v is not None and v in self.path else o
                        for o, v, r in zip(outs, op.outputs, own)]
                raw = None
            for k, (vid, out) in enumerate(zip(op.outputs, outs)):
                if vid is None or not _numeric(self.program, vid):
                    continue
                if not _bitwise(out, self._base_value(vid)):
                    changed[vid] = out
                    fed[vid] = raw[k] if raw is not None else out
        return [r.val if isinstance(r, Literal) else changed.get(r, None) for r in self.program.out_ids]


def _add_local(replayed: Any, path: Any, own: Any) -> np.ndarray:
    """``replayed`` plus the op's local error ``path - own`` (``own``: the baseline's result on the path's
    inputs); where that error is not a finite number (NaN against a number, an integer or bool flipped),
    the path's own value."""
    from ..pytree import host

    replayed, path, own = host(replayed), host(path), host(own)
    if replayed.shape != path.shape or own.shape != path.shape:
        return path
    if path.dtype.kind in "fc" or path.dtype.kind == "V":
        with np.errstate(invalid="ignore", over="ignore"):
            delta = as_wide(path) - as_wide(own)
            moved = as_wide(replayed) + delta
            out = moved.astype(path.dtype)
        # NaN or inf, and a zero of the other sign (its error is 0 as a number): the path's own value
        keep_path = ~np.isfinite(delta) | ~np.isfinite(moved) | signed_zero_flips(path, own)
        return np.where(keep_path, path, out).astype(path.dtype)
    return np.where(path != own, path, replayed).astype(path.dtype)


def _numeric(program: FlatProgram, vid: int) -> bool:
    from .program import is_numeric

    return is_numeric(program.avals[vid])


def _bitwise(a: Any, b: Any) -> bool:
    from ..pytree import host

    a, b = host(a), host(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def blame(program: FlatProgram, local: Sequence[Any], base_values: dict[int, Any], path_values: dict[int, Any],
          base_args: dict[int, Any], path_args: dict[int, Any], step: Callable[[Op, list[Any]], Sequence[Any]], base_out: Sequence[np.ndarray],
          path_out: Sequence[np.ndarray], names: Sequence[str], method: str, drift: Sequence[Any] = (),
          budget: float = BUDGET, iterations: Callable[[Op], Any] | None = None) -> Blame | None:
    """Divide the difference between ``path_out`` and ``base_out`` (flat outputs, named ``names``) among
    the local divergences ``local`` (``LocalDivergence``s, program order) by injecting each one's values
    (``path_values``) into the baseline's replay (``step`` runs one op the baseline's way on given
    inputs; ``base_values`` and ``base_args`` are the baseline's own values, ``path_args`` the path's
    inputs of the program where they differ, as in a loop body). ``iterations``: for a scan op, the loop's
    outputs with one iteration's own error injected, per iteration (``_iteration_injections``): a loop
    that carries the error is then blamed iteration by iteration. ``budget``: the work it may spend
    (``localize.work``: ops replayed, weighted by size), so the same case gets the same blame on any
    machine under any load. None where nothing differs."""
    # 0-d outputs (a loss, a log-density) as arrays of one element: every mask and index below needs an axis
    base_out = [np.atleast_1d(np.asarray(x)) for x in base_out]
    path_out = [np.atleast_1d(np.asarray(x)) for x in path_out]
    from ..pytree import host

    start = time.monotonic()
    work = Work(budget)
    base_out = [host(x) for x in base_out]
    path_out = [host(x) for x in path_out]
    differing = [j for j, (p, b) in enumerate(zip(path_out, base_out)) if reproduced(b, b, p) is not None]
    if not differing or not local:
        return None
    replay = _Replay(program, base_values, path_values, base_args, path_args, step, work)
    ops = {op.info.index: op for op in program.ops}
    # Units: a divergence at the top level is its op; those inside a loop are the loop op, injected whole.
    units: dict[int, list[int]] = {}
    for k, d in enumerate(local):
        units.setdefault(d.top_index, []).append(k)
    notes: list[str] = []
    blocked = [u for u in units if u not in ops or not replay.injectable(ops[u])]
    for u in blocked:
        units.pop(u)
    if blocked:
        notes.append(f"{len(blocked)} divergences could not be injected (their values were not captured)")
    if not units:
        return None

    def shares(inject: set[int], replaced: dict[int, list[Any]] | None = None,
               stop: float | None = None) -> dict[int, float] | None:
        """Per differing output, the share reproduced with ``inject``'s local errors (raw: may be negative)."""
        outs = replay.outputs(inject, work.limit if stop is None else stop, replaced)
        if outs is None:
            return None
        got = {}
        for j in differing:
            r = outs[j] if outs[j] is not None else base_out[j]
            got[j] = reproduced(host(r), base_out[j], path_out[j], clip=False) or 0.0
        return got

    def total(s: dict[int, float]) -> float:
        return max(0.0, sum(max(v, 0.0) for v in s.values()) / len(s))

    def raw(s: dict[int, float]) -> float:
        return sum(s.values()) / len(s)

    everything = shares(set(units))
    if everything is None:
        return None
    together = total(everything)
    order = sorted(units)  # program order
    alone: dict[int, dict[int, float]] = {}  # unit -> its share alone, per differing output
    exact: set[int] = set()  # units whose share alone comes from the baseline's own replay
    needed: dict[int, float] = {}
    why = ""

    def replay_alone(candidates: Sequence[int]) -> bool:
        """Replay each candidate alone, exactly; True once the work budget is spent."""
        for u in candidates:
            if u in exact:
                continue
            got = everything if len(units) == 1 else shares({u})
            if got is None:
                return True
            alone[u] = got
            exact.add(u)
        return False

    # Of many divergences, each one's share alone is screened on a compiled replay of the whole program
    # (one compile, then one run per divergence) and checked exactly on the largest; where the screen
    # agrees with the exact replay, its shares stand for the others. Shares overlap (a divergence that
    # flips the same bf16 roundings as another reproduces the same difference), so no sum of shares
    # decides which divergences can be left out: every one is measured, on the screen or exactly.
    screen = _Screen.build(program, {u: ops[u] for u in order}, replay, base_args, base_out, path_out, differing,
                           work, work.until((work.limit - work.spent) / 2)) if len(order) > MAX_ALONE else None
    gap: float | None = None
    if screen is not None:
        ranked = sorted(screen.shares, key=lambda u: -total(screen.shares[u]))
        checks = [u for u in order if u in screen.unscreened] + ranked[:SCREEN_CHECKS]
        spent = replay_alone(checks)
        gaps = [abs(total(alone[u]) - total(screen.shares[u])) for u in checks if u in exact and u in screen.shares]
        gap = max(gaps, default=None)
        if gap is not None and gap <= SCREEN_AGREES:
            for u in ranked:
                alone.setdefault(u, screen.shares[u])
        elif not spent:  # the screen departs from the replay: those it ranks first are replayed exactly
            replay_alone([u for u in ranked if total(screen.shares[u]) >= CARRIES / 2][:MAX_ALONE])
    else:
        spent = replay_alone(order[:MAX_ALONE])
        if not spent and len(order) > len(alone):
            # No screen (it could not be compiled): the rest in chunks of consecutive ops, each chunk
            # injected together, the members of the chunks that carry replayed alone.
            rest = [u for u in order if u not in alone]
            size = max(1, math.ceil(len(rest) / MAX_ALONE))
            for chunk in (rest[i:i + size] for i in range(0, len(rest), size)):
                got = shares(set(chunk))
                if got is None or (total(got) >= CARRIES and replay_alone(chunk)):
                    break
    # Leave-one-out where the shares alone fall short of all of them together: divergences that act together.
    if len(units) > 1 and sum(total(s) for s in alone.values()) < together - CARRIES:
        if screen is not None and gap is not None and gap <= SCREEN_AGREES:
            for u in order:
                s = screen.measure(set(units) - {u}, work.limit)
                if s is None:
                    break
                needed[u] = max(0.0, together - total(s))
        else:
            for u in [u for u in order if u in exact][:MAX_ALONE]:
                s = shares(set(units) - {u})
                if s is None:
                    break
                needed[u] = max(0.0, together - total(s))
    measured = set(alone) | set(needed)
    if len(measured) < len(units):
        unscreened = screen is not None and any(u not in screen.shares and u not in screen.unscreened for u in units)
        why = (work.describe() if work.out or (unscreened and gap is not None and gap <= SCREEN_AGREES) else
               f"the compiled screen departs from the baseline's replay (by {gap:.0%} of a share)"
               if gap is not None and gap > SCREEN_AGREES else "their group of ops carries none of the difference")
        notes.append(f"{len(units) - len(measured)} of {len(units)} divergences were not replayed alone ({why}): "
                     "they are counted among all of them together")
    if alone.keys() - exact:
        notes.append(f"{len(alone.keys() - exact)} of {len(units)} divergences were measured on {SCREEN_METHOD}, "
                     f"which gave the baseline's own replay's share within {gap:.1%} on the "
                     f"{len(exact)} replayed exactly")
    name = {j: names[j] if j < len(names) else f"out[{j}]" for j in differing}
    carriers = []
    offsetting = set()
    for u in order:
        a = total(alone[u]) if u in alone else 0.0
        n = needed.get(u, 0.0)
        if max(a, n) < CARRIES:
            continue
        if u in alone and raw(alone[u]) < -CARRIES:
            offsetting.add(u)  # alone it moves the outputs the other way: others offset it, it is no threshold
        per = tuple(sorted(((name[j], round(max(v, 0.0), 4)) for j, v in alone.get(u, {}).items() if v >= CARRIES),
                           key=lambda x: -x[1]))
        carriers.append(Carrier(units[u][0], u, round(a, 4), round(n, 4), per, screened=u not in exact))
    carriers.sort(key=lambda c: -c.share)
    if iterations is not None:
        carriers = [_by_iteration(c, ops[c.top_index], iterations, shares, total, work) for c in carriers[:2]] + \
            carriers[2:]
    carried = {k for c in carriers for k in units[c.top_index]}
    noise = tuple(k for u in order if u in measured for k in units[u] if k not in carried)
    acting = tuple(c.divergence for c in carriers if c.alone < CARRIES <= c.needed and c.top_index not in offsetting)
    amplifier = None
    # Small local errors that carry a large output difference: the op that amplifies them is named too.
    # Measured norm-wise, so a carrier far off on a few tiny elements (a flushed subnormal) and a rounding apart on
    # the large ones is still seen amplified where its large elements are; a carrier wrong in its leading digits
    # has nothing left to grow by a thousand times.
    if together >= 0.5:
        amplifier = amplifier_of(program, drift, {**base_args, **base_values}, min(d.top_index for d in local))
    with np.errstate(invalid="ignore", over="ignore"):
        differences = {j: np.abs(as_wide(path_out[j]) - as_wide(base_out[j]))[ulp_distance(path_out[j], base_out[j]) != 0]
                       for j in differing}
        sizes = tuple(sorted(((name[j], float(np.where(np.isnan(g), np.inf, g).max(initial=0.0)))
                              for j, g in differences.items()), key=lambda x: -x[1]))
    if together < 0.5:
        notes.append(f"all local divergences injected together reproduce {together:.0%} of the output difference: "
                     "the rest comes from ops that could not be checked, or from how the path runs the program "
                     "as a whole")
    return Blame(method, sizes, round(together, 4), tuple(carriers), noise, acting, amplifier,
                 len(units) - len(measured), tuple(notes), round(time.monotonic() - start, 3), why,
                 screened=len(alone.keys() - exact), screen_gap=round(gap, 4) if gap is not None else None)


MAX_ITERATIONS = 64  # iterations of a loop blamed one by one, largest own error first


def _by_iteration(c: Carrier, op: Op, iterations: Callable[[Op], Any], shares: Callable[..., Any],
                  total: Callable[[Any], float], work: Work) -> Carrier:
    """A carrier that is a scan loop, with the share each iteration's own error carries alone."""
    import dataclasses

    from .loops.structure import loop_kind

    if loop_kind(op) not in ("scan", "while"):
        return c
    found, measured = [], 0
    stop = work.until(ITERATION_BUDGET)  # each iteration injected replays the rest of the loop
    try:
        with_error, injections = iterations(op)
        for t, outs in injections:
            if work.spent >= stop:
                break
            work.charge(op_units(op.eqn))  # the loop run again from the injected iteration on (at most whole)
            got = shares(set(), {op.info.index: outs}, stop)
            if got is None:
                break
            measured += 1
            if total(got) >= CARRIES:
                found.append((t, round(total(got), 4)))
    except Exception:  # per-iteration blame is extra: the loop's own share stands
        return c
    found.sort(key=lambda x: -x[1])
    return dataclasses.replace(c, iterations=tuple(found), iterations_measured=measured,
                               iterations_with_error=with_error)


def _iteration_injections(op: Op, baseline: str, path_vals: Any, base_vals: Any, program: FlatProgram,
                          base_args: dict[int, Any], path_args: dict[int, Any]) -> tuple[int, Any]:
    """For a scan or while op: how many iterations add an error of their own, and an iterator of
    (iteration t, the loop's outputs the baseline computes with only iteration t's own error added),
    largest error first. Iteration t's own error is the path's results of t minus the baseline's
    implementation of that one iteration on the path's own carry and inputs; the baseline's loop is
    chained iteration by iteration (its own implementation of one iteration; a while loop's condition
    decides, after an injection, when it stops), and must reproduce the baseline's loop outputs bit for
    bit without injection, else nothing is yielded. A while loop whose two sides ran different numbers
    of iterations is not blamed iteration by iteration."""
    from ..pytree import host
    from .localizer import _read
    from .loops.descend import replay_condition, replay_iteration
    from .loops.structure import body_of, carry_impls

    body = body_of(op)
    p_trace = path_vals.loops.get(op.info.index)
    if body.kind == "scan":
        trips = body.trips or 0
    else:
        b_trace = base_vals.loops.get(op.info.index)
        trips = b_trace.trips if b_trace is not None and p_trace is not None and b_trace.trips == p_trace.trips else 0
    if p_trace is None or not trips or any(i is not None for i in carry_impls(body)):
        return 0, iter(())

    b_ins = [_read(program, r, base_vals.values, base_args) for r in op.inputs]
    p_ins = [_read(program, r, path_vals.values, path_args) for r in op.inputs]
    b_outs = [host(base_vals.values[v]) if v is not None and v in base_vals.values else None for v in op.outputs]
    p_outs = [path_vals.values.get(v) if v is not None else None for v in op.outputs]
    dropped = {k for k, v in enumerate(op.outputs) if v is None}  # outputs nothing reads (a while's counter)
    if any(x is None for x in b_ins) or any(x is None for k, x in enumerate(b_outs) if k not in dropped):
        return 0, iter(())
    consts, carry, xs = body.split(b_ins)
    n = body.n_carry
    cond_consts = b_ins[:int(op.eqn.params["cond_nconsts"])] if body.kind == "while" else []

    def step_inputs(s: int, carry: list[Any]) -> list[Any]:
        return list(consts) + list(carry) + [np.asarray(host(x))[body.xs_index(s)] for x in xs]

    chain = [list(carry)]  # the carry entering each iteration, the baseline's way
    ys: list[list[Any]] = []
    for s in range(trips):
        outs = replay_iteration(baseline, body, step_inputs(s, chain[-1]))
        chain.append(outs[:n])
        ys.append(outs[n:])

    # The baseline's stacked outputs; a dropped one assembled from its chained iterations.
    b_stacked = [y if y is not None else np.stack([host(ys[body.xs_index(j)][k]) for j in range(trips)])
                 for k, y in enumerate(b_outs[n:])]

    def assemble(start: int, outs_from: list[list[Any]], final: list[Any]) -> list[Any]:
        stacked = [np.array(host(y), copy=True) for y in b_stacked]
        for s, row in zip(range(start, trips), outs_from):
            for k, y in enumerate(row):
                stacked[k][body.xs_index(s)] = host(y)
        return [host(x) for x in final] + stacked

    if not all(_bitwise(a, b) for a, b in zip(assemble(0, ys, chain[-1]), b_outs) if b is not None):
        return 0, iter(())  # the baseline's loop is not its iterations chained: per-iteration shares would be noise
    injected = []  # (relative size of the iteration's own error, t, the baseline's results of t with it added)
    for t in range(min(trips, p_trace.captured)):
        ins_p = body.iteration_inputs(p_ins, p_trace, t)
        outs_p = body.iteration_outputs(p_outs, p_trace, t)
        if ins_p is None or any(o is None for k, o in enumerate(outs_p) if k not in dropped):
            continue
        own = replay_iteration(baseline, body, ins_p)
        outs_p = [own[k] if o is None else o for k, o in enumerate(outs_p)]  # a dropped output adds no error
        if all(_bitwise(a, b) for a, b in zip(outs_p, own)):
            continue  # this iteration adds no error of its own
        with np.errstate(invalid="ignore", over="ignore"):
            moved = sum(float(np.nansum((as_wide(host(a)) - as_wide(host(b))) ** 2)) for a, b in zip(outs_p, own)
                        if host(a).dtype.kind in "fcV")
            size = sum(float(np.nansum(as_wide(host(b)) ** 2)) for b in own if host(b).dtype.kind in "fcV")
        outs = [_add_local(b, p, o) for b, p, o in zip(chain[t + 1] + ys[t], outs_p, own)]
        injected.append((math.sqrt(moved / size) if size > 0 else math.inf, t, outs))
    injected.sort(key=lambda x: (-x[0], -x[1]))  # largest own error first; of equal ones, the cheaper later one

    def carried() -> Any:
        for _, t, outs in injected[:MAX_ITERATIONS]:
            rows, c = [outs[n:]], outs[:n]
            if body.kind == "while":  # the condition decides (an injected carry may end it sooner or later)
                s = t + 1
                while s < 2 * trips + 1 and replay_condition(baseline, body, list(cond_consts) + list(c)):
                    c, s = replay_iteration(baseline, body, step_inputs(s, c))[:n], s + 1
                yield t, [host(x) for x in c]
                continue
            for s in range(t + 1, trips):
                nxt = replay_iteration(baseline, body, step_inputs(s, c))
                rows.append(nxt[n:])
                c = nxt[:n]
            yield t, assemble(t, rows, c)

    return len(injected), carried()


class _Screen:
    """Each divergence's share alone, measured on one compiled replay of the whole program: the program
    with an injection input at each divergence (its own error, added to the op's output), compiled once
    by XLA without optimizations and with every declared rounding kept (``xla_allow_excess_precision``
    off: with it on, XLA drops the bf16 roundings where the errors live), then run once per divergence.
    It is not the baseline's own replay (XLA's fusions, not eager's op by op), so ``blame`` checks it
    exactly on the largest shares it finds; on the ResNet example the two agree to 4 digits, for 0.01 s
    a divergence against 0.3 s replayed op by op."""

    OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True,
               "xla_allow_excess_precision": False}

    def __init__(self, program: FlatProgram, deltas: dict[int, list[Any]], compiled: Any, zero: dict[int, list[Any]],
                 base_out: Sequence[np.ndarray], path_out: Sequence[np.ndarray], differing: Sequence[int],
                 work: Work) -> None:
        from ..pytree import host

        self.program, self.deltas, self.compiled, self.zero = program, deltas, compiled, zero
        self.work, self.units = work, program_units(op.eqn for op in program.ops)  # charged per run
        self.base_out, self.path_out, self.differing = base_out, path_out, differing
        self.plain = [host(x) for x in compiled(zero)]  # the screen's own outputs, nothing injected
        self.shares: dict[int, dict[int, float]] = {}
        self.unscreened: set[int] = set()  # units with an error the screen cannot add (NaN vs number, flipped ints)

    @classmethod
    def build(cls, program: FlatProgram, units: dict[int, Op], replay: _Replay, base_args: dict[int, Any],
              base_out: Sequence[np.ndarray], path_out: Sequence[np.ndarray], differing: Sequence[int],
              work: Work, stop: float) -> _Screen | None:
        """The screen with every unit that it can inject measured alone (largest own error first, until the
        work spent reaches ``stop``); None where the program does not compile this way (the units are then replayed in
        program order and in chunks)."""
        import jax
        import jax.numpy as jnp

        from ..pytree import host

        deltas: dict[int, list[Any]] = {}
        unscreened, size = set(), {}
        for u, op in units.items():
            row: list[Any] = []
            moved = 0.0
            for vid, own in zip(op.outputs, replay._baseline_on_path_inputs(op)):
                p = replay.path.get(vid) if vid is not None else None
                if p is None or own is None or vid is None or not _numeric(program, vid):
                    row.append(None)
                    continue
                p, own = host(p), host(own)
                if p.dtype.kind == "c" or not (p.dtype.kind == "f" or is_float_dtype(p.dtype)):
                    row.append(None)  # an integer or bool flipped: the exact replay takes the path's value
                    unscreened |= {u} if not _bitwise(p, own) else set()
                    continue
                with np.errstate(invalid="ignore", over="ignore"):
                    d = as_wide(p) - as_wide(own)
                if not np.isfinite(d).all() or signed_zero_flips(p, own).any():
                    unscreened.add(u)  # NaN or inf against a number, ±0: the exact replay takes the path's value
                x64 = jax.dtypes.canonicalize_dtype(np.float64) == np.float64  # JAX computes in float64
                wide = np.float64 if p.dtype.itemsize >= 8 and x64 else np.float32
                row.append(np.where(np.isfinite(d), d, 0.0).astype(wide))
                moved = max(moved, float(np.abs(row[-1]).max(initial=0.0)) / (float(np.abs(as_wide(own)).max(initial=0.0)) or 1.0))
            deltas[u], size[u] = row, moved
        args = [base_args[vid] for vid in program.arg_ids]

        def run(eps: dict[int, list[Any]]) -> list[Any]:
            from .program import bind_op

            values: dict[int, Any] = dict(program.consts)
            values.update(zip(program.arg_ids, args))
            for op in program.ops:
                outs = list(bind_op(op, [r.val if isinstance(r, Literal) else values[r] for r in op.inputs]))
                if op.info.index in eps:
                    outs = [o if e is None else (o.astype(e.dtype) + e).astype(o.dtype)
                            for o, e in zip(outs, eps[op.info.index])]
                for vid, out in zip(op.outputs, outs):
                    if vid is not None:
                        values[vid] = out
            return program.outputs(values)

        zero = {u: [None if d is None else jnp.zeros(d.shape, d.dtype) for d in row] for u, row in deltas.items()}
        try:
            compiled = jax.jit(run).lower(zero).compile(compiler_options=cls.OPTIONS)  # type: ignore[arg-type]  # ints too
            screen = cls(program, deltas, compiled, zero, base_out, path_out, differing, work)
        except Exception:  # a primitive XLA cannot compile this way, a value that is no array...
            return None
        screen.unscreened = unscreened
        for u in sorted(deltas, key=lambda u: -size[u]):
            if u in unscreened:
                continue
            got = screen.measure({u}, stop)
            if got is None:
                break
            screen.shares[u] = got
        return screen

    def measure(self, inject: set[int], stop: float) -> dict[int, float] | None:
        """Per differing output, the share the screen reproduces with ``inject``'s errors (raw); None once the
        work spent reaches ``stop``. The screen's own difference from the baseline is taken out: the baseline's outputs
        plus what the injection moved on the screen."""
        import jax.numpy as jnp

        from ..pytree import host

        if self.work.spent >= stop:
            return None
        self.work.charge(self.units)
        eps = dict(self.zero)
        for u in inject:
            eps[u] = [None if d is None else jnp.asarray(d) for d in self.deltas[u]]
        outs = self.compiled(eps)
        got = {}
        for j in self.differing:
            out, plain, base = host(outs[j]), self.plain[j], np.asarray(self.base_out[j])
            if is_float_dtype(base.dtype) or base.dtype.kind == "f":
                with np.errstate(invalid="ignore", over="ignore"):
                    moved = (as_wide(base) + (as_wide(out) - as_wide(plain))).astype(base.dtype)
            else:
                moved = np.where(out != plain, out, base).astype(base.dtype)
            got[j] = reproduced(moved, base, self.path_out[j], clip=False) or 0.0
        return got


def _dtype(program: FlatProgram, vid: int | None) -> Any:
    return program.avals[vid].dtype if vid is not None else np.float32


# Recognised ill-conditioned forms at an amplifying subtraction, and their well-conditioned forms.
def _pattern(program: FlatProgram, op: Op) -> tuple[str, str] | None:
    producers = {vid: o for o in program.ops for vid in o.outputs if vid is not None}

    def made_by(ref: Any, depth: int = 4) -> set[str]:
        seen: set[str] = set()
        todo = [(ref, 0)]
        while todo:
            r, k = todo.pop()
            o = producers.get(r) if not isinstance(r, Literal) else None
            if o is None or k > depth:
                continue
            seen.add(o.info.primitive)
            todo.extend((x, k + 1) for x in o.inputs)
        return seen

    if op.info.primitive == "sub" and len(op.inputs) == 2:
        left, right = made_by(op.inputs[0]), made_by(op.inputs[1])
        squares = {"integer_pow", "square", "mul"}
        if "reduce_sum" in left and left & squares and "reduce_sum" in right and right & squares:
            return ("one-pass variance, mean(x²) − mean(x)²",
                    "compute the variance in two passes, mean((x − mean(x))²) (flax: use_fast_variance=False)")
        if "reduce_sum" in right and not right & squares and "reduce_sum" not in left:
            return ("centering on the mean, x − mean(x), of values far from zero",
                    "center on a sample first, (x − x₀) − mean(x − x₀) with x₀ one element of x, instead of "
                    "x − mean(x)")
    if op.info.primitive == "log" and op.inputs and {"exp", "reduce_sum"} <= made_by(op.inputs[0]):
        return ("log of a sum of exponentials without a shift", "shift by the maximum first: jax.nn.logsumexp")
    return None


def amplifier_of(program: FlatProgram, drift: Sequence[Any], base_values: dict[int, Any], first: int) -> Amplifier | None:
    """The op downstream of the first divergence whose output's relative difference grows most over its
    inputs' (``drift``: the path-vs-baseline difference at each op's output). Measured norm-wise: an op
    such as ``x − mean(x)`` has elements near zero whose relative difference is large while the value as
    a whole barely moves; the op that amplifies the output error moves the whole value."""
    rel = {d.index: d.rel_norm for d in drift}
    best: tuple[float, Op, float, float] | None = None
    for op in program.ops:
        i = op.info.index
        if i <= first or i not in rel:
            continue
        feeding = [rel.get(int(o[2:].split(":")[0]), 0.0) for o in op.info.operands if o.startswith("op")]
        before, after = max(feeding, default=0.0), rel[i]
        if before <= NEGLIGIBLE or not math.isfinite(after):
            continue  # inputs that moved by less than any rounding can (a subnormal's worth): no gain to speak of
        gain = after / before
        if gain >= AMPLIFIES and (best is None or gain > best[0]):
            best = (gain, op, before, after)
    if best is None:
        return None
    gain, op, before, after = best
    condition = None
    refs = [r for r in op.inputs if not isinstance(r, Literal) and r in base_values]
    if op.info.primitive in ("add", "sub") and len(refs) == len(op.inputs):
        a, b = (as_wide(np.asarray(base_values[r])) for r in refs)
        out = a - b if op.info.primitive == "sub" else a + b
        with np.errstate(invalid="ignore", divide="ignore"):
            kappa = (np.abs(a) + np.abs(b)) / np.abs(out)
        kappa = kappa[np.isfinite(kappa)]
        condition = float(kappa.max()) if kappa.size else None
    pattern = _pattern(program, op)
    return Amplifier(op.info.index, op.info.primitive, op.info.user_source or op.info.source or "unknown line",
                     float(gain), float(before), float(after), condition, pattern[0] if pattern else None,
                     pattern[1] if pattern else None)


def blame_localization(program: FlatProgram, loc: Any, path_vals: Any, base_vals: Any, flat_args: Sequence[Any],
                       path_out: Sequence[np.ndarray], base_out: Sequence[np.ndarray],
                       budget: float = BUDGET) -> Any:
    """``loc`` (a ``Localization`` of the case's own program) with its ``blame`` measured: the baseline
    of ``loc`` replays the rest of the program one op at a time (eager stands in for a baseline that
    runs whole programs only). Blame is extra: where it fails, ``loc`` is returned with a note."""
    import dataclasses

    import jax

    from ..paths import DEFAULT_BASELINE
    from ..pytree import host, named_leaves
    from .localizer import _baseline_replay, _is_key, replayable

    if not loc.local:
        return loc
    baseline = loc.baseline if replayable(loc.baseline) else DEFAULT_BASELINE
    method = ("the baseline's own implementation, op by op" if baseline == loc.baseline else
              f"eager's implementation op by op ({loc.baseline} runs whole programs only)")
    args = {vid: a if _is_key(a) else host(a) for vid, a in zip(program.arg_ids, flat_args)}
    base_args, path_args = {**args, **base_vals.args}, {**args, **path_vals.args}
    try:
        names = [n for n, _ in named_leaves(jax.tree_util.tree_unflatten(program.out_tree, range(len(base_out))),
                                            "out")]
    except Exception:  # an output structure that does not unflatten from positions: plain positions
        names = [f"out[{j}]" for j in range(len(base_out))]
    try:
        found = blame(program, loc.local, base_vals.values, path_vals.values, base_args, path_args,
                      lambda op, ins: _baseline_replay(baseline, op, ins, on_host=False), base_out, path_out, names, method,
                      loc.drift, budget, lambda op: _iteration_injections(op, baseline, path_vals, base_vals,
                                                                           program, base_args, path_args))
    except Exception as e:
        return dataclasses.replace(loc, notes=loc.notes + (f"blame could not be measured ({type(e).__name__}: "
                                                           f"{str(e).splitlines()[0] if str(e) else ''})",))
    loc = dataclasses.replace(loc, blame=found)
    return _carriers_with_evidence(program, loc, path_vals, path_args, baseline) if found is not None else loc


def _carriers_with_evidence(program: FlatProgram, loc: Any, path_vals: Any, path_args: dict[int, Any],
                            baseline: str) -> Any:
    """Element evidence (who is right, an example) for the carriers the localizer gave none (it gives
    it to the first local divergences in program order; a carrier can come much later)."""
    import dataclasses

    from ..interpreter import evaluate_eqn
    from ..pytree import host
    from .localizer import _baseline_replay, _elements

    local = list(loc.local)
    for c in loc.blame.carriers[:8]:  # what the noise verdict reads (explain: _rounding_only)
        d = local[c.divergence]
        if d.elements is not None or d.within:
            continue
        op = program.ops[d.op.index]
        try:
            ins = [r.val if isinstance(r, Literal) else path_vals.values.get(r, path_args.get(r, program.consts.get(r)))
                   for r in op.inputs]
            if any(x is None for x in ins):
                continue
            replayed = [host(x) for x in _baseline_replay(baseline, op, ins)]
            k = next(i for i, v in enumerate(op.outputs) if v is not None and v in path_vals.values and
                     not _bitwise(path_vals.values[v], replayed[i]))
            declared = host(evaluate_eqn(op.eqn, ins, mode="declared")[k])
        except Exception:  # evidence is extra
            continue
        evidence = _elements(op, ins, host(path_vals.values[op.outputs[k]]), replayed[k], declared, k)
        if evidence is not None:
            local[c.divergence] = dataclasses.replace(d, elements=evidence)
    return dataclasses.replace(loc, local=tuple(local))
