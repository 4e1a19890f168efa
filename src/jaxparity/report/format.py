"""Words and numbers shared by every reporter, so the terminal, HTML and messages say the same."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..metrics import LeafDiff, dtype_class
from ..result import ArrayInfo, ComparisonResult, LeafResult, PathResult

__all__ = ["HUGE_ULP", "HUGE_ULP_NOTE", "arrays_line", "fmt", "leaf_line", "path_line", "producer",
           "required_tolerance", "summary_line", "ulp_text", "value_text", "values_text"]


def fmt(x: float | None) -> str:
    if x is None:
        return "—"
    if x == 0:
        return "0"
    return f"{x:.3g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.2e}"


def required_tolerance(leaf: LeafResult) -> str:
    """'--ulp 143 or --atol 8.6e-04 or --rtol 6e-04': the smallest settings that would pass."""
    d = leaf.diff
    if d is None or d.required_ulp is None:
        return "no tolerance passes a NaN against a number"
    parts = [f"--ulp {d.required_ulp}", f"--atol {d.required_atol:.2g}"]
    if d.required_rtol is not None and d.required_rtol != float("inf"):
        parts.append(f"--rtol {d.required_rtol:.2g}")
    return " or ".join(parts)


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
    """The distance in the units of the dtype's class (see ``metrics.dtype_class``)."""
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
    text = f"{leaf.name}: {d.n_differ}/{d.size} elements differ, {_how_far(d)}"
    if leaf.rule:
        text += f" ({leaf.rule})"
    if d.nan_mismatch:
        text += f", {d.nan_mismatch} NaN against a number"
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
        return f"{p.verdict}: {p.message}"
    worst = p.worst
    if p.spec == "f64" and worst is not None and worst.diff is not None:
        d = worst.diff
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
    tolerance = required_tolerance(worst)
    text = f"differs from {baseline}{role}: {text}; " + (f"would pass with {tolerance}" if tolerance.startswith("--")
                                                          else tolerance)
    if worst.closer_to_f64 == "path":
        text += f"; closer to the f64 ideal than {baseline}"
    elif worst.closer_to_f64 == "baseline":
        text += f"; {baseline} is closer to the f64 ideal"
    return text


def summary_line(r: ComparisonResult) -> str:
    base = next((p for p in r.paths if p.spec == r.baseline), None)
    if base is not None and base.status != "ok":
        why = (base.message or base.status).strip().splitlines()[0] if (base.message or base.status) else base.status
        others = [p.spec for p in r.paths if p.spec != r.baseline and p.status == "ok"]
        ran = f"; {', '.join(others)} ran but could not be compared" if others else ""
        return (f"the baseline {r.baseline} failed ({base.status}: {why[:200]}): nothing was compared with it{ran}; "
                "choose another --baseline")
    gated = [p for p in r.paths if p.gated]
    failing = [p.spec for p in gated if not p.passed]
    over = f" on all {r.samples} samples" if r.samples > 1 else ""
    if not failing:
        return f"all {len(gated)} compared paths agree with {r.baseline}{over} ({r.tolerance.describe()})"
    if r.samples > 1:
        return (f"{len(failing)} of {len(gated)} paths do not agree with {r.baseline} on all {r.samples} "
                f"samples ({r.tolerance.describe()}): {', '.join(failing)}")
    return f"{len(failing)} of {len(gated)} paths do not agree with {r.baseline} ({r.tolerance.describe()}): {', '.join(failing)}"


def arrays_line(arrays: Sequence[ArrayInfo], limit: int = 6) -> str:
    """``name dtype[shape]`` for each array; beyond ``limit`` arrays, the ones under a common
    ``a/b/`` prefix (a model's parameters) are counted instead of listed."""
    def one(a: ArrayInfo) -> str:
        return f"{a.name} {a.dtype}[{','.join(map(str, a.shape))}]"

    if len(arrays) <= limit:
        return ", ".join(one(a) for a in arrays)
    groups: dict[str, list[ArrayInfo]] = {}
    for a in arrays:
        parts = a.name.split("/")
        groups.setdefault("/".join(parts[:2]) if len(parts) > 2 else a.name, []).append(a)
    shown = []
    for prefix, members in groups.items():
        if len(members) == 1:
            shown.append(one(members[0]))
            continue
        values = sum(math.prod(a.shape) for a in members)
        dtypes = "/".join(sorted({a.dtype for a in members}))
        shown.append(f"{prefix}/… {len(members)} arrays ({values:,} {dtypes} values)")
    return ", ".join(shown)


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
