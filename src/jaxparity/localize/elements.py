"""Element evidence at one locally diverging op: which elements differ, what their inputs have in
common, and how far each side is from the correctly rounded result of the op on those inputs.

Both sides ran the op on the same inputs (the path's own), so every property below is a property of
the op's own data, not a guess: subnormal or non-finite inputs, exact rounding ties, values outside
a target integer type, large arguments of periodic functions, cancellation, duplicate scatter
indices, equal sort keys. The correctly rounded result is the interpreter's ``declared`` value (the
op in float64, rounded once to its declared dtype); its distance from each side says which side is
wrong. For exact ops (integers, bits, copies, comparisons) any difference is wrong code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..metrics import as_wide, dtype_class, signed_zero_flips, ulp_distance
from .trigger import CONTRACTIONS, Trigger, align, find_trigger

__all__ = ["ElementClass", "ElementEvidence", "ElementExample", "element_evidence"]

_PERIODIC = {"sin", "cos", "tan"}
_ORDERING = {"sort", "argmax", "argmin", "top_k"}  # ops whose result orders elements by value
_LARGE_PERIODIC = 2.0**13  # beyond this, argument reduction decides the result's accuracy
_CANCELLING = {"add", "sub"}
_NAN_REDUCING = {"reduce_max", "reduce_min", "reduce_sum", "reduce_prod", "cumsum", "cummax", "cummin"}
_FAR = 2**10  # ULP from the correctly rounded result beyond which a rounded op's result is wrong, not rounded otherwise
_BOTH_WITHIN = "both within the error bound of this sum (two summation orders, neither wrong)"
_CANCELLATION = 2.0**-8  # |a ± b| below this fraction of max(|a|, |b|): leading bits cancelled
# Ops whose result is defined exactly (no rounding): any difference on the same inputs is wrong code.
_EXACT = {"copy", "copy_p", "slice", "dynamic_slice", "dynamic_update_slice", "gather", "scatter", "concatenate",
          "reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "rev", "pad", "select_n", "eq", "ne",
          "lt", "le", "gt", "ge", "and", "or", "xor", "not", "shift_left", "shift_right_logical",
          "shift_right_arithmetic", "population_count", "clz", "neg", "abs", "sign", "floor", "ceil", "round",
          "max", "min", "argmax", "argmin", "sort", "iota", "bitcast_convert_type", "clamp", "is_finite"}


@dataclass(frozen=True)
class ElementClass:
    """Differing elements that share one property of their inputs or results."""

    name: str
    count: int


@dataclass(frozen=True)
class ElementExample:
    """One differing element: where, its inputs, both sides' results and the correctly rounded one."""

    index: tuple[int, ...]
    inputs: tuple[Any, ...]  # per input, its value at the element (None where the input is not per element)
    path: Any
    baseline: Any
    correct: Any | None
    implementation_defined: bool = False  # the op leaves this element's result to the implementation


@dataclass(frozen=True)
class ElementEvidence:
    classes: tuple[ElementClass, ...]  # largest first
    example: ElementExample | None
    # Over the differing elements: each side's largest distance (ULP of the output dtype) from the
    # correctly rounded result of the op on the same inputs; None where there is no reference.
    path_ulp: int | None
    baseline_ulp: int | None
    exact_op: bool  # the op's result is exact: any difference is wrong code
    # Differing elements whose result the op leaves to the implementation (a NaN/inf/out-of-range float
    # cast to an integer, the order of equal keys): not counted in path_ulp/baseline_ulp.
    implementation_defined: int = 0
    # Subnormal handling reproduced on the op's own inputs: ("path", "inputs") when the op computed
    # with subnormal inputs read as zero (DAZ) gives the path's differing elements, ("baseline",
    # "results") when flushing subnormal results to zero (FTZ) gives the baseline's, ...
    flushes: tuple[tuple[str, str], ...] = ()
    # A loop or branch (scan, while, cond): its reference rounds every op of its body, so a distance from
    # it in ULP is rounding accumulated over the body, not one rounding; the sides are judged by their
    # error against the exact (float64) result of the whole op on the same inputs instead: each side's
    # largest absolute error over the differing elements.
    composite: bool = False
    path_error: float | None = None
    baseline_error: float | None = None
    math: bool = False  # an elementary function (``MATH_FUNCTIONS``): a few ULP is its math library's own
    # The predicate over the op's inputs (and exact result) that separates the differing elements from the
    # agreeing ones (``localize.trigger``); None where none does, or every element differs.
    trigger: Trigger | None = None
    # A sum (dot, convolution, reduction): each side's largest error against the exact result over the
    # differing elements, as a multiple of one summation order's error bound there (path, baseline); at most 1:
    # a correct order of the sum, however many ULP (a sum that cancels has large ULP and no error).
    sum_bound_ratio: tuple[float, float] | None = None

    def describe(self, path: str, baseline: str, within_bound: bool = False, unrounded: str | None = None,
                 variant: bool = False) -> str:
        """One sentence: who is right on these inputs, what the differing elements share, an example.
        ``within_bound``: the op is a sum within its error bound (two orders, neither wrong);
        ``unrounded``: the side (path or baseline name) whose op read its narrow input unrounded (excess
        precision; ``LocalDivergence.unrounded_by``); ``variant``: a known
        other semantics of the op reproduces the wrong side (not wrong code: the cause names it)."""
        parts = []
        if self.composite:
            return self._describe_composite(path, baseline)
        if self.implementation_defined:
            parts.append(f"{self.implementation_defined} differing element{'s are' if self.implementation_defined > 1 else ' is'} "
                         "implementation-defined (neither side is wrong there)")
        if self.path_ulp is not None and self.baseline_ulp is not None:
            ref = "the exact result" if self.exact_op else "the correctly rounded result"
            ex = self.example
            integer = ex is not None and isinstance(ex.path, int)  # integer results: absolute differences
            nan = _NAN_ULP in (self.path_ulp, self.baseline_ulp)
            # Both ran the op on the path's own inputs to it (the baseline replayed on them): these values are
            # the op's, not the final outputs' (which also carry what the inputs already differed by)
            parts.append(f"on {path}'s inputs to this op, {_distance_words(path, self.path_ulp, ref, integer)} and "
                         f"{_distance_words(baseline, self.baseline_ulp, 'it' if nan else None, integer)}")
            # NaN or inf where the result is finite, or the reverse: said as what happened
            dropped = ex is not None and _nonfinite_value(ex.correct) and not _nonfinite_value(ex.path)
            wrong = None if within_bound or unrounded or dropped else self.wrong_side()
            if dropped:
                parts[-1] += f": {_nonfinite_words(path, ex.path, ex.correct, ex.inputs)}"
            if within_bound:
                parts[-1] += f": {_BOTH_WITHIN}"
            elif unrounded:
                parts[-1] += f": {unrounded} computed it from an input it never rounded to the declared dtype"
            elif self.sum_bound_ratio is not None and wrong is not None:
                parts[-1] += f": {self._against_sum_bound(path, baseline, variant)}"
            elif wrong in ("path", "baseline"):
                who, other = (path, baseline) if wrong == "path" else (baseline, path)
                far = max(self.path_ulp, self.baseline_ulp) >= _FAR
                if self.exact_op and variant:
                    parts[-1] += f": {who} is wrong (it computes the op another way, named below)"
                elif self.exact_op:
                    parts[-1] += f": {who} is wrong (an exact op: wrong code)"
                elif far and variant:
                    parts[-1] += f": {who} is far from it (it computes the op another way, named below)"
                elif far:
                    parts[-1] += f": {who} is wrong"
                elif self.math:  # a few ULP of an elementary function: its math library, not a wrong result
                    parts[-1] += f": {who}'s math library rounds it otherwise, {other}'s correctly"
                else:  # a few ULP: another rounding of the same math (fused, reassociated), not a wrong result
                    parts[-1] += f": {who} departs from the op's declared rounding, {other} keeps it"
                value = None if ex is None else ex.path if wrong == "path" else ex.baseline
                if ex is not None and _nonfinite_value(value) != _nonfinite_value(ex.correct):
                    parts[-1] += f": {_nonfinite_words('it', value, ex.correct, ex.inputs)}"
            elif wrong == "both":
                near = min(self.path_ulp, self.baseline_ulp)
                if near >= _FAR:
                    parts[-1] += ": both are far from it"
                elif max(self.path_ulp, self.baseline_ulp) < _FAR:  # the same threshold as a wrong side's
                    parts[-1] += ": both are near it, neither far off (two approximations of the op)"
                else:
                    who, other = (path, baseline) if self.path_ulp > self.baseline_ulp else (baseline, path)
                    parts[-1] += f": {who} is far from it, {other} near it"
        for side, what in self.flushes:
            who = path if side == "path" else baseline
            parts.append(f"where a subnormal is involved, {who}'s values are reproduced with subnormal {what} "
                         f"flushed to zero ({'DAZ' if what == 'inputs' else 'FTZ'})")
        if self.trigger is not None:
            parts.append(self.trigger.words())
        if self.classes:
            parts.append("the differing elements have " + ", ".join(f"{c.count} × {c.name}" for c in self.classes))
        ex = self.example
        if ex is not None:
            ins = ", ".join("·" if v is None else _fmt(v) for v in ex.inputs)
            some_input = any(v is not None for v in ex.inputs)
            label = ("JAX's reference" if ex.implementation_defined else "exact" if self.exact_op
                     else "correctly rounded")
            correct = f", {label} {_fmt(ex.correct)}" if ex.correct is not None else ""
            if unrounded in (path, baseline):  # that side read another input than the one shown (said before)
                other = baseline if unrounded == path else path
                mine, theirs = (ex.path, ex.baseline) if unrounded == path else (ex.baseline, ex.path)
                gave = (f"rounded inputs ({ins}) give {other} {_fmt(theirs)}" if some_input
                        else f"{other} {_fmt(theirs)} from rounded inputs")
                parts.append(f"e.g. element {list(ex.index)}: {gave}{correct}; {unrounded} {_fmt(mine)}")
            elif some_input:
                parts.append(f"e.g. element {list(ex.index)}: inputs ({ins}) give {path} {_fmt(ex.path)}, {baseline} "
                             f"{_fmt(ex.baseline)}{correct}")
            else:  # no one input element gives it (a dot, a convolution, a reduction): its values alone
                parts.append(f"e.g. element {list(ex.index)}: {path} {_fmt(ex.path)}, {baseline} "
                             f"{_fmt(ex.baseline)}{correct}")
        return "; ".join(parts)

    def as_accurate(self) -> bool | None:
        """For a loop or branch: is the path's error against the exact result of the op on the same inputs
        at most twice the baseline's (another rounding of the same math, as accurate, whatever the ULP
        distance between the two)? None where it cannot be said (not a loop, or no exact result)."""
        if not self.composite or self.path_error is None or self.baseline_error is None:
            return None
        return self.path_error <= 2 * self.baseline_error

    def _against_sum_bound(self, path: str, baseline: str, variant: bool) -> str:
        """Who is wrong at a sum, judged by each side's error against the exact sum and the error bound of one
        summation order (not by ULP: a sum that cancels is many ULP from its correctly rounded result and
        within its bound)."""
        assert self.sum_bound_ratio is not None
        p, b = self.sum_bound_ratio
        how = " (it computes the op another way, named below)" if variant else ""
        if p <= 1 and b <= 1:
            return _BOTH_WITHIN
        if p > 1 and b > 1:
            return f"both are beyond the error bound of this sum ({_times(min(p, b))} or more){how}"
        who, other, r = (path, baseline, p) if p > 1 else (baseline, path, b)
        return f"{who} is {_times(r)} beyond the error bound of this sum{how}, {other} within it"

    def _describe_composite(self, path: str, baseline: str) -> str:
        parts = []
        if self.path_error is not None and self.baseline_error is not None:
            said = (f"against the exact result of the whole op on the same inputs (float64), {path}'s error is up to "
                    f"{self.path_error:.3g} and {baseline}'s up to {self.baseline_error:.3g}")
            if self.as_accurate():
                said += (": as accurate as each other (its body rounds at every op, each side in its own way; "
                         "neither is wrong on this evidence)" if self.baseline_error <= 2 * self.path_error else
                         f": {path} is the more accurate")
            else:
                said += f": {path} is the less accurate, by {self.path_error / max(self.baseline_error, 1e-300):.3g}×"
            parts.append(said)
        if self.classes:
            parts.append("the differing elements have " + ", ".join(f"{c.count} × {c.name}" for c in self.classes))
        ex = self.example
        if ex is not None:
            correct = f", declared (its body's ops each rounded) {_fmt(ex.correct)}" if ex.correct is not None else ""
            parts.append(f"e.g. element {list(ex.index)}: {path} {_fmt(ex.path)}, {baseline} {_fmt(ex.baseline)}{correct}")
        return "; ".join(parts)

    def wrong_side(self) -> str | None:
        """"path" or "baseline" when one side is far from correct and the other close (within 1 ULP
        for a rounded op, exactly for an exact one); "both" when both are far; else None. A loop or
        branch has no correctly rounded result to be far from: None (``as_accurate`` judges it)."""
        if self.composite or self.path_ulp is None or self.baseline_ulp is None:
            return None
        close = 0 if self.exact_op else 1
        p_ok, b_ok = self.path_ulp <= close, self.baseline_ulp <= close
        if p_ok and not b_ok:
            return "baseline"
        if b_ok and not p_ok:
            return "path"
        if not p_ok and not b_ok and min(self.path_ulp, self.baseline_ulp) > 4:
            return "both"
        return None


_NAN_ULP = np.iinfo(np.int64).max  # the distance of a NaN against a number (see ``_max_ulp``)
# Elementary functions: no implementation is required to round them correctly (a math library's few ULP).
MATH_FUNCTIONS = frozenset({
    "exp", "exp2", "expm1", "log", "log1p", "sin", "cos", "tan", "tanh", "logistic", "atan2", "asin", "acos", "atan",
    "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erf_inv", "lgamma", "digamma", "pow", "sqrt", "rsqrt",
    "cbrt", "igamma", "igammac", "bessel_i0e", "bessel_i1e"})
# Math functions of one float input: kernels a runtime approximates its own way (``mechanism.profile``).
UNARY_MATH = MATH_FUNCTIONS - {"atan2", "pow", "igamma", "igammac", "bessel_i0e", "bessel_i1e"}
# Ops that run a body of other ops (loops and branches): no one rounding to be correct to.
_COMPOSITE = frozenset({"scan", "while", "cond"})


def _times(r: float) -> str:
    """'3.2×', '7,000×'."""
    return "∞×" if r == float("inf") else f"{r:.2g}×" if r < 10 else f"{round(r):,}×"


def _distance_words(who: str, ulp: int, ref: str | None, integer: bool) -> str:
    """'jit is up to 5 ULP from <ref>' (``ref`` None: 'eager up to 5 ULP', after a first side); integers by their
    absolute difference; a NaN against a number said so."""
    if ulp == _NAN_ULP:
        return f"{who} disagrees with {ref or 'it'} on NaN (a NaN against a number)"
    if integer:
        return f"{who} is off by {ulp} from {ref}" if ref else f"{who} by {ulp}"
    up = "up to " if ulp else ""  # the worst element, not the example's
    return f"{who} is {up}{ulp} ULP from {ref}" if ref else f"{who} {up}{ulp} ULP"


def _nonfinite_words(who: str, value: Any, correct: Any, inputs: tuple[Any, ...]) -> str:
    """What a side did where it or the correct result is NaN or inf: it drops the NaN, returns a
    finite value where the op overflows (finite inputs), returns NaN where the result is a number..."""
    known = [v for v in inputs if v is not None]
    if _is_nan(correct):
        if not known or any(_is_nan(v) for v in known):
            return f"{who} drops the NaN"
        return f"{who} returns a number where the result is NaN (an invalid operation such as 0 × inf)"
    if _nonfinite_value(correct):
        if not known:
            return f"{who} returns a finite value where the result is {_fmt(correct)}"
        if any(_nonfinite_value(v) for v in known):
            return f"{who} returns a finite value where the result is {_fmt(correct)}, from an infinite input"
        if any(not isinstance(v, (list, str)) and v == 0 for v in known):
            return f"{who} returns a finite value where the result is {_fmt(correct)}, at a zero input"
        return f"{who} returns a finite value where the declared op overflows to {_fmt(correct)}"
    return f"{who} returns {'NaN' if _is_nan(value) else _fmt(value)} where the result is a number"


def _is_nan(v: Any) -> bool:
    return (isinstance(v, str) and v.lower() == "nan") or (isinstance(v, float) and v != v)


def _nonfinite_value(v: Any) -> bool:
    """A reported value that is NaN or inf (floats, or their strings in JSON-safe form)."""
    if isinstance(v, str):
        return v.lower() in ("nan", "inf", "-inf", "infinity", "-infinity")
    return isinstance(v, float) and (v != v or v in (float("inf"), float("-inf")))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.9g}"
    if isinstance(v, list) and len(v) == 2:
        return f"{v[0]:.9g}{v[1]:+.9g}j"
    return str(v)


def _py(x: Any) -> Any:
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return [float(x.real), float(x.imag)]
    if x.dtype.kind in "iub":
        return int(x) if x.dtype.kind != "b" else bool(x)
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def _max_ulp(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> int:
    u = ulp_distance(a, b)
    u = np.where(u < 0, np.iinfo(np.int64).max, u)
    return int(u[mask].max(initial=0))


def _subnormal(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    if dtype_class(x.dtype) != "float":
        return np.zeros(x.shape, bool)
    tiny = float(ml_dtypes.finfo(x.dtype).smallest_normal)
    with np.errstate(invalid="ignore"):
        v = np.abs(x.astype(np.float64))
    return (v > 0) & (v < tiny)


def _nonfinite(x: np.ndarray) -> np.ndarray:
    if dtype_class(x.dtype) not in ("float", "complex"):
        return np.zeros(x.shape, bool)
    return ~np.isfinite(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))


def _ties(exact: np.ndarray | None, dtype: np.dtype) -> np.ndarray | None:
    """Where the float64 result lies exactly halfway between two neighbouring values of ``dtype``."""
    from ..rounding import round_to_dtype

    dtype = np.dtype(dtype)
    if exact is None or dtype_class(dtype) != "float" or dtype.itemsize > 4:
        return None
    with np.errstate(all="ignore"):
        r = round_to_dtype(exact, dtype)
        r64 = r.astype(np.float64)
        # The neighbour on the exact value's side, one step in the sign-magnitude bit pattern.
        step = np.where(exact > r64, 1, -1) * np.where(np.signbit(r64), -1, 1)
        unsigned = f"u{dtype.itemsize}"
        other = (r.view(unsigned).astype(np.int64) + step).astype(unsigned).view(dtype)
        mid = (r64 + other.astype(np.float64)) / 2
        return np.isfinite(exact) & (exact != r64) & (exact == mid)


def _per_element(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """An input's value at each output element, where it has one (same shape, or a scalar)."""
    if x.shape == shape:
        return x
    if x.size == 1:
        return np.broadcast_to(x.reshape(()), shape)
    return None


_SIGN_OF_ZERO = {"atan2", "div", "copysign", "sign", "rsqrt", "log", "pow", "sort", "max", "min"}
SIGNED_ZERO = "zeros of the other sign (+0 against -0: 0 ULP apart, another value to atan2, 1/x, copysign)"


def element_evidence(op: Any, ins: list[Any], path_out: np.ndarray, base_out: np.ndarray,
                     correct: np.ndarray | None, exact: np.ndarray | None, position: int = 0,
                     sum_bound: np.ndarray | None = None) -> ElementEvidence:
    """Evidence on the elements where ``path_out`` and ``base_out`` differ (the op's output number
    ``position``). ``correct``: the op's correctly rounded result on these inputs (declared dtype),
    ``exact``: its float64 value; ``sum_bound``: for a sum, the bound on one summation order's error
    against ``exact``, per element."""
    name = op.info.primitive
    p, b = np.asarray(path_out), np.asarray(base_out)
    flips = signed_zero_flips(p, b)
    differ = (ulp_distance(p, b) != 0) | flips
    shape = p.shape
    arrays = [np.asarray(x) for x in ins]
    at = [_per_element(x, shape) for x in arrays]
    classes: dict[str, int] = {}

    def count(label: str, mask: np.ndarray | None) -> None:
        if mask is not None:
            n = int(np.count_nonzero(mask & differ))
            if n:
                classes[label] = n

    if name in _ORDERING or name in CONTRACTIONS:  # output i reads anywhere in the input, or a row of it
        at = [None] * len(arrays)
    if (name in _ORDERING or name in _NAN_REDUCING) and arrays and dtype_class(arrays[0].dtype) == "float" \
            and np.any(np.isnan(arrays[0].astype(np.float64))):
        # A NaN among the values ordered or reduced: the op's declared result depends on it (max and
        # argmax take NaN as the largest; a sum becomes NaN).
        classes["NaN or inf inputs"] = int(np.count_nonzero(differ))
    floats_in = [a for a in at if a is not None and dtype_class(a.dtype) == "float"]
    if floats_in:
        count("subnormal inputs", np.logical_or.reduce([_subnormal(a) for a in floats_in]))
        count("NaN or inf inputs", np.logical_or.reduce([_nonfinite(a) for a in floats_in]))
        if name in _SIGN_OF_ZERO:  # ops whose result depends on a zero's sign
            count("-0 inputs (the op's result depends on the zero's sign)",
                  np.logical_or.reduce([(as_wide(a) == 0) & np.signbit(as_wide(a)) for a in floats_in]))
    count(SIGNED_ZERO, flips)
    results = [p, b] + ([np.asarray(correct)] if correct is not None and np.asarray(correct).shape == shape else [])
    count("subnormal results", np.logical_or.reduce([_subnormal(r) for r in results]))
    count("NaN or inf results", np.logical_or.reduce([_nonfinite(r) for r in results]))
    if exact is not None and np.asarray(exact).shape == shape:
        count(f"exact rounding ties (the exact result lies halfway between two {p.dtype} values)",
              _ties(np.asarray(exact, np.float64), p.dtype))
    undefined = np.zeros(shape, bool)  # elements whose result the op leaves to the implementation
    if name == "convert_element_type" and dtype_class(p.dtype) in ("int", "uint") and at and at[0] is not None \
            and dtype_class(at[0].dtype) == "float":
        info = np.iinfo(p.dtype)
        with np.errstate(invalid="ignore"):
            v = at[0].astype(np.float64)
            outside = ~np.isfinite(v) | (v < info.min) | (v >= float(info.max) + 1)
        count(f"outside the range of {p.dtype} (NaN, inf or too large)", outside)
        undefined |= outside
    if name in ("div", "rem") and len(at) == 2 and all(a is not None for a in at) \
            and dtype_class(p.dtype) in ("int", "uint"):
        # StableHLO leaves an integer x / 0 and x % 0 (and the signed MIN / -1 overflow) to the
        # implementation: XLA gives -1 (all bits set) and x, numpy and ONNX's reference 0, others trap.
        from ..interpreter.variants import division_undefined

        zero, overflow = division_undefined(at[0], at[1], p.dtype)
        count("division by zero (x / 0 and x % 0 are implementation-defined)", zero)
        count(f"overflow (the smallest {p.dtype} divided by -1)", overflow)
        undefined |= zero | overflow
    if name == "round" and at and at[0] is not None and dtype_class(at[0].dtype) == "float":
        with np.errstate(invalid="ignore"):
            v = at[0].astype(np.float64)
        count("halfway inputs (x.5: the rounding method decides)", np.abs(v - np.trunc(v)) == 0.5)
    if name in _PERIODIC and at and at[0] is not None:
        with np.errstate(invalid="ignore"):
            count(f"large arguments of {name} (|x| > {_LARGE_PERIODIC:g})",
                  np.abs(at[0].astype(np.float64)) > _LARGE_PERIODIC)
    if name in _CANCELLING and len(at) == 2 and all(a is not None for a in at) and exact is not None:
        with np.errstate(invalid="ignore"):
            big = np.maximum(np.abs(at[0].astype(np.float64)), np.abs(at[1].astype(np.float64)))
            count("cancellation (|result| << |operands|)",
                  np.abs(np.asarray(exact, np.float64)) < _CANCELLATION * big)
    if name.startswith("scatter") and len(arrays) > 1:
        idx = arrays[1].reshape(-1, arrays[1].shape[-1]) if arrays[1].ndim > 1 else arrays[1].reshape(-1, 1)
        dup = len(idx) - len(np.unique(idx, axis=0))
        if dup:
            classes[f"duplicate scatter indices ({dup} repeated)"] = int(np.count_nonzero(differ))
    subnormal_keys = False
    if name in _ORDERING and arrays and dtype_class(arrays[0].dtype) in ("float", "int", "uint", "bool"):
        keys = arrays[0].astype(np.float64) + 0.0  # -0 and +0 compare equal here
        axis_keys = np.moveaxis(keys, -1, 0).reshape(keys.shape[-1] if keys.ndim else 1, -1) if keys.ndim else keys
        tied = keys.ndim and any(len(np.unique(col[~np.isnan(col)])) < np.count_nonzero(~np.isnan(col))
                                 for col in axis_keys.T)  # NaN keys are not ties: see the NaN class
        if tied:
            zeros = bool(np.any(np.signbit(arrays[0].astype(np.float64)) & (arrays[0] == 0)))
            # A stable sort (jnp.sort, jnp.argsort), argmax/argmin (the first) and top_k (the lower
            # index) define the order of equal keys; only an unstable sort leaves it to the runtime.
            defined = name != "sort" or bool(op.eqn.params.get("is_stable", False)) if hasattr(op, "eqn") else True
            label = ("equal keys" + (" and ±0" if zeros else "") +
                     (" (a stable order is declared)" if defined else " (their order among themselves)"))
            classes[label] = int(np.count_nonzero(differ))
            if not defined:
                undefined |= differ
        if np.any(_subnormal(arrays[0])):
            subnormal_keys = True
            classes["subnormal keys (they compare equal to 0 where subnormals are read as zero)"] = \
                int(np.count_nonzero(differ))
    ordered = tuple(ElementClass(k, v) for k, v in sorted(classes.items(), key=lambda kv: -kv[1]))

    example = None
    if differ.any():
        u = ulp_distance(p, b)
        flat = int(np.argmax(np.where(differ, np.where(u < 0, np.iinfo(np.int64).max, u), -1)))
        idx = np.unravel_index(flat, shape) if shape else ()
        c = np.asarray(correct) if correct is not None else None
        example = ElementExample(tuple(int(i) for i in idx),
                                 tuple(None if a is None else _py(a[idx]) for a in at),
                                 _py(p[idx]), _py(b[idx]),
                                 _py(c[idx]) if c is not None and c.shape == shape else None,
                                 bool(undefined[idx]))
    exact_op = name in _EXACT or dtype_class(p.dtype) in ("int", "uint", "bool")
    path_ulp = base_ulp = None
    defined = differ & ~undefined
    if correct is not None and np.asarray(correct).shape == shape and np.asarray(correct).dtype == p.dtype \
            and defined.any():
        c = np.asarray(correct)
        path_ulp, base_ulp = _max_ulp(p, c, defined), _max_ulp(b, c, defined)
    flushes: tuple[tuple[str, str], ...] = ()
    if subnormal_keys:
        flushes = _flushes(op, arrays, p, b, correct, differ, position)
    elif "subnormal inputs" in classes or "subnormal results" in classes:
        touched = np.logical_or.reduce([_subnormal(a) for a in floats_in + results]) if floats_in else \
            np.logical_or.reduce([_subnormal(r) for r in results])
        flushes = _flushes(op, arrays, p, b, correct, differ & touched, position)
    composite = name in _COMPOSITE
    path_error = base_error = None
    if composite and exact is not None and np.asarray(exact).shape == shape and dtype_class(p.dtype) == "float":
        e = np.asarray(exact, np.float64)
        finite = differ & np.isfinite(e) & np.isfinite(p.astype(np.float64)) & np.isfinite(b.astype(np.float64))
        if finite.any():
            path_error = float(np.max(np.abs(p.astype(np.float64) - e)[finite]))
            base_error = float(np.max(np.abs(b.astype(np.float64) - e)[finite]))
    beyond: tuple[float, float] | None = None
    if sum_bound is not None and exact is not None and np.shape(exact) == shape == np.shape(sum_bound):
        e, bnd = np.asarray(exact, np.float64), np.asarray(sum_bound, np.float64)
        finite = differ & np.isfinite(e) & np.isfinite(p.astype(np.float64)) & np.isfinite(b.astype(np.float64))
        if finite.any():
            errs = [np.abs(x.astype(np.float64) - e)[finite] for x in (p, b)]
            with np.errstate(divide="ignore", invalid="ignore"):  # a zero bound: exact, or infinitely beyond it
                ratio = [float(np.max(np.where(bnd[finite] > 0, err / bnd[finite], np.where(err > 0, np.inf, 0.0))))
                         for err in errs]
            beyond = (ratio[0], ratio[1])
    trigger = None
    if not composite and name not in _ORDERING:  # an ordering's element i comes from anywhere in its input
        try:
            trigger = find_trigger([align(a, shape, name) for a in arrays], differ,
                                   exact if exact is not None and np.shape(exact) == shape else None, p.dtype)
        except Exception:  # evidence, never the end of the explanation
            trigger = None
    return ElementEvidence(ordered, example, path_ulp, base_ulp, exact_op, int(np.count_nonzero(differ & undefined)),
                           flushes, composite, path_error, base_error, name in MATH_FUNCTIONS, trigger,
                           beyond)


def _flush(x: np.ndarray) -> np.ndarray:
    """Subnormal values of a float array replaced by zero of the same sign."""
    x = np.asarray(x)
    if dtype_class(x.dtype) != "float":
        return x
    return np.where(_subnormal(x), np.copysign(np.zeros((), x.dtype), x.astype(np.float64)).astype(x.dtype), x)


def _flushes(op: Any, ins: list[np.ndarray], p: np.ndarray, b: np.ndarray, correct: np.ndarray | None,
             differ: np.ndarray, position: int = 0) -> tuple[tuple[str, str], ...]:
    """Which side's values at the differing elements that touch a subnormal (``differ``) the op
    reproduces with subnormal inputs read as zero (DAZ), or with its subnormal results flushed to zero
    (FTZ): run on the op's own inputs, not guessed."""
    eqn = getattr(op, "eqn", None)
    found: list[tuple[str, str]] = []
    candidates = []
    if eqn is not None:
        from ..interpreter import evaluate_eqn

        try:
            daz = np.asarray(evaluate_eqn(eqn, [_flush(x) for x in ins], mode="declared")[position])
            candidates.append(("inputs", daz))
        except Exception:
            pass
    if correct is not None and np.asarray(correct).shape == p.shape:
        candidates.append(("results", _flush(np.asarray(correct))))
    reference = np.asarray(correct) if correct is not None and np.asarray(correct).shape == p.shape else None
    for what, got in candidates:
        if got.shape != p.shape or got.dtype != p.dtype:
            continue
        if reference is not None and np.all(ulp_distance(got[differ], reference[differ]) == 0):
            continue  # flushing changes nothing here: a side that matches it is simply right
        for side, out in (("path", p), ("baseline", b)):
            if np.all(ulp_distance(got[differ], out[differ]) == 0) and (side, what) not in found:
                found.append((side, what))
    return tuple(found)
