"""Where two paths part ways: the ops whose own output is wrong given their own inputs.

Each op is replayed on the path's own input values twice: with the baseline's implementation of
that op (eager: the primitive compiled on its own; declared: float64 rounded once; jit/export: the
one op compiled with the path's options) and with the declared reference. Any two paths can be
localized: an op whose inputs agree on both sides and whose output does not is local whatever the
baseline; past it, a baseline that runs only whole programs (a SavedModel, IREE...) cannot replay
one op, and the ops whose inputs differ are compared only (the report says how many). An op whose output differs from the baseline's replay on the same inputs
diverges *locally*; every other difference is inherited from earlier ops. The declared replay says
which side keeps the program's declared semantics. Prefix bisection is deliberately not used:
divergence is not monotone along a program (a later bf16 rounding can erase earlier f32 noise).
"""

from __future__ import annotations

import functools

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.extend.core import Literal

from ..metrics import as_wide, signed_zero_flips, ulp_distance
from ..rounding import is_float_dtype
from .program import FlatProgram, Op, OpInfo, bind_op
from .elements import ElementEvidence, element_evidence
from .semantics import SemanticsMatch, fma_candidates
from .values import OpValues

__all__ = ["Localization", "LocalDivergence", "LoopFrame", "OpDrift", "arg_values", "localize", "output_cone", "replayable",
           "single_op_path", "values_equal"]

# Reductions whose result depends on the order of additions: the only ops where two correct
# implementations may differ, within an error bound that grows with the number of terms.
# Share of the output difference the carriers injected together must reproduce for a mechanism to be read from
# them alone (``Localization.carrying``; ``explain.blame.BLAMED`` judges by them at the same share).
CARRIED = 0.9

_REDUCTIONS = {"reduce_sum", "dot_general", "conv_general_dilated", "cumsum", "reduce_window_sum"}


@dataclass(frozen=True)
class LoopFrame:
    """One level of control flow around an op: the loop (or branch) op, and which iteration of it."""

    op: OpInfo  # the scan / while / cond op, in its own program
    kind: str  # "scan", "while" or "cond"
    iteration: int | None = None  # execution step (0-based) of a scan or while
    trips: int | None = None  # iterations the loop ran on the path
    branch: int | None = None  # the branch a cond took
    # Per iteration, the largest difference (ULP) between the path's and the baseline's carry
    # entering it: how the difference grows layer by layer through an nn.scan stack.
    carry_ulp: tuple[int, ...] = ()
    how: str = ""  # how the iteration was found ("replayed iteration 3 with eager's implementation")
    module: str = ""  # the loop's module path, e.g. "Stack/layers" for an nn.scan named "layers"

    def describe(self) -> str:
        where = self.op.user_source or self.op.source or "unknown line"
        stack = self.module or self.op.name_stack
        name = stack.rsplit("/", 1)[-1] if stack else ""
        head = f"{name} ({self.kind} at {where})" if name else f"{self.kind} at {where}"
        if self.kind == "cond":
            return f"{head}, branch {self.branch}"
        of = f" of {self.trips}" if self.trips is not None else ""
        return f"{head}, iteration {self.iteration}{of}"


@dataclass(frozen=True)
class LocalDivergence:
    op: OpInfo
    n_differ: int  # elements where the path's output differs from the baseline's replay
    size: int
    max_ulp: int  # between the path's output and the baseline's replay, in the output dtype
    max_abs: float
    # Who keeps the declared semantics on these inputs: "baseline", "path", "both" or "neither"
    # ("unknown" where the declared reference cannot evaluate the op).
    declared_side: str
    # For reductions: the analytic bound on the difference of two summation orders, and whether
    # every difference is within it ("expected rounding noise").
    noise_bound: float | None = None
    within_noise_bound: bool = False
    # What the values themselves show about the mechanism, when they show something.
    detail: str | None = None
    # For a widening convert fed an unrounded value: the op whose narrow result was never rounded, and
    # the side that read it unrounded ("path", or "baseline" where the baseline keeps excess precision:
    # jit as the baseline of eager).
    unrounded: OpInfo | None = None
    unrounded_side: str = "path"  # or "baseline"
    # The loops and branches around the op, outermost first (empty at the top level of the case):
    # ``op.index`` then counts within the innermost body.
    within: tuple[LoopFrame, ...] = ()
    # Candidate semantics run on the op's own captured inputs (``localize.semantics``).
    semantics: tuple[SemanticsMatch, ...] = ()
    # Which elements differ, what their inputs share, and each side's distance from the correctly
    # rounded result of the op on the same inputs (``localize.elements``).
    elements: ElementEvidence | None = None
    # How the path's runtime really computes the op where it is not an op of its own there, read from its
    # artifact (set by the explainer): the kernel's op code ("AVERAGE_POOL_2D") and the ops fused into it
    # with this one ("#2 reduce_window_sum"). Its per-op value is then the kernel's, and says nothing of
    # the op's own rounding.
    kernel: str | None = None
    fused: tuple[str, ...] = ()

    def elements_said(self, path: str, baseline: str, variant: bool = False) -> str | None:
        """What the differing elements show, as a sentence (``ElementEvidence.describe``); for an op the
        runtime fuses into a kernel, that kernel instead. None where the elements show nothing to say."""
        if self.kernel is not None:
            return (f"{path} computes it with {' and '.join(self.fused)} as one {self.kernel} kernel of its own "
                    "model: the op has no rounding of its own there, so the kernel is judged as a whole (the "
                    "cause says how)")
        e = self.elements
        if e is None or not (e.classes or e.wrong_side()):
            return None
        return e.describe(path, baseline, self.within_noise_bound, self.unrounded_by(path, baseline), variant)

    def unrounded_by(self, path: str, baseline: str) -> str | None:
        """The side (its path name) whose op read its narrow input unrounded, or None."""
        if self.unrounded is None:
            return None
        return baseline if self.unrounded_side == "baseline" else path

    def kept_by(self, path: str, baseline: str) -> str:
        """Who keeps the declared semantics, as the divergence tables say it ("fused in AVERAGE_POOL_2D" where
        the runtime has no op of its own to keep them)."""
        if self.kernel is not None:
            return f"fused in {self.kernel}"
        return {"path": path, "baseline": baseline, "both": f"both ({path}, {baseline})"}.get(
            self.declared_side, self.declared_side)

    @property
    def top_index(self) -> int:
        """The op's index in the case's own program (its outermost loop's, inside a loop)."""
        return self.within[0].op.index if self.within else self.op.index

    def where(self) -> str:
        """"layers (scan at model.py:40), iteration 0 of 8: op #12 add" style location."""
        frames = ": ".join(f.describe() for f in self.within)
        return (frames + ": " if frames else "") + f"op #{self.op.index} {self.op.primitive}"


@dataclass(frozen=True)
class OpDrift:
    """Difference between the path and the baseline at one op's output (inherited + local)."""

    index: int
    name_stack: str
    max_abs: float
    max_rel: float
    max_ulp: int
    # ‖path − baseline‖ / ‖baseline‖ over the finite elements: how much the whole value moved, which a
    # few elements near zero (a large relative difference, a small absolute one) do not dominate
    rel_norm: float = 0.0


@dataclass(frozen=True)
class Localization:
    path: str
    baseline: str
    ops: int  # ops in the flattened program
    local: tuple[LocalDivergence, ...]  # in program order
    drift: tuple[OpDrift, ...]  # per op with a float output, in program order
    notes: tuple[str, ...] = ()
    # When observing every intermediate removes the divergence (the compiler fuses differently),
    # the ops that feed the differing outputs: the divergence lives inside their fusion.
    perturbed: bool = False
    cone: tuple[OpInfo, ...] = ()
    # Every op of the flattened program (with its operands): the graph the drift is drawn on.
    program: tuple[OpInfo, ...] = ()
    # Ops whose own output could not be judged (inputs not observable, or a whole-program baseline
    # could not replay them on the path's inputs): a divergence among them would go unseen.
    unchecked: int = 0
    # How the output difference divides among the local divergences (``localize.blame``); None where it
    # was not measured (no per-op values, or nothing to inject).
    blame: Any = None

    @property
    def first(self) -> LocalDivergence | None:
        """The first local divergence in program order that is not reduction noise."""
        real = [d for d in self.local if not d.within_noise_bound]
        return real[0] if real else (self.local[0] if self.local else None)

    @property
    def lead(self) -> LocalDivergence | None:
        """The divergence that carries most of the output difference (``blame``); where blame was not
        measured or no single divergence carries it, the first one in program order."""
        carrier = self.blame.lead if self.blame is not None else None
        return self.local[carrier.divergence] if carrier is not None else self.first

    @property
    def ranked(self) -> list[LocalDivergence]:
        """The local divergences that are not reduction noise, those that carry the output difference first
        (largest share first), then the others in program order: the order in which causes read them."""
        carriers = [self.local[c.divergence] for c in self.blame.carriers] if self.blame is not None else []
        rest = [d for d in self.local if not d.within_noise_bound and all(d is not c for c in carriers)]
        return carriers + rest

    @property
    def carrying(self) -> list[LocalDivergence]:
        """The divergences a mechanism is read from: those that carry the output difference, where blame measured
        that together they reproduce most of it (another op's fact, a subnormal flushed in an exp whose terms the
        sum then drops, is no mechanism of this difference); else every one ``ranked`` holds."""
        b = self.blame
        if b is not None and b.carriers and b.together >= CARRIED:
            return [self.local[c.divergence] for c in b.carriers]
        return self.ranked


def _read(program: FlatProgram, ref: Any, values: dict[int, Any], args: dict[int, Any]) -> Any:
    if isinstance(ref, Literal):
        return ref.val
    if ref in values:
        return values[ref]
    if ref in args:
        return args[ref]
    return program.consts.get(ref)


def _unit_roundoff(dtype: np.dtype) -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).eps) / 2


def _contraction_length(op: Op) -> int:
    eqn, p = op.eqn, op.eqn.params
    if eqn.primitive.name == "reduce_sum":
        shape = eqn.invars[0].aval.shape
        return int(np.prod([shape[a] for a in p["axes"]])) if p["axes"] else 1
    if eqn.primitive.name == "dot_general":
        (lhs_contract, _), _ = p["dimension_numbers"]
        shape = eqn.invars[0].aval.shape
        return int(np.prod([shape[a] for a in lhs_contract])) if lhs_contract else 1
    if eqn.primitive.name == "conv_general_dilated":
        rhs = eqn.invars[1].aval.shape
        spec = p["dimension_numbers"].rhs_spec  # (out feature, in feature, spatial...)
        return int(rhs[spec[1]] * np.prod([rhs[d] for d in spec[2:]]))
    if eqn.primitive.name == "cumsum":
        return int(eqn.invars[0].aval.shape[p["axis"]])
    if eqn.primitive.name == "reduce_window_sum":
        return int(np.prod(p["window_dimensions"]))
    return 1


def _noise_bound(op: Op, ins: list[Any], path_out: np.ndarray, base_out: np.ndarray) -> np.ndarray | None:
    """Elementwise bound on |path - baseline| for two summation orders of the same terms.

    Each order errs from the exact sum by at most gamma_n * sum|terms| (Higham, Accuracy and
    Stability of Numerical Algorithms, 2nd ed., Sec. 4.2; gamma_n = n*u / (1 - n*u)), with u the unit
    roundoff of the accumulation (at least float32: XLA accumulates narrow floats in float32), and
    each result is then rounded to the output dtype (half an ulp each).
    """
    from ..interpreter import evaluate_eqn

    dtype = np.dtype(op.eqn.outvars[0].aval.dtype)
    if not is_float_dtype(dtype):
        return None
    n = _contraction_length(op)
    u = _unit_roundoff(np.dtype(np.float32) if dtype.itemsize < 4 else dtype)
    gamma = n * u / (1 - n * u) if n * u < 1 else math.inf
    abs_ins = [np.abs(np.asarray(x)) if is_float_dtype(np.asarray(x).dtype) else x for x in ins]
    abs_sum = np.abs(np.asarray(evaluate_eqn(op.eqn, abs_ins, mode="f64")[0], dtype=np.float64))
    out_ulp = _unit_roundoff(dtype) * 2 * np.maximum(np.abs(path_out.astype(np.float64)),
                                                     np.abs(base_out.astype(np.float64)))
    # below the normal range each add errs by up to half the smallest subnormal, whatever the relative bound says
    import ml_dtypes

    acc = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    tiny = 2 * n * float(ml_dtypes.finfo(acc).smallest_subnormal)
    return 2 * gamma * abs_sum + out_ulp + tiny


def replayable(spec: Any) -> bool:
    """Can the path (a ``Path`` or its spec) run a single op on given inputs (``Path.replayable``): op by op
    (eager), the interpreter, or XLA compiling the single op with the path's own compile options? The others
    (a SavedModel served by TensorFlow, IREE, ONNX, TFLite) run whole programs only: past the first divergence
    their ops can be compared, not replayed."""
    from ..paths import as_path

    return as_path(spec).replayable


def single_op_path(baseline: Any) -> Any:
    """The path that compiles one op (or one loop iteration) the way ``baseline`` compiles the whole
    program: ``jit`` with its compile options (``export`` compiles as jit)."""
    from ..paths import xla_twin

    return xla_twin(baseline)


def _baseline_replay(baseline: Any, op: Op, ins: list[Any], on_host: bool = True) -> list[Any]:
    """``op`` on ``ins`` as ``baseline`` (a ``Path`` or its spec) implements it on its own (``replayable``);
    ``on_host`` False: eager's and jit's results as the arrays they are (a replay that feeds them to the next op
    saves the copies both ways)."""
    from ..interpreter import evaluate_eqn
    from ..pytree import host

    path = _path(baseline) if isinstance(baseline, str) else baseline
    keep = host if on_host else (lambda x: x)
    as_jax = [jax.numpy.asarray(x) if isinstance(x, np.ndarray) else x for x in ins]
    if path.has("op_by_op"):  # control flow as disable_jit runs it: Python loops over the body, op by op
        from ..paths.base import jax_config
        from .loops.capture import run_op

        with jax_config(path.options), jax.disable_jit():
            return [keep(x) for x in run_op(op, as_jax, bind_op)]
    if path.has("compiled_in_process"):  # the one op, compiled with the path's options
        return [keep(x) for x in single_op_path(path).run(lambda *xs: list(bind_op(op, list(xs))), tuple(as_jax))]
    return [host(x) for x in evaluate_eqn(op.eqn, ins, mode=path.mode)]


@functools.lru_cache(maxsize=32)
def _path(spec: str) -> Any:
    """The path a spec names, made once: a replay asks it once per op."""
    from ..paths import make_path

    return make_path(spec)


def _compare(a: np.ndarray, b: np.ndarray) -> tuple[int, int, float]:
    """(elements that differ, max ULP, max abs); a zero of the other sign differs (0 ULP, 0 apart): it
    is another value to atan2, 1/x or copysign, and blame measures whether it matters."""
    ulps = ulp_distance(a, b)
    differ = (ulps != 0) | signed_zero_flips(a, b)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(as_wide(a) - as_wide(b)) if a.dtype.kind != "b" else differ * 1.0
    diff = np.where(differ, diff, 0.0)
    worst = float(np.where(np.isnan(diff), np.inf, diff).max(initial=0.0))  # inf stays inf (not the largest float)
    return int(differ.sum()), int(np.where(ulps < 0, 0, ulps).max(initial=0)), worst


def localize(program: FlatProgram, path: OpValues, base: OpValues, flat_args: Sequence[Any],
             baseline: str) -> Localization:
    """Classify every op of ``program`` as locally diverging or not, for ``path`` against ``base``."""
    from ..interpreter import evaluate_eqn
    from ..pytree import host

    can_replay = replayable(baseline)
    compared_only = 0
    # Each side's own inputs: the case's arguments, or (in a loop body) that side's iteration inputs.
    # PRNG keys stay keys (an op that takes one needs the key, not its data).
    args = {vid: a if _is_key(a) else host(a) for vid, a in zip(program.arg_ids, flat_args)}
    base_args = {**args, **base.args}
    args.update(path.args)
    producers = {vid: o for o in program.ops for vid in o.outputs if vid is not None}
    local: list[LocalDivergence] = []
    drift: list[OpDrift] = []
    skipped = 0
    beyond = differ_beyond = 0  # ops whose outputs are beyond a capture budget: compared by digest only
    for op in program.ops:
        outs = [vid for vid in op.outputs if vid is not None and vid in path.values and vid in base.values]
        if not outs:
            digested = [vid for vid in op.outputs if vid is not None and vid in path.digests and
                        (vid in base.digests or vid in base.values)]
            if digested:
                beyond += 1
                differ_beyond += any(path.digests[v] != base.digests.get(v) for v in digested)
            continue
        p_outs = [path.values[v] for v in outs]
        b_outs = [base.values[v] for v in outs]
        _record_drift(op, p_outs, b_outs, drift)
        p_ins = [_read(program, r, path.values, args) for r in op.inputs]
        b_ins = [_read(program, r, base.values, base_args) for r in op.inputs]
        if any(x is None for x in p_ins):
            skipped += 1
            continue
        same_inputs = all(bitwise_equal(a, b) for a, b in zip(p_ins, b_ins))
        positions = [i for i, v in enumerate(op.outputs) if v in outs]  # of the recorded outputs
        if same_inputs:
            replay = b_outs  # the baseline already ran this op on exactly these inputs
        elif not can_replay:  # inputs differ and the baseline cannot run one op: inherited, as far as we know
            compared_only += 1
            continue
        else:
            replay_all = _baseline_replay(baseline, op, p_ins)
            replay = [replay_all[i] for i in positions]
        worst = None
        for k, (p_out, r_out) in enumerate(zip(p_outs, replay)):
            n, ulp, mx = _compare(p_out, r_out)
            if n and (worst is None or ulp > worst[1]):
                worst = (n, ulp, mx, k)
        if worst is None:
            continue
        n, ulp, mx, k = worst
        p_out, r_out = p_outs[k], replay[k]
        d_out = None
        try:
            d_out = host(evaluate_eqn(op.eqn, p_ins, mode="declared")[positions[k]])
            side = {(True, True): "both", (True, False): "path", (False, True): "baseline",
                    (False, False): "neither"}[(values_equal(p_out, d_out), values_equal(r_out, d_out))]
        except Exception:  # the reference cannot run this op (e.g. an op the interpreter has no rule for)
            side = "unknown"
        bound, within, b = None, False, None
        if op.info.primitive in _REDUCTIONS:
            b = _noise_bound(op, p_ins, p_out, r_out)
            if b is not None:
                pf, rf = p_out.astype(np.float64), r_out.astype(np.float64)
                with np.errstate(invalid="ignore"):
                    diff = np.abs(pf - rf)
                # the same inf (or NaN) on both sides agrees: inf - inf is NaN, not a difference
                same = (pf == rf) | (np.isnan(pf) & np.isnan(rf))
                within = bool(np.all((diff <= b) | same))
                bound = float(np.max(b)) if b.size else 0.0
        elements = None
        if len(local) < MAX_EVIDENCE or (len(local) < MAX_CHEAP_EVIDENCE and _elementwise_shaped(op, p_ins, p_out)):
            # one summation order's bound is half that of two orders' difference
            elements = _elements(op, p_ins, p_out, r_out, d_out, positions[k], None if b is None else b / 2)
        producer = producers.get(op.inputs[0]) if op.inputs and not isinstance(op.inputs[0], Literal) else None
        detail, unrounded_side = _widening_detail(op, p_out, producer), "path"
        if detail is None:  # the baseline kept the excess precision (jit as the baseline of eager)
            detail, unrounded_side = _widening_detail(op, r_out, producer, baseline), "baseline"
        def producer_of(ref: Any) -> tuple[Op, list[Any]] | None:
            made = producers.get(ref) if not isinstance(ref, Literal) else None
            return None if made is None else (made, [_read(program, r, path.values, args) for r in made.inputs])

        semantics = fma_candidates(op, p_ins, producer_of, p_out, r_out)
        local.append(LocalDivergence(op.info, n, int(p_out.size), ulp, mx, side, bound, within, detail,
                                     producer.info if detail and producer else None,
                                     unrounded_side=unrounded_side if detail else "path", semantics=semantics,
                                     elements=elements))
    notes: tuple[str, ...] = (f"{skipped} ops could not be replayed (inputs not observable)",) if skipped else ()
    if beyond:
        notes += (f"{beyond} ops beyond the capture budget (--max-capture-mb) were kept as digests: compared bit for "
                  f"bit, not replayed ({differ_beyond} differ from {baseline}); raise the budget to check them",)
    if compared_only:
        notes += (f"{compared_only} op{'s' if compared_only > 1 else ''} whose inputs already differed could only "
                  "be compared, not replayed: "
                  f"{baseline} runs whole programs, not single ops; a local divergence among them would show "
                  "only where their inputs agree",)
    return Localization(path.path, baseline, len(program.ops), tuple(local), tuple(drift), notes,
                        program=tuple(op.info for op in program.ops), unchecked=skipped + compared_only + beyond)


MAX_EVIDENCE = 16  # local divergences (in program order) that get element evidence
# ... and those that get it where it is cheap (inputs shaped as the output: an elementwise op such as rsqrt,
# whose evidence the noise verdict reads: both sides within a math library's few ULP)
MAX_CHEAP_EVIDENCE = 256


def _elementwise_shaped(op: Op, ins: Sequence[Any], out: Any) -> bool:
    shape = np.shape(out)
    return all(np.shape(x) in (shape, ()) for x in ins)


def _elements(op: Op, ins: list[Any], p_out: np.ndarray, r_out: np.ndarray, correct: np.ndarray | None,
              position: int, sum_bound: np.ndarray | None = None) -> ElementEvidence | None:
    """Element evidence for one local divergence; None where it cannot be computed (evidence is extra).
    ``sum_bound``: for a sum, the bound on one summation order's error per element."""
    from ..interpreter import evaluate_eqn
    from ..pytree import host

    try:
        exact = host(evaluate_eqn(op.eqn, ins, mode="f64")[position])
    except Exception:
        exact = None
    try:
        return element_evidence(op, ins, p_out, r_out, correct, exact, position, sum_bound)
    except Exception:
        return None


def _widening_detail(op: Op, p_out: np.ndarray, producer: Op | None, side: str | None = None) -> str | None:
    """A widening convert whose output a narrow float cannot hold: its input was never rounded.
    ``side``: the baseline's name where ``p_out`` is the baseline's output (said in the sentence)."""
    from ..rounding import round_to_dtype

    if op.info.primitive != "convert_element_type":
        return None
    src = np.dtype(op.eqn.invars[0].aval.dtype)
    if not (is_float_dtype(src) and is_float_dtype(p_out.dtype) and src.itemsize < p_out.dtype.itemsize):
        return None
    lost = ulp_distance(round_to_dtype(p_out.astype(np.float64), src).astype(p_out.dtype), p_out) != 0
    if not lost.any():
        return None
    what = f"the {src} result of #{producer.info.index} {producer.info.primitive}" if producer else f"its {src} input"
    where = producer.info.user_source or producer.info.source if producer else None
    return (f"{f'in {side}, ' if side else ''}{int(lost.sum())} of its {p_out.size} {p_out.dtype} outputs are not "
            f"{src} values: {what}"
            f"{f' ({where})' if where else ''} was never rounded to {src}; it arrived in {p_out.dtype} precision")


def output_cone(program: FlatProgram, out_positions: Sequence[int], limit: int = 12) -> tuple[OpInfo, ...]:
    """The ops that compute the given outputs (a backward slice), the last ``limit`` in program order."""
    producers = {vid: o for o in program.ops for vid in o.outputs if vid is not None}
    todo = [vid for i in out_positions if not isinstance(vid := program.out_ids[i], Literal)]
    seen: dict[int, Op] = {}
    while todo:
        op = producers.get(todo.pop())
        if op is None or op.info.index in seen:
            continue
        seen[op.info.index] = op
        todo.extend(r for r in op.inputs if not isinstance(r, Literal))
    return tuple(seen[i].info for i in sorted(seen))[-limit:]


def arg_values(program: FlatProgram, flat_args: Sequence[Any]) -> dict[int, Any]:
    """The program's arguments by value id, as host arrays; PRNG keys stay keys (an op that takes one needs the
    key, and a key has no numpy form)."""
    return {vid: a if _is_key(a) else np.asarray(a) for vid, a in zip(program.arg_ids, flat_args)}


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def bitwise_equal(a: Any, b: Any) -> bool:
    """The same bits, shape and dtype (host copies of arrays or device arrays alike)."""
    from ..pytree import host

    a, b = host(a), host(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def values_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """The same values: 0 ULP apart and zeros of the same sign (NaNs of any payload agree)."""
    return (a.shape == b.shape and a.dtype == b.dtype and bool(np.all(ulp_distance(a, b) == 0))
            and not signed_zero_flips(a, b).any())


def _record_drift(op: Op, p_outs: list[np.ndarray], b_outs: list[np.ndarray], drift: list[OpDrift]) -> None:
    floats = [(p, b) for p, b in zip(p_outs, b_outs) if (is_float_dtype(p.dtype) or p.dtype.kind == "c") and p.size]
    if not floats:
        return
    max_abs = max_rel = rel_norm = 0.0
    max_ulp = 0
    for p, b in floats:
        ulps = ulp_distance(p, b)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            d = np.abs(as_wide(p) - as_wide(b))
            d = np.where(ulps == 0, 0.0, d)
            rel = d / np.fmax(np.abs(as_wide(b)), 1e-30)
            # the larger side's size: a value the baseline computes as 0 (a variance that cancels) and the path
            # as 131072 has moved by all of itself, not by nothing
            size = np.fmax(np.abs(as_wide(b)), np.where(ulps == 0, 0.0, np.abs(as_wide(p))))
            finite = np.isfinite(d) & np.isfinite(size)
            scale = float(np.sqrt(np.sum(np.where(finite, size, 0.0) ** 2)))
            moved = float(np.sqrt(np.sum(np.where(finite, d, 0.0) ** 2)))
        # NaN against a number counts as infinitely far (np.nan_to_num would also make inf the largest float)
        max_abs = max(max_abs, float(np.where(np.isnan(d), np.inf, d).max()))
        max_rel = max(max_rel, float(np.where(np.isnan(rel), np.inf, rel).max()))
        max_ulp = max(max_ulp, int(np.where(ulps < 0, 0, ulps).max()))
        if scale > 0:
            rel_norm = max(rel_norm, moved / scale)
    drift.append(OpDrift(op.info.index, op.info.name_stack, max_abs, max_rel, max_ulp, rel_norm))
