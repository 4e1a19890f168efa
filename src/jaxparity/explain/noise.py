"""After the stages, across paths: is a path's difference from the baseline no more than correct
implementations of the program's ops may differ by? Then it is rounding noise, and the default gate
passes it.

"Correct" is a bound per op, not one implementation's error: each op's result may be off by what its
implementations are allowed to be (an add, a multiply or a division by a unit roundoff of its dtype, for the
fused multiply-adds and reciprocals compilers use; a math function by a few; a sum, dot product or
convolution of n terms by log2(n) + 1 roundoffs of each term, for the orders it may be summed in; in float32
at least: a narrow result is computed in float32 and rounded once where the program declares it, alike on
every correct implementation, so a bfloat16 accumulator or a rounding skipped is no noise). That
error is drawn at random per element and per op, the program is run in float64 with it (``spread``), and
the root mean square distance from the ideal over a few draws is the typical error of one correct
implementation there (σ, per element). Two of them differ by √2·σ typically, and by ``z``·√2·σ at the worst
of N elements (z = √(2 ln N) + 2: the largest of N normal deviates, with room for an estimate from few
draws); a path within that of the baseline, plus one ULP for the last rounding, is noise —
unless the program says otherwise: an output that is not a float, a NaN against a number, a difference of
a sixteenth of the values or more (a threshold that rounding flipped: a real difference in what the model
says, however it arose), a narrow rounding one side skipped, or a confirmed cause that is not rounding
(``Cause.rounding``).

Ops inside loops are run whole in float64, unperturbed: the spread of a recurrent model is then too small,
never too large, and a real divergence is never called noise for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..localize.elements import MATH_FUNCTIONS
from ..metrics import ROUNDING_SHARE
from ..localize.program import FlatProgram, Op
from ..pytree import host
from ..rounding import is_float_dtype
from .causes import CAUSES

__all__ = ["Rounding", "rounding_only", "spread", "within_rounding"]

TRIALS = 8  # draws of the ops' errors; the spread is their root mean square distance from the ideal
MAX_VALUES = 50_000_000  # inputs (weights included) beyond which the bound is not computed (TRIALS float64 runs)
MATH_ROUNDOFFS = 4  # a math function's allowed error, in unit roundoffs (accurate libraries: 1 to 4 ULP)

_ROUNDED = frozenset({"add", "sub", "mul", "div", "square", "integer_pow", "sqrt", "rsqrt", "cbrt"})
_SUMS = frozenset({"reduce_sum", "dot_general", "conv_general_dilated", "cumsum", "reduce_window_sum"})
_ROUNDING_CAUSES = frozenset(c.id for c in CAUSES if c.rounding) | {"unknown", "other-lowering"}


@dataclass(frozen=True)
class Rounding:
    """The path is within what correct implementations of the program's ops may differ by."""

    share: float  # the largest difference, as a share of what correct implementations may differ by there (<= 1)
    gap: float  # that difference (abs), at the element where the share is largest
    bound: float  # what correct implementations may differ by at that element (abs)
    output: int  # the output leaf it is in
    largest: float = 0.0  # the largest difference over that output (abs)

    def words(self, baseline: str, name: str = "out") -> str:
        return (f"rounding noise: {name} differs from {baseline} by up to {max(self.largest, self.gap):.3g}, at every "
                "element within what correct implementations of the program's ops may differ by there (each op's "
                f"error bound propagated to the outputs; at most {self.share:.0%} of it: {self.gap:.3g} where they "
                f"may differ by {self.bound:.3g}), so the default gate passes it (--ulp 0 asks for bit for bit)")


def spread(program: FlatProgram, flat_args: Sequence[Any], trials: int = TRIALS) -> list[np.ndarray | None] | None:
    """Per output leaf, per element: the typical distance of one correct implementation from the float64 ideal
    (σ; None for outputs that are not floats); None where the program cannot be run in float64 here."""
    from ..localize.values import apply_for

    if sum(int(np.size(a)) for a in flat_args) > MAX_VALUES:
        return None  # a model this large is not run TRIALS more times in float64: nothing is called noise
    exact = apply_for("f64")
    args = [host(a) for a in flat_args]
    try:
        ideal = _evaluate(program, args, exact)
    except Exception:  # the interpreter cannot run it: no bound, so nothing is called noise
        return None
    rng = np.random.default_rng(0)
    squares: list[np.ndarray | None] = [np.zeros(np.shape(x)) if _floating(x) else None for x in ideal]

    def perturbed(op: Op, ins: list[Any]) -> Sequence[Any]:
        name = op.info.primitive
        outs = [getattr(program.avals.get(v), "dtype", None) if v is not None else None for v in op.outputs]
        if name in _SUMS and outs and outs[0] is not None and is_float_dtype(outs[0]):
            # accumulated in float32 at least (a narrow result rounds once, at the end: below)
            k = 1 + math.log2(max(_terms(op, ins), 1))
            ins = [_jitter(x, k * _latitude(outs[0]), rng) if _floating(x) else x for x in ins]
        results = list(exact(op, ins))
        k = 1.0 if name in _ROUNDED or name in _SUMS else MATH_ROUNDOFFS if name in MATH_FUNCTIONS else 0.0
        if k:
            results = [_jitter(r, k * _latitude(d), rng) if d is not None and is_float_dtype(d) and _floating(r)
                       else r for r, d in zip(results, outs)]
        return results

    for _ in range(trials):
        try:
            got = _evaluate(program, args, perturbed)
        except Exception:
            return None
        for j, (g, i) in enumerate(zip(got, ideal)):
            if squares[j] is not None:
                with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: not a gap, left out below
                    gap = np.asarray(g, np.float64) - np.asarray(i, np.float64)
                squares[j] = squares[j] + np.where(np.isfinite(gap), gap, 0.0) ** 2
    return [None if q is None else np.sqrt(q / trials) for q in squares]


_LAST: dict[tuple, Any] = {}  # the spread of the last program and inputs judged: every path of one case shares it


def rounding_only(program: FlatProgram | None, flat_args: Sequence[Any], causes: Sequence[Any], localization: Any,
                  path_out: Sequence[np.ndarray], base_out: Sequence[np.ndarray]) -> Rounding | None:
    """Where the path differs from the baseline by rounding only (see the module docstring): how far, against
    what correct implementations may differ by; None where it does not, or that cannot be told."""
    if program is None or not _may_be_noise(causes, localization):
        return None
    key = (id(program), tuple(id(a) for a in flat_args))
    if key not in _LAST:
        _LAST.clear()
        _LAST[key] = spread(program, flat_args)
    far = _LAST[key]
    return None if far is None else _within(path_out, base_out, far)


def within_rounding(program: FlatProgram | None, flat_args: Sequence[Any], outs: Sequence[np.ndarray],
                    base: Sequence[np.ndarray]) -> Rounding | None:
    """Are ``outs`` within what correct implementations of the program's ops may differ from ``base`` by (a fix's
    re-run that leaves only rounding)? Judged on the outputs alone."""
    return rounding_only(program, flat_args, (), None, outs, base)


def _may_be_noise(causes: Sequence[Any], loc: Any) -> bool:
    """Nothing in the explanation says the path departs from the program: no confirmed cause other than a
    rounding one, no narrow rounding skipped by either side."""
    if any(_departs(c) for c in causes):
        return False
    return not (loc is not None and any(d.unrounded is not None for d in loc.local))


def _departs(cause: Any) -> bool:
    """A cause that says the path departs from the program: confirmed, or a re-run that narrowed the largest
    difference (one that only changed how many elements differ, the largest as large, explains no magnitude).
    That the paths differ in an option (``path-option``) says where, not that the option's effect is more than
    rounding: what the option does is judged here like any other difference."""
    if cause.cause in _ROUNDING_CAUSES or cause.cause == "path-option":
        return False
    if cause.status == "partly":
        return cause.rerun is None or cause.rerun.shrinks
    return cause.status == "confirmed"


def _within(outs: Sequence[np.ndarray], base: Sequence[np.ndarray], far: Sequence[np.ndarray | None]) -> Rounding | None:
    worst: Rounding | None = None
    for j, (x, b, f) in enumerate(zip(outs, base, far)):
        x, b = np.asarray(x), np.asarray(b)
        if x.shape != b.shape:
            return None
        if f is None or not is_float_dtype(b.dtype):
            if not np.array_equal(x, b):
                return None  # a discrete output: it has no rounding to differ by
            continue
        x64, b64 = x.astype(np.float64), b.astype(np.float64)
        if not np.array_equal(np.isnan(x64), np.isnan(b64)) or not np.array_equal(np.isinf(x64), np.isinf(b64)):
            return None  # a NaN or an inf against a number is no rounding (nor is inf a few ULP from the largest float)
        both = ~np.isnan(x64)
        if not np.array_equal(x64[~np.isfinite(x64) & both], b64[~np.isfinite(x64) & both]):
            return None  # an inf against a number, or the other sign
        fin = both & np.isfinite(x64)
        gap = np.abs(x64[fin] - b64[fin])
        if gap.size == 0:
            continue
        z = math.sqrt(2 * math.log(max(gap.size, 2))) + 2
        allowed = z * math.sqrt(2) * np.broadcast_to(f, x.shape)[fin] + _ulp(b[fin])
        if np.any(gap > allowed) or gap.max() > ROUNDING_SHARE * float(np.abs(b64[fin]).max()):
            return None  # beyond the ops' error bounds, or a share of the values (a threshold flipped)
        k = int(np.argmax(gap / allowed))
        if worst is None or gap[k] / allowed[k] > worst.share:
            worst = Rounding(float(gap[k] / allowed[k]), float(gap[k]), float(allowed[k]), j, float(gap.max()))
    return worst


def _evaluate(program: FlatProgram, args: list[Any], apply: Any) -> list[Any]:
    """The program's outputs, each op computed by ``apply``, every value dropped after its last use (a model's
    activations in float64 are never all held at once)."""
    from ..localize.program import Literal

    last: dict[int, int] = {}
    for i, op in enumerate(program.ops):
        for x in op.inputs:
            if not isinstance(x, Literal):
                last[x] = i
    keep = {x for x in program.out_ids if not isinstance(x, Literal)}
    values: dict[int, Any] = dict(program.consts)
    values.update(zip(program.arg_ids, args))
    for i, op in enumerate(program.ops):
        ins = [x.val if isinstance(x, Literal) else values[x] for x in op.inputs]
        for vid, out in zip(op.outputs, apply(op, ins)):
            if vid is not None:
                values[vid] = out
        for x in op.inputs:
            if not isinstance(x, Literal) and last.get(x) == i and x not in keep:
                values.pop(x, None)
    return program.outputs(values)


def _terms(op: Op, ins: list[Any]) -> int:
    """How many terms each result of a sum, dot product or convolution adds."""
    p, name = op.eqn.params, op.info.primitive
    shape = [np.shape(x) for x in ins]
    if name == "dot_general":
        (lc, _), _ = p["dimension_numbers"]
        return math.prod(shape[0][i] for i in lc)
    if name == "conv_general_dilated":
        rhs = shape[1]
        return max(math.prod(rhs) // max(rhs[p["dimension_numbers"].rhs_spec[0]], 1), 1)
    if name == "reduce_sum":
        return math.prod(shape[0][i] for i in p["axes"])
    if name == "cumsum":
        return shape[0][p["axis"]]
    if name == "reduce_window_sum":
        return math.prod(p["window_dimensions"])
    return 1


def _floating(x: Any) -> bool:
    return is_float_dtype(np.asarray(x).dtype)


def _roundoff(dtype: Any) -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).eps) / 2


def _latitude(dtype: Any) -> float:
    """An op's room to differ, per unit of its count: a float32 unit roundoff at most. A narrow result is
    computed in float32 at least and rounded once where the program declares it, which every correct
    implementation does alike; what it may differ by is float32's, not a bfloat16 ULP per op (keeping float32
    where the program rounds is excess precision, another cause)."""
    return min(_roundoff(dtype), _roundoff(np.float32))


def _jitter(x: Any, rel: float, rng: np.random.Generator) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x * (1 + rel * rng.uniform(-1.0, 1.0, x.shape))


def _ulp(b: np.ndarray) -> np.ndarray:
    """One unit in the last place of each of ``b``'s values, in its own dtype (the output's last rounding)."""
    import ml_dtypes

    info = ml_dtypes.finfo(b.dtype)
    mag = np.abs(b.astype(np.float64))
    exp = np.floor(np.log2(np.maximum(mag, float(info.smallest_normal))))
    return np.exp2(exp) * float(info.eps)
