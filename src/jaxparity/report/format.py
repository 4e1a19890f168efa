"""Words and numbers shared by every reporter, so the terminal, HTML and messages say the same."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ..metrics import LeafDiff, dtype_class
from ..result import ArrayInfo, ComparisonResult, LeafResult, PathResult

__all__ = ["HUGE_ULP", "HUGE_ULP_NOTE", "NAN_ULP", "advice", "arrays_line", "explaining_cause", "fix_label", "fmt",
           "is_rerun", "leaf_line", "module_lines", "path_line", "plural", "producer", "readable", "required_tolerance", "round_up",
           "tolerance_choices",
           "short_title", "summary_line", "ulp_text", "value_text", "values_text"]


def fmt(x: float | None) -> str:
    if x is None:
        return "—"
    if x == 0:
        return "0"
    return f"{x:.3g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.2e}"


def required_tolerance(leaf: LeafResult, baseline: str | None = None) -> str:
    """'--ulp 143 (of float32) or --atol 8.6e-04 (1.2× eager's own error against f64) or --rtol 6e-04 (5000×
    float32's epsilon)': the smallest settings that would pass, each with what it amounts to in the output's
    own dtype and noise, so that a tolerance that hides everything (an rtol of 2.5) reads as such."""
    choices = tolerance_choices(leaf, baseline)
    if not choices:
        return "no tolerance passes a NaN against a number"
    return " or ".join(f"--{name} {value}" + (f" ({why})" if why else "") for name, value, why in choices)


def tolerance_choices(leaf: LeafResult, baseline: str | None = None) -> list[tuple[str, str, str]]:
    """(option, value, what it amounts to) for each tolerance that would pass ``leaf``: each value rounded
    up, so the printed value passes too; only finite ones (no atol inf or rtol nan)."""
    d = leaf.diff
    if d is None or d.required_ulp is None:
        return []
    if dtype_class(d.dtype) in ("int", "uint", "bool"):
        return [("atol", str(d.max_ulp), "")]
    eps = _epsilon(d.dtype)
    ulp_why = f"of {d.dtype}"
    if eps and d.required_ulp * eps > 1:
        ulp_why += ": values near zero or of opposite sign, read atol"
    out = [("ulp", str(d.required_ulp), ulp_why)]
    if d.required_atol is not None and math.isfinite(d.required_atol):
        noise = leaf.baseline_error_vs_f64.max_abs if leaf.baseline_error_vs_f64 is not None else 0.0
        why = (f"{_times(d.required_atol / noise)} {baseline or 'the baseline'}'s own error against f64"
               if noise and math.isfinite(noise) else "")
        out.append(("atol", round_up(d.required_atol), why))
    if d.required_rtol is not None and math.isfinite(d.required_rtol):
        if d.required_rtol >= 1:
            why = "≥ 1: hides errors as large as the values themselves"
        elif eps:
            why = f"{_times(d.required_rtol / eps)} {d.dtype}'s epsilon"
        else:
            why = ""
        out.append(("rtol", round_up(d.required_rtol), why))
    return out


def _times(x: float) -> str:
    """'0.43×', '12×', '5,100×': two significant digits, no exponent."""
    if x <= 0 or not math.isfinite(x):
        return f"{x:g}×"
    exponent = math.floor(math.log10(x))
    return f"{round(x, 1 - exponent):,.{max(0, 1 - exponent)}f}×"


def _epsilon(dtype: str) -> float | None:
    import ml_dtypes
    import numpy as np

    try:
        return float(ml_dtypes.finfo(np.dtype(getattr(ml_dtypes, dtype, dtype))).eps)
    except (TypeError, ValueError):
        return None


def round_up(x: float) -> str:
    """``x`` in two significant digits, rounded up: a tolerance printed this way still passes."""
    if x <= 0 or not math.isfinite(x):
        return fmt(x) if x == 0 else str(x)
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    text = f"{math.ceil(x / step - 1e-9) * step:.2g}"
    while float(text) < x:  # the decimal rounding of the step may land just below
        step_up = float(text) + step
        text = f"{step_up:.2g}"
    return text


def value_text(v: float | int | Sequence[float]) -> str:
    """One element as a report quotes it: 8 significant digits, exact integers, ``a+bj`` for complex."""
    if isinstance(v, (tuple, list)):
        re, im = v
        return f"{re:.8g}{'+' if im >= 0 or math.isnan(im) else '-'}{abs(im):.8g}j"
    if isinstance(v, int):
        return str(v)
    return f"{v:.8g}"


def values_text(values: Sequence) -> str:
    return "[" + ", ".join(map(value_text, values)) + "]"


def _element(leaf: LeafResult) -> str:
    d = leaf.diff
    assert d is not None and d.worst_index is not None
    idx = ",".join(map(str, d.worst_index))
    got, expected = d.worst_got, d.worst_expected
    if d.complex_parts is not None:  # the real parts are worst_got/worst_expected, the imaginary ones here
        got = (got, d.complex_parts.worst_got_imag)  # type: ignore[assignment]
        expected = (expected, d.complex_parts.worst_expected_imag)  # type: ignore[assignment]
    return f"{leaf.name}[{idx}] = {value_text(got)} vs {value_text(expected)}"  # type: ignore[arg-type]


def _how_far(d: LeafDiff) -> str:
    """The distance in the units of the dtype's class (see ``metrics.dtype_class``); for floats, over
    the elements where both sides are numbers (a NaN against a number has no distance)."""
    kind = dtype_class(d.dtype)
    if kind == "bool":
        return "bool"
    if kind in ("int", "uint"):
        return f"by up to {d.max_ulp} ({d.dtype})"
    if d.complex_parts is not None:
        c = d.complex_parts
        part = "float32" if d.dtype == "complex64" else "float64"
        return (f"up to {c.max_ulp_real} ULP of {part} in the real part and {c.max_ulp_imag} in the imaginary "
                f"part, max abs {fmt(d.max_abs)}, |z| up to {fmt(c.max_rel_modulus)} relative")
    return f"up to {d.max_ulp} ULP of {d.dtype}, max abs {fmt(d.max_abs)}"


def plural(n: int, word: str, words: str | None = None) -> str:
    """'1 element', '3 elements'."""
    return f"{n} {word if n == 1 else words or word + 's'}"


def leaf_line(leaf: LeafResult, baseline: str) -> str:
    d = leaf.diff
    if d is None:
        return ""
    if d.bitwise_equal:
        return f"{leaf.name}: bit-identical"
    if d.n_differ == 0 and leaf.rule:
        return f"{leaf.name}: equal ({leaf.rule})"
    if d.n_differ == 0:
        return f"{leaf.name}: equal values (bit patterns differ only in ±0 or NaN payloads)"
    differ = "element differs" if d.n_differ == 1 else "elements differ"
    if d.nan_mismatch and d.nan_mismatch == d.n_differ:  # nothing else to measure: no "up to 0 ULP, max abs 0"
        text = f"{leaf.name}: {d.n_differ}/{d.size} {differ}, each a NaN against a number"
    else:
        text = f"{leaf.name}: {d.n_differ}/{d.size} {differ}, {_how_far(d)}"
        if d.nan_mismatch:
            text += f", and {plural(d.nan_mismatch, 'NaN')} against a number"
    if leaf.rule:
        text += f" ({leaf.rule})"
    text += f"; worst {_element(leaf)}"
    return text


def path_line(p: PathResult, baseline: str) -> str:
    """One sentence per path: the verdict and, for a mismatch, what would have passed."""
    text = _path_line(p, baseline)
    s = p.samples
    if s is not None and p.verdict != "baseline" and p.status == "ok":
        which = f", the worst of {s.n}" if p.gated else ""
        text = (f"on {s.worst_label}{which}: {text}; diverges on {s.diverging} of {s.n} samples "
                f"({s.fraction:.0%})")
    return text


def _path_line(p: PathResult, baseline: str) -> str:
    if p.verdict == "baseline":
        return f"the baseline: {p.summary}"
    if p.verdict in ("error", "crashed", "timeout", "unavailable"):
        if p.callbacks:
            from .callbacks import callbacks_line

            return f"{p.verdict}: {callbacks_line(p.callbacks, p.message)}"
        return f"{p.verdict}: {p.message}"
    worst = p.worst
    if p.spec == "f64" and worst is not None and worst.diff is not None:
        d = worst.diff
        if dtype_class(d.dtype) in ("int", "uint", "bool"):  # integers: an absolute difference, no ULP
            return f"ideal math (reference); as {d.dtype}, {baseline} differs from it by up to {d.max_ulp}"
        if d.nan_mismatch:
            return (f"ideal math (reference); correctly rounded to {d.dtype}, {baseline} has "
                    f"{plural(d.nan_mismatch, 'NaN')} against a number from it"
                    + (f", and is up to {d.max_ulp} ULP (max abs {fmt(d.max_abs)}) from it elsewhere"
                       if d.n_differ > d.nan_mismatch else ""))
        return (f"ideal math (reference); correctly rounded to {d.dtype}, {baseline} is up to {d.max_ulp} ULP "
                f"(max abs {fmt(d.max_abs)}) from it")
    role = " (reference)" if p.reference else ""
    if p.verdict == "identical":
        return f"bit-identical to {baseline}{role}"
    if p.verdict == "equal":
        rules = [f"{lf.name}: {lf.rule}" for lf in p.leaves
                 if lf.rule and lf.diff is not None and not lf.diff.bitwise_equal]
        if rules:
            return f"equal to {baseline}{role} as the math defines it: " + "; ".join(rules)
        return f"equal to {baseline}{role}; bit patterns differ only in ±0 or NaN payloads"
    assert worst is not None and worst.diff is not None
    text = leaf_line(worst, baseline)
    if p.verdict == "within tolerance":
        return f"within tolerance of {baseline}{role}: {text}"
    tolerance = required_tolerance(worst, baseline)
    text = f"differs from {baseline}{role}: {text}; " + (f"would pass with {tolerance}" if tolerance.startswith("--")
                                                          else tolerance)
    err, base_err = worst.error_vs_f64, worst.baseline_error_vs_f64
    if err is None or base_err is None or err.max_abs == base_err.max_abs:
        path_by = base_by = " (by mean abs error; the max is the same)"
    else:
        path_by = f" (max abs error {fmt(err.max_abs)} against {baseline}'s {fmt(base_err.max_abs)})"
        base_by = f" (max abs error {fmt(base_err.max_abs)} against {p.spec}'s {fmt(err.max_abs)})"
    if worst.ideal_uncertain_by is not None and err is not None and base_err is not None:
        errors = (f"max abs {fmt(err.max_abs)} and {fmt(base_err.max_abs)}" if err.max_abs != base_err.max_abs
                  else f"the same max abs, mean abs {fmt(err.mean_abs)} and {fmt(base_err.mean_abs)}")
        text += (f"; neither is called closer to the f64 ideal: their errors against it ({errors}) differ by less "
                 f"than the ideal itself moves ({fmt(worst.ideal_uncertain_by)}) with the constants the program "
                 f"rounded at trace time (see f64)")
    if worst.closer_to_f64 == "path":
        text += f"; closer to the f64 ideal than {baseline}{path_by}"
    elif worst.closer_to_f64 == "baseline":
        text += f"; {baseline} is closer to the f64 ideal{base_by}"
    elif worst.closer_to_f64 == "mixed" and err is not None and base_err is not None:
        (a, ea), (b, eb) = sorted([(p.spec, err), (baseline, base_err)], key=lambda s: s[1].max_abs)
        text += (f"; neither is called closer to the f64 ideal: {a}'s max abs error against it is the smaller "
                 f"({fmt(ea.max_abs)} against {fmt(eb.max_abs)}), {b}'s max ULP error ({eb.max_ulp} against "
                 f"{ea.max_ulp}): the larger values decide the one, the smaller ones the other")
    return text


def summary_line(r: ComparisonResult) -> str:
    """The whole result in a line or two: the verdicts' headline (``answer.headline``) where they are decided."""
    if r.verdicts:
        from .answer import headline

        return " ".join(headline(r))
    base = next((p for p in r.paths if p.spec == r.baseline), None)
    if base is not None and base.status != "ok":
        why = (base.message or base.status).strip().splitlines()[0] if (base.message or base.status) else base.status
        others = [p.spec for p in r.paths if p.spec != r.baseline and p.status == "ok"]
        if not others:
            return (f"the baseline {r.baseline} failed ({base.status}: {why[:200]}) and no other path ran: "
                    "nothing was compared")
        return (f"the baseline {r.baseline} failed ({base.status}: {why[:200]}): nothing was compared with it; "
                f"{', '.join(others)} ran but could not be compared: choose one of them as --baseline")
    gated = [p for p in r.paths if p.gated]
    broken = [p.spec for p in gated if p.status != "ok"]  # did not run: they fail the gate, but differ in nothing
    failing = [p.spec for p in gated if not p.passed and p.status == "ok" and not r.rounding_only(p.spec)]
    noise = [p.spec for p in gated if not p.passed and p.status == "ok" and r.rounding_only(p.spec)]
    noisy = (f"; {', '.join(noise)} {'differs' if len(noise) == 1 else 'differ'} from {r.baseline} by rounding noise "
             "only (within what correct implementations of its ops may differ by), which passes") if noise else ""
    compared = len(gated) - len(broken)
    over = f" on all {r.samples} samples" if r.samples > 1 else ""
    faults = dict.fromkeys(p.fault.converter for p in gated if p.status != "ok" and p.fault is not None)
    blamed = "".join(f" ({c} wrote a model its own checker rejects: the converter's fault, not the runtime's)"
                     for c in faults)
    did_not_run = (f"{len(broken)} {_paths(len(broken))} could not run: {', '.join(broken)}{blamed}" if broken else "")
    if r.hidden:
        what = "; ".join(d.text for d in r.degenerate)
        n = compared - len(failing)
        agree = (f"{n} of {compared} compared {_paths(compared)} {'agrees' if n == 1 else 'agree'} with {r.baseline}"
                 if compared else "no path was compared")
        return (f"nothing shown: {what}; {agree}{over} on outputs that show nothing of the model"
                + (f"; {did_not_run}" if broken else ""))
    if not failing:
        if broken:
            n_same = compared - len(noise)
            return did_not_run + noisy + (f"; the other {n_same} agree with {r.baseline}{over} "
                                          f"({r.tolerance.describe()})" if n_same else "")
        if not gated:
            refs = [p.spec for p in r.paths if p.reference]
            return (f"no path was compared with {r.baseline}" + (f" ({', '.join(refs)}: "
                    f"{'references' if len(refs) > 1 else 'a reference'}, shown and never judged)" if refs else "")
                    + ": name one to compare (jit, export, savedmodel...)")
        if noise:
            n_agree = len(gated) - len(noise)
            head = (f"{', '.join(noise)} {'differs' if len(noise) == 1 else 'differ'} from {r.baseline}{over} by "
                    "rounding noise only: within what correct implementations of the program's ops may differ by, "
                    "which passes (--ulp 0 asks for bit for bit)")
            return head + (f"; the other {n_agree} agree ({r.tolerance.describe()})" if n_agree else "")
        if len(gated) == 1:
            return f"the 1 compared path agrees with {r.baseline}{over} ({r.tolerance.describe()})"
        return f"all {len(gated)} compared paths agree with {r.baseline}{over} ({r.tolerance.describe()})"
    verb = "does" if len(failing) == 1 else "do"
    line = (f"{len(failing)} of {compared} compared {_paths(compared)} {verb} not agree with {r.baseline}{over} "
            f"({r.tolerance.describe()}): {', '.join(failing)}")
    return line + noisy + (f"; {did_not_run}" if broken else "")


def devices_line(r: Any) -> str | None:
    """Where each path computed: 'cpu (every path)', or 'tpu: eager, jit; cpu: jit:device=cpu, f64'; None where
    no path says (an older result)."""
    by: dict[str, list[str]] = {}
    for p in r.paths:
        if getattr(p, "device", None):
            by.setdefault(p.device, []).append(p.spec)
    if not by:
        return None
    if len(by) == 1:
        return f"{next(iter(by))} (every path that ran)"
    return "; ".join(f"{d}: {', '.join(specs)}" for d, specs in by.items())


def _paths(n: int) -> str:
    return "path" if n == 1 else "paths"


def _array(a: ArrayInfo) -> str:
    return f"{a.name} {a.dtype}[{','.join(map(str, a.shape))}]"


def _module(name: str) -> str:
    """The module an input leaf belongs to: its name less the last part (``arg0/params/Conv_0``)."""
    return name.rsplit("/", 1)[0]


def _grouped(arrays: Sequence[ArrayInfo], depth: int) -> dict[str, list[ArrayInfo]]:
    groups: dict[str, list[ArrayInfo]] = {}
    for a in arrays:
        parts = a.name.split("/")
        groups.setdefault("/".join(parts[:depth]) if len(parts) > depth else a.name, []).append(a)
    return groups


def arrays_line(arrays: Sequence[ArrayInfo], limit: int = 6) -> str:
    """``name dtype[shape]`` for each array; beyond ``limit`` arrays, those under a common prefix (a model's
    parameters) are counted instead of listed, the prefix as deep as leaves at most ``limit`` groups:
    ``arg0/params/… 8 arrays``, or for a model of 50 layers ``arg0/… 174 arrays in 50 modules``."""
    if len(arrays) <= limit:
        return ", ".join(_array(a) for a in arrays)
    deepest = max(len(a.name.split("/")) for a in arrays)
    depth = max((d for d in range(1, deepest) if len(_grouped(arrays, d)) <= limit), default=1)
    shown = []
    for prefix, members in _grouped(arrays, depth).items():
        if len(members) == 1:
            shown.append(_array(members[0]))
            continue
        values = sum(math.prod(a.shape) for a in members)
        dtypes = "/".join(sorted({a.dtype for a in members}))
        modules = len({_module(a.name) for a in members})
        within = f" in {modules} modules" if 1 < modules < len(members) else ""
        shown.append(f"{prefix}/… {len(members)} arrays{within} ({values:,} {dtypes} values)")
    return ", ".join(shown)


def module_lines(arrays: Sequence[ArrayInfo], limit: int = 6) -> list[str]:
    """One line per module (the leaves' names less their last part): ``arg0/conv_bn: gamma float32[16], ...``,
    or past ``limit`` leaves their count and values."""
    modules: dict[str, list[ArrayInfo]] = {}
    for a in arrays:
        modules.setdefault(_module(a.name) if "/" in a.name else a.name, []).append(a)
    lines = []
    for module, members in modules.items():
        if len(members) == 1 and members[0].name == module:
            lines.append(_array(members[0]))
        elif len(members) <= limit:
            lines.append(f"{module}: " + ", ".join(_array(a)[len(module) + 1:] for a in members))
        else:
            values = sum(math.prod(a.shape) for a in members)
            dtypes = "/".join(sorted({a.dtype for a in members}))
            lines.append(f"{module}: {len(members)} arrays ({values:,} {dtypes} values)")
    return lines


HUGE_ULP = 1 << 20
HUGE_ULP_NOTE = ("ULP counts in the millions come from values near zero or of opposite sign, where one ULP is "
                 "tiny: read max abs there.")


def ulp_text(n: int) -> str:
    """A ULP count; counts in the millions (values near zero) in short scientific form."""
    return str(n) if n < HUGE_ULP else f"{n:.2g}".replace("e+0", "e").replace("e+", "e")


def producer(operand: str) -> tuple[int, int] | None:
    """(op index, output index) of an ``OpInfo.operands`` entry made by an op; None otherwise."""
    if not operand.startswith("op"):
        return None
    op, _, output = operand[2:].partition(":")
    return int(op), int(output or 0)


# -- evidence text and the cause that explains a divergence ----------------------------------------
NAN_ULP = (1 << 63) - 1  # the distance experiments report for a NaN against a number (int64 max)
_SINGULAR = {"have": "has", "come": "comes", "cast": "casts", "differ": "differs", "are": "is"}


def readable(text: str) -> str:
    """Evidence as a reader wants it: a NaN against a number said so (not '9223372036854775807 ULP' or
    'None ULP'), and '1 element' in the singular. The JSON keeps the experiments' own words."""
    nan = str(NAN_ULP)
    text = re.sub(rf"\(max {nan} ULP\)", "(with a NaN against a number)", text)
    text = re.sub(rf"\bis {nan} ULP from (it|the correctly rounded result|the exact result)",
                  r"disagrees with \1 on NaN (a NaN against a number)", text)
    text = re.sub(r"\bis None ULP away in (\d+) elements", r"differs in \1 elements, with a NaN against a number",
                  text)
    text = re.sub(rf"\b{nan} ULP\b", "a NaN against a number", text)
    text = re.sub(r"\bNone ULP\b", "a NaN against a number", text)
    def one(m: re.Match) -> str:
        verb = m.group(2)
        return f"1 {m.group(1) or ''}element" + (f" {_SINGULAR[verb.strip()]}" if verb else "")

    return re.sub(r"\b1 (differing )?elements\b( have| come| cast| differ| are)?", one, text)


def is_rerun(cause: Any) -> bool:
    """A cause decided by re-running the whole program (a flag flipped, another compiler): it shows
    what restores parity, not which op's values show the mechanism."""
    return cause.experiment.startswith(("re-ran ", "ran "))


def _supporting(cause: Any) -> bool:
    """A cause that does not explain a divergence alone: an amplifier downstream, or a fingerprint of
    subnormal flushing."""
    return cause.cause == "amplification" or (cause.cause == "denormal-flush"
                                              and cause.experiment.startswith("candidate"))


def _cites(cause: Any, first: Any) -> bool:
    """The cause's experiment was run on ``first`` (a ``LocalDivergence``): '#3 log (model.py:12)'."""
    return first is not None and f"#{first.op.index} {first.op.primitive} (" in cause.experiment


def explaining_cause(causes: Sequence[Any], first: Any = None) -> Any | None:
    """The confirmed cause that explains the divergence: one decided on the diverging op's own values
    (identity rewrite, math library, wrong code, ...) before one that a whole-program re-run confirmed
    (a flag such as xla_disable_hlo_passes=algsimp changes more than this op: the re-run is the proof),
    the one at the first diverging op (``first``) before others; rounding noise only where nothing is
    confirmed; an amplifier last."""
    found = [c for c in causes if c.status in ("confirmed", "partly", "noise")]
    status = {"confirmed": 0, "partly": 1, "noise": 2}
    # that the two paths differ only in an option says where, not how: a mechanism found comes first
    how = any(c.cause not in ("path-option", "unknown") and c.status != "noise" and not _supporting(c) for c in found)
    profiled = any(c.cause == "kernel-accuracy" and c.status == "confirmed" for c in found)
    return min(found, key=lambda c: (c.cause == "unknown", how and c.cause == "path-option", _supporting(c),
                                     profiled and c.cause == "math-library",  # its profile: beyond a library's
                                     _elsewhere(c, first), c.status == "noise",
                                     is_rerun(c), not _cites(c, first), status[c.status]), default=None)


def _elsewhere(cause: Any, first: Any) -> bool:
    """The cause was decided on another op than ``first``, the divergence that carries the output error: a
    mechanism shown at an op that carries none of it does not explain the difference the user sees."""
    import re

    if first is None or _cites(cause, first):
        return False
    named = set(re.findall(r"#(\d+) (\w+)", f"{cause.experiment} {cause.evidence}"))
    return bool(named) and (str(first.op.index), first.op.primitive) not in named


def short_title(title: str) -> str:
    """'identity rewrite that ignores overflow' of 'identity rewrite that ignores overflow (e.g. ...)'."""
    return title.split(" (", 1)[0]


# What a cause's fix is: a fix removes the cause; a workaround lives with it (nothing is wrong, or the
# runtime cannot be changed); a bug is reported.
_WORKAROUND = {"reduction-order", "math-library", "denormal-flush", "amplification"}
_REPORT = {"wrong-code", "other-lowering", "unknown", "converter-decomposition"}


def fix_label(cause: Any) -> str:
    """'fix', 'workaround' or 'what to do' for a cause's ``fix`` text."""
    return "what to do" if cause.cause in _REPORT else "workaround" if cause.cause in _WORKAROUND else "fix"


def narrows(fix: Any) -> bool:
    """Did the fix's re-run narrow the difference without restoring parity (``Rerun.outcome``)?"""
    rerun = getattr(fix, "rerun", None)
    return rerun.outcome == "narrows" if rerun is not None else ": narrows" in (fix.evidence or "")


def fix_note(cause: Any, fixes: Sequence[Any] = ()) -> str:
    """' (verified by a re-run)', ' (not verified by a re-run)', ...: what backs the cause's fix text; ''
    where a re-run cannot verify it (nothing is wrong, noise to compare with a tolerance, or a bug to report)."""
    if fix_label(cause) == "what to do" or cause.fix.startswith("nothing is wrong") or cause.status == "noise":
        return ""  # a bug to report, or a tolerance for noise: nothing a re-run verifies
    proof = cause.proof if cause.proof is not None and cause.proof.verified else \
        next((f for f in fixes if f.verified and f.description == cause.fix), None)
    if proof is not None:
        done = ("brings the paths within rounding noise" if "within the rewritten program's own rounding noise" in
                proof.evidence else "restores parity")
        return f" (verified: {proof.spec} {done})" if proof.spec else " (verified by a re-run)"
    if cause.proof is not None:
        how = "only narrows the difference" if narrows(cause.proof) else "did not restore parity"
        return f" (re-running with it, {cause.proof.spec}, {how})"
    if cause.status == "partly":
        return " (a re-run with it only narrows the difference)"
    return " (not verified by a re-run)"


def advice(e: Any) -> list[str]:
    """The fix or workaround of each confirmed cause that explains the divergence of explanation ``e``
    and that no fix of ``e.fixes`` already shows (with its re-run): 'Workaround: ... (not verified by a
    re-run)'. The explaining cause first; a cause only a whole-program re-run confirmed has its fix there."""
    loc = e.localization
    first = loc.lead if loc is not None else None
    main = explaining_cause(e.causes, first)
    if main is None:
        return []
    shown = {f.description for f in e.fixes}
    # Rounding noise beside a confirmed cause is not advice: "nothing is wrong" would contradict it.
    others = [c for c in e.causes if c.status in ("confirmed", "partly", "noise") and c is not main
              and not is_rerun(c) and c.cause not in ("unknown", "path-option")
              and not (c.status == "noise" and main.status != "noise")]
    lines = []
    # Reporting to a runtime's maintainers is the advice only where no change of the model verifies.
    # (a change found by the fix search: no cause's own proof, nor the model-wide transforms of jaxparity.fixes)
    proofs = [c.proof for c in e.causes if c.proof is not None]
    changed = any(f.verified and f.kind == "model change" and f not in proofs and not (f.spec or "").endswith(
        ("[fixed model]", "[well-conditioned model]")) for f in e.fixes)
    # round_like_declared(fn) re-run and changing nothing: a cause whose fix is that change carries none of it
    unmoved = any((f.spec or "").endswith("[fixed model]") and not f.verified and f.rerun is not None
                  and f.rerun.outcome == "no change" for f in e.fixes)
    for c in [main, *others]:
        if changed and c.fix and (c.fix.startswith("report") or c is main):
            continue  # a verified change of the model is the fix shown; an unverified one beside it is not
        if unmoved and c is not main and "round_like_declared" in (c.fix or ""):
            continue  # its model change was re-run above ("no change"): no advice to add
        if not c.fix or c.fix in shown or (c.proof is not None and (c.proof in e.fixes or c is main) and
                                           c.proof.spec and "[" in c.proof.spec):
            continue  # a model change that was run: its re-run's line says it
        shown.add(c.fix)
        label = fix_label(c)
        head = label[:1].upper() + label[1:] + ("" if c is main else f" for {short_title(c.title)}")
        note = fix_note(c, e.fixes)
        lines.append(f"{head}: {c.fix}{note}")
    return lines
