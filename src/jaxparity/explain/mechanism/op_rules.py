"""Causes decided on the diverging ops' own evidence: the element evidence and candidate semantics
the localizer gathered on each op's captured inputs (``localize.elements``, ``localize.semantics``)
and how the difference travels through the program (``Localization.drift``). No re-run: each rule
reads what the op's own values show, and says which elements and which line.

Each rule returns a verdict, or None when no op carries the evidence it needs (then the cause's
table entry says it was not run, and why).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...metrics import MATH_LIBRARY_ULP
from ...localize.elements import MATH_FUNCTIONS
from ...localize.program import RANDOM_PRIMITIVES
from ...paths import Path
from ..causes import Cause
from ..verdicts import CauseVerdict

__all__ = ["MATH", "MATH_LIBRARY_ULP", "OP_RULES", "constant_only", "decide"]

MATH = MATH_FUNCTIONS
# Ops whose output jumps where the input crosses a threshold: a tiny input difference can become a
# whole unit (floor), a sign, an index or a boolean.
_DISCONTINUOUS = {"floor", "ceil", "round", "sign", "argmax", "argmin", "lt", "le", "gt", "ge", "eq", "ne",
                  "sort", "top_k", "convert_element_type", "nextafter", "rem"}
AMPLIFICATION = 1e3  # output difference at least this many times the input's


def constant_only(d: Any) -> bool:
    """Every input of the divergence's op is a literal or a closed-over constant: the op computes a
    constant, which a converter may fold or store its own way."""
    return bool(d.op.operands) and all(o in ("literal", "const") for o in d.op.operands)


def _where(d: Any) -> str:
    loops = "".join(f"{f.describe()}: " for f in d.within)
    return f"{loops}#{d.op.index} {d.op.primitive} ({d.op.user_source or d.op.source or 'unknown line'})"


def _real(loc: Any) -> list[Any]:
    """The divergences a rule reads, those that carry the output difference first (``Localization.ranked``)."""
    return loc.ranked if loc is not None else []


def subnormal_wrong(d: Any) -> str | None:
    """"path" or "baseline" when every differing element involves a subnormal (input, result or sort
    key) and that side is far from the correct result there while the other side is right: it does not
    handle subnormals, even where flushing them to zero does not give its exact values (XLA's log of a
    subnormal is its own approximation, not log(0))."""
    ev = d.elements
    if ev is None or ev.implementation_defined:
        return None
    covered = max((c.count for c in ev.classes if c.name.startswith(("subnormal inputs", "subnormal results",
                                                                      "subnormal keys"))), default=0)
    if covered < d.n_differ:
        return None
    wrong = ev.wrong_side()
    if wrong in ("path", "baseline") and max(ev.path_ulp or 0, ev.baseline_ulp or 0) >= FAR_ULP:
        return wrong
    if ev.exact_op and wrong in ("path", "baseline"):
        return wrong
    return None


FAR_ULP = 2**10  # as ``localize.elements``: beyond this a rounded result is wrong, not rounded otherwise


def _subnormal(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    for d in (loc.carrying if loc is not None else []):
        ev = d.elements
        if ev is not None and not ev.flushes and (wrong := subnormal_wrong(d)):
            who, other = (path, baseline) if wrong == "path" else (baseline, path)
            ulp, good = (ev.path_ulp, ev.baseline_ulp) if wrong == "path" else (ev.baseline_ulp, ev.path_ulp)
            dist = "" if ev.exact_op else f": {ulp} ULP from the correct result there, {other} {good} ULP"
            return CauseVerdict(cause.id, cause.title, "confirmed", f"each side against the correct result at "
                                f"{_where(d)}", f"all {d.n_differ} differing elements involve a subnormal, and "
                                f"{who} is wrong on them{dist}: {who} does not handle subnormals (it reads them "
                                "as zero or outside its approximation's range)", cause.fix)
        if ev is None or not ev.flushes:
            continue
        count = max((c.count for c in ev.classes if c.name.startswith("subnormal")), default=0)
        how = "; ".join(f"{path if side == 'path' else baseline} flushes subnormal {what} to zero "
                        f"({'DAZ' if what == 'inputs' else 'FTZ'})" for side, what in ev.flushes)
        return CauseVerdict(cause.id, cause.title, "confirmed", f"the op on its own inputs with subnormals flushed, at "
                            f"{_where(d)}", f"{how}: the op computed that way reproduces its {count} differing "
                            "elements that involve a subnormal bit for bit", cause.fix)
    return None


def _signed_zero(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    """Every differing element of the divergence that carries the output difference is a zero of the
    other sign: the side whose zero has not the sign the op declares on these inputs drops it."""
    import math

    from ...localize.elements import SIGNED_ZERO, _fmt

    blame = getattr(loc, "blame", None) if loc is not None else None
    named = ([loc.local[c.divergence] for c in blame.carriers] if blame is not None and blame.carriers
             else _real(loc)[:1])
    for d in named:
        ev = d.elements
        n = next((c.count for c in ev.classes if c.name == SIGNED_ZERO), 0) if ev is not None else 0
        if not n or n < d.n_differ or ev.example is None:
            continue
        ex = ev.example
        sign = {k: math.copysign(1.0, v) for k, v in (("path", ex.path), ("baseline", ex.baseline),
                                                      ("correct", ex.correct)) if isinstance(v, float)}
        if "correct" in sign and sign.get("path") != sign["correct"]:
            who, other, got = path, baseline, ex.path
        elif "correct" in sign and sign.get("baseline") != sign["correct"]:
            who, other, got = baseline, path, ex.baseline
        else:
            continue
        ins = ", ".join("·" if v is None else _fmt(v) for v in ex.inputs)

        def signed(v: Any) -> str:  # a zero with its sign: +0, -0
            return ("-0" if math.copysign(1.0, v) < 0 else "+0") if isinstance(v, float) and v == 0 else _fmt(v)

        return CauseVerdict(cause.id, cause.title, "confirmed", f"each side's sign of zero against the op's declared "
                            f"result at {_where(d)}", f"all {n} differing elements are zeros of the other sign: {who} "
                            f"gives {signed(got)} where the op declares {signed(ex.correct)} on these inputs, {other} keeps "
                            f"it (e.g. inputs ({ins})); what the program computes from that zero (atan2, 1/x, "
                            "copysign) then differs", cause.fix)
    return None


def _conversion(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    for d in _real(loc):
        ev = d.elements
        if d.op.primitive != "convert_element_type" or ev is None or not ev.implementation_defined:
            continue
        ex = ev.example
        sample = (f"; e.g. {ex.inputs[0]} gives {path} {ex.path} and {baseline} {ex.baseline}"
                  if ex is not None and ex.implementation_defined and ex.inputs else "")
        target = d.op.outputs[0].split("[", 1)[0]
        return CauseVerdict(cause.id, cause.title, "confirmed", f"the inputs of {_where(d)}",
                            f"{ev.implementation_defined} differing elements cast NaN, inf or out-of-range floats to "
                            f"{target}, which each runtime defines its own way{sample}", cause.fix)
    return None


def stable_order_broken(d: Any) -> str | None:
    """"path" or "baseline": the side that does not keep the order of equal keys the op declares (a
    stable sort, argmax's first index), where the other side keeps it."""
    ev = d.elements
    if ev is None or not any(c.name.startswith("equal keys") and "declared" in c.name for c in ev.classes):
        return None
    if any(c.name.startswith("subnormal keys") for c in ev.classes):
        return None
    if any(c.name == "NaN or inf inputs" for c in ev.classes):
        return None  # NaN among the keys: how each side ranks it decides first, not the order of equal keys
    wrong = ev.wrong_side()
    return wrong if wrong in ("path", "baseline") else None


def _ordering(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    for d in _real(loc):
        ev = d.elements
        if (wrong := stable_order_broken(d)) is not None:
            who, other = (path, baseline) if wrong == "path" else (baseline, path)
            tie = next(c for c in ev.classes if c.name.startswith("equal keys"))
            what = "a stable sort (is_stable=True, as jnp.sort and jnp.argsort ask)" if d.op.primitive == "sort" \
                else f"{d.op.primitive} (the first of equal keys)"
            return CauseVerdict(cause.id, cause.title, "confirmed", f"the keys of {_where(d)}",
                                f"{tie.count} differing elements come from equal keys, whose order {what} defines: "
                                f"{who} does not keep it (it is wrong there), {other} does", cause.fix)
        if ev is None or not ev.implementation_defined or d.op.primitive == "convert_element_type":
            continue
        tie = next((c for c in ev.classes if c.name.startswith("equal keys")), None)
        if tie is None:
            continue
        return CauseVerdict(cause.id, cause.title, "confirmed", f"the keys of {_where(d)}",
                            f"{tie.count} differing elements come from {tie.name}: {path} and {baseline} order "
                            "them differently", cause.fix)
    return None


def _math_library(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    real = _real(loc)
    if not real:
        return None
    d = real[0]
    ev = d.elements
    if d.op.primitive not in MATH or ev is None or ev.path_ulp is None or ev.baseline_ulp is None:
        return None
    if ev.flushes or ev.implementation_defined:
        return None  # subnormals or undefined elements: another cause
    worst = max(ev.path_ulp, ev.baseline_ulp)
    if worst > MATH_LIBRARY_ULP:
        return CauseVerdict(cause.id, cause.title, "refuted", f"each side against the correctly rounded "
                            f"{d.op.primitive} at {_where(d)}", f"{path} is {ev.path_ulp} ULP and {baseline} "
                            f"{ev.baseline_ulp} ULP from it: more than a math library's {MATH_LIBRARY_ULP}")
    return CauseVerdict(cause.id, cause.title, "confirmed", f"each side against the correctly rounded "
                        f"{d.op.primitive} at {_where(d)}", f"{path} is {'up to ' if ev.path_ulp else ''}{ev.path_ulp} ULP and {baseline} "
                        f"{'up to ' if ev.baseline_ulp else ''}{ev.baseline_ulp} ULP from the correctly rounded result on the same inputs: two "
                        f"implementations of {d.op.primitive}, each within {worst} ULP of it, neither wrong (a math "
                        f"library is allowed a few ULP; up to {MATH_LIBRARY_ULP} is taken as one)", cause.fix)


def _amplified(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    """A discontinuous op downstream of the first local divergence whose output difference is far
    larger than its inputs' (drift is the path-vs-baseline difference at each op's output)."""
    if loc is None or not loc.local or not loc.program:
        return None
    first = loc.local[0].top_index
    drift = {d.index: d.max_abs for d in loc.drift}
    for op in loc.program:
        if op.index <= first or op.primitive not in _DISCONTINUOUS or op.index not in drift:
            continue
        if op.primitive == "convert_element_type" and not op.outputs[0].startswith(("int", "uint", "bool")):
            continue
        feeding = [drift.get(int(o[2:].split(":")[0]), 0.0) for o in op.operands if o.startswith("op")]
        before = max(feeding, default=0.0)
        after = drift[op.index]
        if before > 0 and after >= AMPLIFICATION * before:
            line = op.user_source or op.source or "unknown line"
            return CauseVerdict(cause.id, cause.title, "confirmed", "the difference before and after each "
                                "discontinuous op", f"#{op.index} {op.primitive} ({line}) turns a difference of "
                                f"{before:.3g} in its input into {after:.3g} in its output", cause.fix)
    return None


def _value_kind(v: Any) -> str:
    """'nan', 'inf' or 'finite' for a reported value (floats, or their strings in JSON-safe form)."""
    if isinstance(v, str):
        return "nan" if v.lower() == "nan" else "inf" if "inf" in v.lower() else "finite"
    if isinstance(v, float):
        return "nan" if v != v else "inf" if v in (float("inf"), float("-inf")) else "finite"
    return "finite"


def _nonfinite_declared(d: Any, kind: str) -> bool:
    """The op's declared result at the example element is ``kind`` ('inf' or 'nan') where the path
    returns a finite value, among elements whose results include NaN or inf."""
    ev = d.elements
    ex = ev.example if ev is not None else None
    if ex is None or ex.correct is None or ev.implementation_defined:
        return False
    return (_value_kind(ex.correct) == kind and _value_kind(ex.path) == "finite"
            and any(c.name == "NaN or inf results" for c in ev.classes))


def overflow_ignored(d: Any) -> bool:
    """The op's declared result is ±inf (its computation overflows) where the path returns a finite
    value: what an identity rewrite (log(exp(x)) -> x) that ignores overflow does. Not where the op takes
    no input of the case: a constant stored otherwise (``artifact.constants``) is no rewritten expression."""
    return _nonfinite_declared(d, "inf") and not constant_only(d)


_NAN_ORDERED = {"argmax", "argmin", "sort", "top_k", "reduce_max", "reduce_min", "max", "min"}


def nan_ignored(d: Any) -> bool:
    """NaN or inf inputs whose IEEE result is NaN, where the path returns a finite value: a fold that
    assumes finite values (x * 0 -> 0, x - x -> 0; fast math). For ops that order values (argmax, max,
    sort), NaN among the inputs where the path is the wrong side: it ordered them as if there were none."""
    ev = d.elements
    if ev is None:
        return False
    nan_in = any(c.name == "NaN or inf inputs" for c in ev.classes)
    if d.op.primitive in _NAN_ORDERED and nan_in and ev.wrong_side() == "path":
        return True
    return _nonfinite_declared(d, "nan") and nan_in


def _ieee_fold(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    for d in _real(loc):
        if nan_ignored(d):
            ex = d.elements.example
            ins = ", ".join(str(v) for v in ex.inputs if v is not None)
            n = next(c.count for c in d.elements.classes if c.name == "NaN or inf inputs")
            if d.op.primitive in _NAN_ORDERED and not ins:
                seen = (f"{n} differing elements come from values that include NaN, which {d.op.primitive} "
                        f"declares the largest (it propagates): the declared result is {ex.correct}, {path} gives "
                        f"{ex.path}: {path} ordered them as if there were no NaN")
            else:
                seen = (f"{n} differing elements have NaN or inf inputs; on ({ins}) IEEE gives {ex.correct}, {path} "
                        f"gives {ex.path}: it computed as if its inputs were finite (a fold, or a kernel that "
                        "ignores NaN)")
            return CauseVerdict(cause.id, cause.title, "confirmed", f"each side against IEEE arithmetic at {_where(d)}",
                                seen, cause.fix)
    return None


def _identity(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    for d in _real(loc):
        if overflow_ignored(d):
            ex = d.elements.example
            ins = ", ".join(str(v) for v in ex.inputs if v is not None)
            return CauseVerdict(cause.id, cause.title, "confirmed", f"each side against the declared result of "
                                f"{_where(d)}", f"on its own inputs ({ins}) the declared op gives {ex.correct} "
                                f"(it overflows), {path} gives {ex.path}: the expression was rewritten into one that "
                                "never computes the overflowing value", cause.fix)
    return None


def _wrong_code(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    for d in _real(loc):
        if overflow_ignored(d) or nan_ignored(d) or subnormal_wrong(d) or stable_order_broken(d) or constant_only(d):
            continue  # an identity rewrite, NaN ignored, subnormals, broken stable order, a stored constant: their own
        ev = d.elements
        if ev is None or ev.path_ulp is None or ev.baseline_ulp is None or ev.flushes:
            continue
        if d.unrounded is not None or any(m.reproduces_path for m in d.semantics):
            continue  # excess precision or a fused multiply-add: a known mechanism, not a wrong result
        wrong = ev.wrong_side()
        far = max(ev.path_ulp, ev.baseline_ulp) >= FAR_ULP and not within_input_scale(d, wrong)
        if wrong not in ("path", "baseline") or not (ev.exact_op or far):
            continue
        who, other = (path, baseline) if wrong == "path" else (baseline, path)
        ulp, good = (ev.path_ulp, ev.baseline_ulp) if wrong == "path" else (ev.baseline_ulp, ev.path_ulp)
        what = "an exact op gives other values" if ev.exact_op else "a result far from the correctly rounded one"
        shared = (f" (the differing elements have {', '.join(f'{c.count} × {c.name}' for c in ev.classes)})"
                  if ev.classes else "")
        integer = d.op.outputs and d.op.outputs[0].startswith(("int", "uint", "bool"))
        off = (f"{who} is off by up to {ulp} on the same inputs, {other} by {good}" if integer else
               f"{who} is {ulp} ULP from it on the same inputs, {other} {good}")
        return CauseVerdict(cause.id, cause.title, "confirmed", f"each side against the reference result of "
                            f"{_where(d)}", f"{what}: {off}: {who} is wrong here{shared}", cause.fix)
    return None


SCALE_EPS = 64  # unit roundoffs of the inputs' scale: an op's error bound where its result is near zero


def within_input_scale(d: Any, wrong: str | None) -> bool:
    """The wrong side's distance from the correct result at the example element is within a few unit
    roundoffs of the scale of the op's inputs: near zero, a result far in ULP (measured against a tiny
    or exactly zero value) is still within the op's error bound, not wrong code."""
    import math

    import ml_dtypes
    import numpy as np

    ex = d.elements.example if d.elements is not None else None
    if ex is None or wrong not in ("path", "baseline") or not d.op.outputs:
        return False
    try:
        dtype = np.dtype(d.op.outputs[0].split("[", 1)[0])
        got, correct = float(ex.path if wrong == "path" else ex.baseline), float(ex.correct)
        scale = max([abs(float(x)) for x in ex.inputs if isinstance(x, (int, float))] + [abs(correct)])
    except (TypeError, ValueError):
        return False
    if dtype.kind not in "fV" or not all(map(math.isfinite, (got, correct, scale))):
        return False
    try:
        eps = float(ml_dtypes.finfo(dtype).eps)
    except ValueError:
        return False
    return abs(got - correct) <= SCALE_EPS * eps * scale


def _jax_options(path: Path) -> dict[str, str]:
    return {k: v for k, v in path.options.items() if k.startswith("jax_")}


def _rng(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    """Random bits that differ for the same key: the RNG's configuration (per-path JAX config) or its
    implementation (another JAX version) differs."""
    d = next((d for d in _real(loc) if d.op.primitive in RANDOM_PRIMITIVES), None)
    if d is None:
        return None
    p_opts, b_opts = _jax_options(path), _jax_options(baseline)
    differ = {k: (p_opts.get(k, "default"), b_opts.get(k, "default")) for k in set(p_opts) | set(b_opts)
              if p_opts.get(k) != b_opts.get(k)}
    if differ:
        what = "; ".join(f"{k}={p} on {path}, {b} on {baseline}" for k, (p, b) in sorted(differ.items()))
        seen = f"the same key gives other random bits at {_where(d)}: the RNG is configured differently ({what})"
    elif path.env or baseline.env:
        seen = (f"the same key gives other random bits at {_where(d)}: another JAX version's RNG implementation "
                "(its defaults, e.g. jax_threefry_partitionable, changed across versions)")
    else:
        seen = f"the same key gives other random bits at {_where(d)}"
    return CauseVerdict(cause.id, cause.title, "confirmed", f"the random bits of {_where(d)} for the same key", seen,
                        cause.fix)


OP_RULES: dict[str, Callable[[Cause, Any, Path, Path], CauseVerdict | None]] = {
    "subnormal": _subnormal,
    "signed-zero": _signed_zero,
    "conversion": _conversion,
    "ordering": _ordering,
    "math-library": _math_library,
    "amplification": _amplified,
    "identity-rewrite": _identity,
    "ieee-fold": _ieee_fold,
    "rng-config": _rng,
    "wrong-code": _wrong_code,
}


def decide(cause: Cause, loc: Any, path: Path, baseline: Path) -> CauseVerdict | None:
    """The verdict of ``cause``'s op rule on this localization, or None where no op shows evidence."""
    rule = OP_RULES.get(cause.op_check or "")
    return rule(cause, loc, path, baseline) if rule else None
