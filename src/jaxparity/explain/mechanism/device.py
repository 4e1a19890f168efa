"""``device-arithmetic``: where one side computes on an accelerator and the other on the host, the
accelerator's own arithmetic, decided on the carrying op's captured inputs:

- a float32 dot product or convolution: the op alone on the accelerator's side, on those inputs, against
  host emulations of its matmul unit (each input split into 1, 2 or 3 bfloat16 parts, the products of
  1, 3 or 6 pairs of parts summed exactly: DEFAULT, HIGH, HIGHEST on a TPU) and the exact result; the
  emulation it is nearest to, by far, is how the device computed it;
- an elementary function (tanh, log, exp...): each side's distance from the correctly rounded result on
  the op's inputs; the accelerator's far beyond the host's is its own approximation;
- any other op (a division, a reduction, a comparison): alone on each device on the same captured inputs,
  each against the correctly rounded result; the same bits on both clear the device's arithmetic.

The fix is set where the device computes: the matmul precision of the accelerator's side, re-run there
against the other side; a function computed another way is the fix search's (formulations re-run on both).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...paths import Path
from ..causes import Cause
from ..context import Context
from ..verdicts import CauseVerdict, Fix
from .captured import op_inputs
from .op_rules import MATH

__all__ = ["PASSES", "device_arithmetic", "emulated_passes"]

PASSES = {"DEFAULT": 1, "HIGH": 3, "HIGHEST": 6}  # bf16 products a float32 product is made of, per precision
NEARER = 0.1  # the device's values are reproduced when an emulation is this much nearer to them than exact
_MATMUL = ("dot_general", "conv_general_dilated")
_FAR = 16  # an accelerator's function this many ULP or more from the correctly rounded result...
_TIMES = 4  # ...and this many times the host's distance: the device's own approximation
_ALLOWED = 4  # a device's op this many ULP or fewer from the correctly rounded result: rounding (``explain.noise``)


def _split(x: np.ndarray, parts: int) -> list[np.ndarray]:
    """``x`` (float32) as ``parts`` bfloat16 values whose sum approximates it, largest first."""
    import ml_dtypes

    out, rest = [], np.asarray(x, np.float32)
    for _ in range(parts):
        hi = rest.astype(ml_dtypes.bfloat16).astype(np.float32)
        out.append(hi)
        rest = rest - hi
    return out


def emulated_passes(op: Any, ins: list[np.ndarray], passes: int) -> np.ndarray:
    """The op (a dot product or convolution of float32 inputs) as a matmul unit of bfloat16 products
    computes it with ``passes`` products of parts (1, 3 or 6), each product exact and their sum in float64."""
    from ...interpreter import evaluate_eqn

    lhs, rhs = (_split(x, 3) for x in ins[:2])
    pairs = [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (2, 0)][:passes]
    total = None
    for i, j in pairs:
        term = np.asarray(evaluate_eqn(op.eqn, [lhs[i], rhs[j], *ins[2:]], mode="f64")[0], np.float64)
        total = term if total is None else total + term
    return np.asarray(total)


def _alone(path: Path, op: Any, ins: list[np.ndarray]) -> np.ndarray:
    """The op alone, on ``ins``, computed where and how ``path`` computes it (its device, its JAX options)."""
    import jax

    from ...paths.base import jax_config
    from ...paths.devices import on_device

    from ...localize.program import bind_op

    def one(*xs: Any) -> Any:
        return bind_op(op, list(xs))

    with jax_config(path.options), on_device(path.options):
        return np.asarray(jax.jit(one)(*ins))


def _on_device(ctx: Context, acc: Path, op: Any, ins: list[np.ndarray]) -> np.ndarray:
    """The op's values as the accelerator computed them on ``ins``: the path's own captured values where the
    path is that side (``ins`` are its inputs: a bundle captured on the device, explained on a host), else
    the op run alone there."""
    vid = op.outputs[0] if op.outputs else None
    if acc is ctx.path and ctx.path_vals is not None and vid in ctx.path_vals.values:
        return np.asarray(ctx.path_vals.values[vid])
    return _alone(acc, op, ins)


def _sides(ctx: Context) -> tuple[Path, Path] | None:
    """(the side on an accelerator, the side on the host), or None where both compute on one device."""
    dev_path, dev_base = ctx.path.device(), ctx.baseline.device()
    if dev_path == dev_base or "cpu" not in (dev_path, dev_base):
        return None
    return (ctx.path, ctx.baseline) if dev_base == "cpu" else (ctx.baseline, ctx.path)


def device_arithmetic(cause: Cause, ctx: Context) -> CauseVerdict:
    """Each op that carries the output difference (blame's carriers, the lead op without them), on its captured
    inputs: the first the device computes its own way decides; where every one the device computes within what
    correct implementations may differ by, that is rounding (status "noise"), never wrong code."""
    sides = _sides(ctx)
    if sides is None:
        return CauseVerdict(cause.id, cause.title, "not run", "the devices of the two sides",
                            f"{ctx.path} and {ctx.baseline} compute on the same kind of device")
    acc, host = sides
    loc = ctx.localization
    if loc is None or loc.lead is None:
        return CauseVerdict(cause.id, cause.title, "not run", "the carrying op's captured inputs",
                            "no per-op view of this path: no op to check")
    carriers = [loc.local[c.divergence] for c in loc.blame.carriers[:_CARRIERS]] if loc.blame is not None else []
    found = [_one(cause, ctx, d, acc, host) for d in (carriers or [loc.lead])]
    for status in ("confirmed", "noise", "refuted"):
        if any(v.status == status for v in found):
            return next(v for v in found if v.status == status)
    return found[0]


_CARRIERS = 3  # carriers checked, largest share first


def _one(cause: Cause, ctx: Context, d: Any, acc: Path, host: Path) -> CauseVerdict:
    where = f"#{d.op.index} {d.op.primitive} ({d.op.user_source or d.op.source or 'unknown line'})"
    if d.op.primitive in MATH and d.elements is not None:
        return _function(cause, ctx, d, acc, host, where)
    if d.op.primitive in _MATMUL and ctx.path_vals is not None and not d.within:
        verdict = _matmul(cause, ctx, d, acc, host, where)
        if verdict.status != "not run":
            return verdict
    if ctx.path_vals is None:
        return CauseVerdict(cause.id, cause.title, "not run", f"{where} on its captured inputs",
                            "no per-op values of this path: no inputs to run the op on")
    return _any_op(cause, ctx, d, acc, host, where)


def _function(cause: Cause, ctx: Context, d: Any, acc: Path, host: Path, where: str) -> CauseVerdict:
    ev = d.elements
    if ev.path_ulp is None or ev.baseline_ulp is None:
        return CauseVerdict(cause.id, cause.title, "not run", f"{where} on its captured inputs",
                            "no correctly rounded reference for it")
    mine, theirs = (ev.path_ulp, ev.baseline_ulp) if acc is ctx.path else (ev.baseline_ulp, ev.path_ulp)
    what = f"each side of {where} against the correctly rounded result on the op's captured inputs"
    seen = (f"{acc} (on {acc.device()}) is up to {mine:,} ULP from it, {host} (on the host) up to {theirs:,}")
    if mine >= _FAR and mine >= _TIMES * max(theirs, 1):
        return CauseVerdict(cause.id, cause.title, "confirmed", what,
                            f"{seen}: {acc.device()}'s {d.op.primitive} is an approximation of its own, the host's "
                            "is accurate", f"compute {d.op.primitive} another way at that line where it matters "
                            "(the fix search tries formulations on both devices), or compare with a tolerance of "
                            "the device's accuracy")
    if mine <= _ALLOWED and mine > theirs:
        return CauseVerdict(cause.id, cause.title, "noise", what,
                            f"{seen}: within the {_ALLOWED} ULP correct implementations may differ by (rounding, not a "
                            "departure)")
    return CauseVerdict(cause.id, cause.title, "refuted", what, f"{seen}: not the device's own approximation")


def _any_op(cause: Cause, ctx: Context, d: Any, acc: Path, host: Path, where: str) -> CauseVerdict:
    """Any op (a division, a reduction, a comparison, a function without element evidence): alone on each
    device on the same captured inputs, each against the correctly rounded result. The same values on both: the
    op's arithmetic is no device's own; the accelerator's far beyond the host's: it computes the op its own way."""
    from ...metrics import ulp_distance
    from ...rounding import is_float_dtype, round_to_dtype

    op = ctx.program.ops[d.op.index]
    what = f"{where} alone on {acc.device()} and on the host, on its captured inputs, against the exact result"
    try:
        ins = [np.asarray(x) for x in op_inputs(ctx, d)]
        mine, theirs = np.asarray(_on_device(ctx, acc, op, ins)), np.asarray(_alone(host, op, ins))
        exact = np.asarray(_exact(op, ins))
    except Exception as e:  # noqa: BLE001 - an op that cannot run alone: said, never guessed
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the op could not run alone: "
                            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if mine.shape != theirs.shape or mine.dtype != theirs.dtype:
        return CauseVerdict(cause.id, cause.title, "not run", what, "the two devices' results have other shapes")
    if mine.tobytes() == theirs.tobytes():
        return CauseVerdict(cause.id, cause.title, "refuted", what,
                            f"the op alone gives the same values on {acc.device()} and on the host, bit for bit: "
                            "the difference is not this op's arithmetic on the device (it comes from how the "
                            "program around it is compiled or fused)")
    if not is_float_dtype(mine.dtype):
        n = int(np.sum(mine != theirs))
        return CauseVerdict(cause.id, cause.title, "confirmed", what,
                            f"the op alone gives other values on {acc.device()} than on the host in {n} of "
                            f"{mine.size} elements, on the same inputs: {acc.device()} computes "
                            f"{d.op.primitive} its own way", "compare with a tolerance of the device's arithmetic, "
                            "or compute the op where the result is kept")
    rounded = round_to_dtype(exact.astype(np.float64), mine.dtype)
    far, near = (int(np.max(ulp_distance(x, rounded), initial=0)) for x in (mine, theirs))
    seen = f"{acc} (on {acc.device()}) is up to {far:,} ULP from the correctly rounded result, {host} (on the host) {near:,}"
    if far > _ALLOWED and far >= _TIMES * max(near, 1):
        return CauseVerdict(cause.id, cause.title, "confirmed", what,
                            f"{seen}: {acc.device()} computes {d.op.primitive} its own way, the host correctly",
                            f"compute {d.op.primitive} another way at that line where it matters (the fix search "
                            "tries formulations on both devices), or compare with a tolerance of the device's accuracy")
    if far <= _ALLOWED and far > near:
        return CauseVerdict(cause.id, cause.title, "noise", what,
                            f"{seen}: {acc.device()} rounds {d.op.primitive} otherwise, within the {_ALLOWED} ULP "
                            "correct implementations may differ by (rounding, not a departure)")
    return CauseVerdict(cause.id, cause.title, "refuted", what, f"{seen}: both round alike; not the device's own "
                        "arithmetic")


def _matmul(cause: Cause, ctx: Context, d: Any, acc: Path, host: Path, where: str) -> CauseVerdict:
    op = ctx.program.ops[d.op.index]
    ins = [np.asarray(x) for x in op_inputs(ctx, d)]
    if len(ins) < 2 or any(x.dtype != np.float32 for x in ins[:2]):
        return CauseVerdict(cause.id, cause.title, "not run", f"{where} on its captured inputs",
                            "its inputs are not float32: no reduced precision to find")
    got = _on_device(ctx, acc, op, ins).astype(np.float64)
    exact = np.asarray(_exact(op, ins), np.float64)
    far = float(np.abs(got - exact).max())
    gaps = {name: float(np.abs(got - emulated_passes(op, ins, k)).max()) for name, k in PASSES.items()}
    name = min(gaps, key=lambda k: gaps[k])
    what = (f"{where} alone on {acc.device()} on its captured inputs, against host emulations of 1, 3 and 6 "
            "bfloat16 passes and the exact result")
    if far == 0 or gaps[name] > NEARER * far:
        return CauseVerdict(cause.id, cause.title, "refuted", what,
                            f"{acc.device()} computes it within {far:.3g} of the exact result; no emulation of "
                            f"bfloat16 passes is much nearer (nearest: {PASSES[name]} passes, {gaps[name]:.3g})")
    host_far = float(np.abs(_on_device(ctx, host, op, ins).astype(np.float64) - exact).max())
    seen = (f"{acc} computes {where} on {acc.device()} as {PASSES[name]} bfloat16 pass"
            f"{'es' if PASSES[name] > 1 else ''} of its float32 inputs (matmul precision {name}): within "
            f"{gaps[name]:.3g} of the host's emulation of that, {far:.3g} from the exact result; {host} computes "
            f"it within {host_far:.3g} of exact")
    if name == "HIGHEST":
        return CauseVerdict(cause.id, cause.title, "refuted", what, seen + ": already the highest precision")
    fix = (f"set the matmul precision to highest where {acc} computes (jax.default_matmul_precision('highest'), or "
           f"precision=lax.Precision.HIGHEST at {d.op.user_source or 'that call'})"
           + ("" if "jax_*" in acc.options_help else f"; it ran on {acc.device()}: set it there and capture again"))
    return CauseVerdict(cause.id, cause.title, "confirmed", what, seen, fix, _precision_proof(ctx, acc, fix))


def _exact(op: Any, ins: list[np.ndarray]) -> np.ndarray:
    from ...interpreter import evaluate_eqn

    return np.asarray(evaluate_eqn(op.eqn, ins, mode="f64")[0])


def _precision_proof(ctx: Context, acc: Path, fix: str) -> Fix | None:
    """The accelerator's side re-run at the highest matmul precision, against the other side's outputs: it
    holds where they then agree, or differ by no more than correct implementations of the program's ops may
    (each op's error bound propagated: ``explain.noise``), as float32 sums in two orders do."""
    from ...metrics import max_gaps
    from ..measure import OUTCOMES, distance, narrowing, ulp_comparable
    from ..noise import within_rounding
    from ..verdicts import Rerun

    if "jax_*" not in acc.options_help:
        return None  # outputs captured elsewhere: set it where they ran and capture again (the advice says it)
    spec = acc.with_option("jax_default_matmul_precision", "highest").spec
    outs = ctx.run(spec)
    if isinstance(outs, str):
        return Fix("compile option", fix, spec, False, f"the re-run failed ({outs})")
    other = ctx.path_out if acc is ctx.baseline else ctx.base_out
    before = (*distance(ctx.path_out, ctx.base_out), max(max_gaps(ctx.path_out, ctx.base_out), default=0.0))
    after = (*distance(other, outs), max(max_gaps(other, outs), default=0.0))
    ulp = ulp_comparable((ctx.path_out, ctx.base_out), (other, outs))
    result = narrowing(before, after, distance(outs, ctx.path_out if acc is ctx.path else ctx.base_out)[0] > 0, ulp)
    rerun = Rerun(before, after, OUTCOMES[result], across_zero=not ulp)
    seen = (f"{ctx.path} and {ctx.baseline} differ by up to {before[2]:.3g} (max abs); with {spec}, by "
            f"{after[2]:.3g}")
    cost = _cost(ctx, acc)
    if after[0] == 0:
        return Fix("compile option", fix, spec, True, seen + ": parity restored", cost, rerun=rerun)
    noise = within_rounding(ctx.program, ctx.flat_args, other, outs)
    if noise is not None:
        return Fix("compile option", fix, spec, True,
                   f"{seen}, within the own rounding noise of the program's ops (correct implementations may "
                   f"differ by {noise.bound:.3g} there): the rest is float32 summed in another order", cost, rerun=rerun)
    return Fix("compile option", fix, spec, False, seen + result, cost, rerun=rerun)


def _cost(ctx: Context, acc: Path) -> float | None:
    """The model's run time on the accelerator at the highest matmul precision against its default, both jitted
    there and warm (``execution.timing``); None where not measurable (a call of next to nothing, even in runs)."""
    from ...execution.timing import relative_cost
    from ...paths import make_path

    try:
        timed = make_path(f"jit:device={acc.device()}")
        after = timed.with_option("jax_default_matmul_precision", "highest").warm_call(ctx.fn, ctx.args)
        before = timed.warm_call(ctx.fn, ctx.args)
        cost = relative_cost(after, before, repeat=True) if after is not None and before is not None else None
    except Exception:  # the cost is extra: the fix's verdict stands without it
        return None
    return None if cost is None else (round(cost.ratio, 3) if cost.measurable else 0.0)
