"""The ways implementations are known to compute a primitive other than JAX declares it, as data.

Each ``Variant`` computes the op on given inputs (numpy, the op's own captured values) as one family of
implementations does (and, where an implementation's values are whatever memory holds, as for an unchecked
out-of-bounds read, ``undetermined`` says which elements those are): TFLite shifts right arithmetically where ``shift_right_logical`` is declared, and
takes the floored remainder (FLOOR_MOD) where ``rem`` truncates; ONNX Runtime's sigmoid is accurate in
absolute terms only (0 where the result is below float32's unit roundoff); a cast to an 8-bit float that
saturates at the largest finite value where JAX gives NaN. The explainer runs every variant of the
diverging op on its captured inputs; the one that reproduces the path's values is the mechanism named,
and its ``rewrite`` is a model-side change that gives one result under every variant (re-run to verify).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["VARIANTS", "Variant", "division_undefined", "refusable", "standalone_source"]


@dataclass(frozen=True)
class Variant:
    primitive: str
    name: str  # "arithmetic shift"
    # What the side that computes this way does, as a sentence ending: "{who} shifts arithmetically
    # (sign-extending)".
    does: str
    compute: Callable[[dict, list[np.ndarray], np.ndarray], np.ndarray | None]  # (params, inputs, declared) -> output
    # The model-side change that gives one result whatever the implementation, in words, and as a
    # function of the op's inputs (JAX) that replaces the op when it is verified; None: words only.
    fix: str
    rewrite: Callable[..., Any] | None = None
    # The equation's params the rewrite takes as keywords ("eqn": the equation itself, to bind it again).
    takes: tuple[str, ...] = ()
    # The elements whose value no computation can reproduce (an unchecked read of memory out of bounds),
    # as a mask from (params, inputs, declared): the path must depart there only, and agree elsewhere.
    undetermined: Callable[[dict, list[np.ndarray], np.ndarray], np.ndarray | None] | None = None
    # How an element's inputs are said, from (params, inputs, element), where listing their values would not
    # show the mechanism ("start index 8 (in bounds: 0 to 7)"); None: the input values at that element.
    inputs_words: Callable[[dict, list[np.ndarray], tuple[int, ...]], str | None] | None = None


def _bits(x: np.ndarray) -> int:
    return np.dtype(x.dtype).itemsize * 8


def _arithmetic_shift(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    x, s = (np.asarray(v) for v in ins)
    if x.dtype.kind != "i":
        return None
    s = np.broadcast_to(s, np.broadcast(x, s).shape).astype(np.int64)
    wide = np.broadcast_to(x, s.shape).astype(np.int64)
    out = np.where(s >= _bits(x), np.where(wide < 0, -1, 0), wide >> np.clip(s, 0, 63))
    return out.astype(x.dtype)


def _logical_shift(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    x, s = (np.asarray(v) for v in ins)
    if x.dtype.kind != "i":
        return None
    unsigned = x.view(f"u{x.dtype.itemsize}")
    s = np.broadcast_to(s, np.broadcast(x, s).shape).astype(np.int64)
    wide = np.broadcast_to(unsigned, s.shape).astype(np.uint64)
    out = np.where(s >= _bits(x), 0, wide >> np.clip(s, 0, 63).astype(np.uint64))
    return out.astype(unsigned.dtype).view(x.dtype)


def _masked_shift(x: Any, s: Any) -> Any:
    """x >> s, logical, from operations every runtime has (TFLite has no bitwise and or left shift): the
    arithmetic shift, plus 2**(bits - s) where x is negative (wrapping, as two's complement does), read
    from a table."""
    import jax.numpy as jnp
    from jax import lax

    bits = x.dtype.itemsize * 8
    powers = np.array([(1 << k) % (1 << bits) for k in range(bits + 1)], np.uint64).astype(f"u{x.dtype.itemsize}")
    table = jnp.asarray(powers.view(x.dtype))
    s = jnp.broadcast_to(s, jnp.broadcast_shapes(jnp.shape(x), jnp.shape(s)))
    carry = jnp.where(x < 0, table[jnp.clip(bits - s, 0, bits)], jnp.zeros_like(x))
    return jnp.where(s >= bits, jnp.zeros_like(x), lax.shift_right_arithmetic(x, jnp.clip(s, 0, bits - 1)) + carry)


def _floored_rem(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    x, y = (np.asarray(v) for v in ins)
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu":
            safe = np.where(y == 0, 1, y)
            return np.where(y == 0, declared, np.mod(x, safe)).astype(x.dtype)
        return np.mod(x, y).astype(x.dtype)


def _truncated_rem(x: Any, y: Any) -> Any:
    """rem as JAX declares it (the sign of the dividend) whichever remainder the runtime takes: where the
    remainder has the sign of the divisor against the dividend's, it was floored, and r - y is the truncated
    one (exactly: that value is representable, so the subtraction gives it)."""
    import jax.numpy as jnp
    from jax import lax

    r = lax.rem(x, y)
    return jnp.where((r != 0) & (jnp.sign(r) != jnp.sign(x)), r - y, r)


def _absolute_sigmoid(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    d = np.asarray(declared)
    if d.dtype.kind != "f":
        return None
    u = float(np.finfo(d.dtype).eps) / 2
    return np.where(np.abs(d.astype(np.float64)) < u, np.zeros_like(d), d)


def _stable_sigmoid(x: Any) -> Any:
    """sigmoid accurate in relative terms for negative inputs on any runtime: exp(x) / (1 + exp(x)) there."""
    import jax.numpy as jnp

    e = jnp.exp(-jnp.abs(x))
    return jnp.where(x >= 0, 1 / (1 + e), e / (1 + e))


_NARROW_FLOATS = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
                  "float8_e3m4", "float8_e4m3", "float8_e8m0fnu")


def _saturating_cast(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    import ml_dtypes

    x = np.asarray(ins[0])
    target = np.dtype(params.get("new_dtype"))
    if target.name not in _NARROW_FLOATS or x.dtype.kind != "f":
        return None
    top = float(ml_dtypes.finfo(target).max)
    clipped = np.where(np.isnan(x), x, np.clip(x.astype(np.float64), -top, top))
    return clipped.astype(target)


def _clip_then_cast(x: Any, *, new_dtype: Any) -> Any:
    import jax.numpy as jnp

    top = float(jnp.finfo(new_dtype).max)
    return jnp.clip(x, -top, top).astype(new_dtype)


def division_undefined(x: np.ndarray, y: np.ndarray, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Where an integer x / y or x % y has no declared result: (y == 0, the signed MIN / -1 overflow)."""
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    zero = y == 0
    if np.dtype(dtype).kind == "i":
        return zero, (x == np.iinfo(dtype).min) & (y == -1)
    return zero, np.zeros(zero.shape, bool)


def refusable(primitive: str, params: dict, ins: list[np.ndarray], out: np.ndarray) -> tuple[int, str, str] | None:
    """Elements of an op that some runtime may refuse to compute, or compute its own way, on these inputs:
    (how many, what they do, how to make them defined), for a path that failed; None where there are none."""
    out = np.asarray(out)
    if primitive in ("div", "rem") and out.dtype.kind in "iu" and len(ins) == 2:
        zero, overflow = division_undefined(ins[0], ins[1], out.dtype)
        n = int(np.count_nonzero(zero | overflow))
        sign = "/" if primitive == "div" else "%"
        what = (f"divides an integer by zero (x {sign} 0 is implementation-defined: XLA gives "
                f"{'-1' if primitive == 'div' else 'x'}, some runtimes refuse)" if zero.any() else
                "overflows (the smallest integer divided by -1)")
        return (n, what, next(v.fix for v in VARIANTS[primitive] if v.name.startswith("zero"))) if n else None
    if primitive == "gather" and len(ins) >= 2:
        outside = _out_of_bounds(params, ins, out)
        n = 0 if outside is None else int(np.count_nonzero(outside))
        return (n, "reads start indices out of bounds (StableHLO clamps them; some runtimes refuse, or read "
                   "memory)", VARIANTS["gather"][0].fix) if n else None
    return None


def _zero_at_zero(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    """An integer x / 0 and x % 0 as numpy and ONNX's reference evaluator give them: 0 (XLA: -1 and x)."""
    x, y = (np.asarray(v) for v in ins)
    d = np.asarray(declared)
    if d.dtype.kind not in "iu":
        return None
    return np.where(np.broadcast_to(y == 0, d.shape), np.zeros_like(d), d)


def _defined_div(x: Any, y: Any) -> Any:
    """x / y with the divisor masked, so no runtime divides by zero or overflows, and XLA's values kept where
    it would: x / 0 = -1 (all bits set; the largest value unsigned), MIN / -1 = MIN."""
    import jax.numpy as jnp
    from jax import lax

    signed = jnp.issubdtype(x.dtype, jnp.signedinteger)
    undefined = y == 0
    overflow = (x == jnp.iinfo(x.dtype).min) & (y == -1) if signed else jnp.zeros_like(undefined)
    q = lax.div(x, jnp.where(undefined | overflow, jnp.ones_like(y), y))
    return jnp.where(undefined, jnp.full_like(x, -1 if signed else jnp.iinfo(x.dtype).max), q)


def _defined_rem(x: Any, y: Any) -> Any:
    """x % y with the divisor masked, and XLA's values kept where it would: x % 0 = x, MIN % -1 = 0."""
    import jax.numpy as jnp
    from jax import lax

    signed = jnp.issubdtype(x.dtype, jnp.signedinteger)
    undefined = y == 0
    overflow = (x == jnp.iinfo(x.dtype).min) & (y == -1) if signed else jnp.zeros_like(undefined)
    r = lax.rem(x, jnp.where(undefined | overflow, jnp.ones_like(y), y))
    return jnp.where(undefined, x, jnp.where(overflow, jnp.zeros_like(x), r))


def _gather_bounds(params: dict, operand_shape: tuple[int, ...]) -> tuple[list[int], np.ndarray] | None:
    """The operand dimension each start index addresses and the largest start StableHLO allows there
    (dim - slice size), from the gather's dimension numbers; None where the gather fills out of bounds."""
    mode = params.get("mode")
    if "FILL" in str(getattr(mode, "name", mode)).upper():
        return None  # mode="fill" defines the out-of-bounds result: no implementation is free there
    dims = list(getattr(params.get("dimension_numbers"), "start_index_map", ()))
    sizes = params.get("slice_sizes", ())
    if not dims or len(sizes) != len(operand_shape):
        return None
    return dims, np.array([operand_shape[d] - sizes[d] for d in dims])


def _out_of_bounds(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    """The output elements a gather reads from an out-of-bounds start index (which StableHLO clamps into
    bounds, and an unchecked gather reads from memory); None where the gather's indices cannot be read so."""
    operand, idx = (np.asarray(v) for v in ins[:2])
    d = np.asarray(declared)
    bounds = _gather_bounds(params, operand.shape)
    if bounds is None or idx.ndim == 0 or idx.shape[-1] != len(bounds[0]):
        return None
    starts = idx.reshape(-1, idx.shape[-1]).astype(np.int64)
    outside = ((starts < 0) | (starts > bounds[1])).any(axis=1).reshape(idx.shape[:-1])
    offset = set(getattr(params.get("dimension_numbers"), "offset_dims", ()))
    batch = [k for k in range(d.ndim) if k not in offset]
    if [d.shape[k] for k in batch] != list(outside.shape):
        return None
    return np.broadcast_to(outside.reshape([d.shape[k] if k in batch else 1 for k in range(d.ndim)]), d.shape)


def _unclamped_gather(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    """A gather that reads its start indices as they are (no clamp into bounds, as StableHLO declares): in
    bounds, the declared values; out of bounds, whatever memory holds (``_out_of_bounds``, undetermined)."""
    return None if _out_of_bounds(params, ins, declared) is None else np.asarray(declared)


def _clamped_gather(operand: Any, idx: Any, *, eqn: Any) -> Any:
    """The gather with its start indices clamped in the model (jnp.clip), as StableHLO's gather clamps them:
    every runtime then reads in bounds, whether or not its gather clamps."""
    import jax.numpy as jnp

    bounds = _gather_bounds(dict(eqn.params), tuple(operand.shape))
    assert bounds is not None  # the rewrite of a gather _out_of_bounds read the bounds of (its variant matched)
    dims, hi = bounds
    clipped = jnp.clip(idx, 0, jnp.asarray(hi, idx.dtype))
    return eqn.primitive.bind(operand, clipped, **eqn.params)


def gather_index_words(params: dict, ins: list[np.ndarray], element: tuple[int, ...]) -> str | None:
    """The start index that output ``element`` reads, against its bounds: "start index 8 (in bounds: 0 to 7)"."""
    operand, idx = (np.asarray(v) for v in ins[:2])
    bounds = _gather_bounds(params, operand.shape)
    if bounds is None:
        return None
    offset = set(getattr(params.get("dimension_numbers"), "offset_dims", ()))
    start = idx[tuple(i for k, i in enumerate(element) if k not in offset)].reshape(-1).tolist()
    hi = bounds[1].tolist()
    if len(start) == 1:
        return f"start index {start[0]} (in bounds: 0 to {hi[0]})"
    return f"start indices {start} (in bounds: 0 to {hi})"


def _select(pick_first: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray | None]:
    """max or min as a comparison and a select (``x > y ? x : y``): a NaN survives only where the comparison,
    false for a NaN, selects it."""
    def compute(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
        x, y = np.broadcast_arrays(*(np.asarray(v) for v in ins))
        if x.dtype.kind != "f":
            return None
        with np.errstate(invalid="ignore"):
            return np.where(pick_first(x, y), x, y).astype(x.dtype)
    return compute


def _nan_max(x: Any, y: Any) -> Any:
    """max with its NaN made explicit: NaN wherever an operand is NaN (x + y is NaN then), whether or not the
    runtime's kernel propagates it."""
    import jax.numpy as jnp

    return jnp.where(jnp.isnan(x) | jnp.isnan(y), x + y, jnp.maximum(x, y))


def _nan_min(x: Any, y: Any) -> Any:
    """min with its NaN made explicit (see ``_nan_max``)."""
    import jax.numpy as jnp

    return jnp.where(jnp.isnan(x) | jnp.isnan(y), x + y, jnp.minimum(x, y))


def _away_from_zero(params: dict) -> bool:
    return int(getattr(params.get("rounding_method", 0), "value", params.get("rounding_method", 0))) == 0


def _half_to_even(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    x = np.asarray(ins[0])
    if x.dtype.kind != "f" or not _away_from_zero(params):
        return None  # declared half to even already: this variant is the declared op
    return np.rint(x).astype(x.dtype)


def _half_away(x: Any) -> Any:
    """lax.round's halves away from zero from operations that round nowhere: the truncation (floor or ceil
    toward zero), then one step away where the fraction is at least 1/2 (x - t is exact)."""
    import jax.numpy as jnp

    t = jnp.where(x < 0, jnp.ceil(x), jnp.floor(x))
    return jnp.where(jnp.abs(x - t) >= 0.5, t + jnp.sign(x), t)


def _unscaled_abs(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    """|re + i im| as sqrt(re² + im²) in the component type: overflowing to inf above the square root of
    the largest float, underflowing to 0 below that of the smallest (a scaled hypot does neither)."""
    z = np.asarray(ins[0])
    if z.dtype.kind != "c":
        return None
    re, im = z.real, z.imag
    with np.errstate(all="ignore"):
        return np.sqrt(re * re + im * im).astype(re.dtype)


def _scaled_abs(z: Any) -> Any:
    """|z| scaled by its larger component, so no square overflows or underflows on any runtime."""
    import jax.numpy as jnp

    re, im = jnp.abs(jnp.real(z)), jnp.abs(jnp.imag(z))
    m = jnp.maximum(re, im)
    s = jnp.where((m == 0) | jnp.isinf(m), jnp.ones_like(m), m)
    scaled = s * jnp.sqrt((re / s) ** 2 + (im / s) ** 2)
    return jnp.where(jnp.isinf(m), m, jnp.where(m == 0, m, scaled))


def _exp_log_pow(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    """x ** y as exp(y · log x), the way a math library without a pow of its own computes it: NaN for every
    negative base, even where the exponent is an integer and the power is a number ((-2) ** 3 = -8)."""
    x, y = np.broadcast_arrays(*(np.asarray(v) for v in ins))
    if x.dtype.kind != "f":
        return None
    with np.errstate(all="ignore"):
        return np.exp(y.astype(np.float64) * np.log(x.astype(np.float64))).astype(np.asarray(declared).dtype)


def _signed_pow(x: Any, y: Any) -> Any:
    """x ** y with a negative base and an integer exponent computed on |x| and signed by the exponent's parity,
    so a runtime whose pow is exp(y · log x) gives a number there too."""
    import jax.numpy as jnp
    from jax import lax

    integral = (y == jnp.round(y)) & (x < 0)
    odd = jnp.abs(jnp.remainder(y, 2.0)) == 1.0
    magnitude = lax.pow(jnp.where(integral, -x, x), y)
    return jnp.where(integral & odd, -magnitude, magnitude)


VARIANTS: dict[str, tuple[Variant, ...]] = {
    "shift_right_logical": (
        Variant("shift_right_logical", "arithmetic shift", "shifts arithmetically (sign bits shifted in)",
                _arithmetic_shift, "shift logically from arithmetic every runtime computes alike: the arithmetic "
                "shift plus 2**(bits - s) where x is negative (jaxparity.interpreter.variants._masked_shift)",
                _masked_shift),
    ),
    "shift_right_arithmetic": (
        Variant("shift_right_arithmetic", "logical shift", "shifts logically (zeros shifted in)", _logical_shift,
                "keep the sign explicitly: shift the magnitude and restore the sign, or use jnp.floor_divide by a "
                "power of two"),
    ),
    "logistic": (
        Variant("logistic", "absolute accuracy", "computes a sigmoid accurate in absolute terms only (0 where the "
                "result is below float's unit roundoff)", _absolute_sigmoid, "where small probabilities matter, "
                "compute the sigmoid as exp(-|x|) / (1 + exp(-|x|)) for negative x (or work with "
                "jax.nn.log_sigmoid)", _stable_sigmoid),
    ),
    "convert_element_type": (
        Variant("convert_element_type", "saturating cast", "saturates the cast at the largest finite value where "
                "JAX gives NaN or inf", _saturating_cast, "clip to the target's finite range before the cast "
                "(jnp.clip(x, -max, max), max = jnp.finfo(dtype).max): every runtime then casts alike",
                _clip_then_cast, takes=("new_dtype",)),
    ),
    "div": (
        Variant("div", "zero quotient", "gives 0 for an integer x / 0 (as numpy does), where XLA gives -1: "
                "StableHLO leaves it to the implementation", _zero_at_zero, "mask the divisor so no runtime "
                "divides by zero: q = lax.div(x, jnp.where(y == 0, 1, y)), then jnp.where(y == 0, <the value "
                "you mean>, q) (jaxparity's rewrite keeps XLA's -1)",
                _defined_div),
    ),
    "rem": (
        Variant("rem", "floored remainder", "takes the floored remainder (the sign of the divisor, as FLOOR_MOD "
                "and Python's %)", _floored_rem, "take the truncated remainder whichever one the runtime computes: r = "
                "lax.rem(x, y); jnp.where((r != 0) & (jnp.sign(r) != jnp.sign(x)), r - y, r)", _truncated_rem),
        Variant("rem", "zero remainder", "gives 0 for an integer x % 0 (as numpy does), where XLA gives x: "
                "StableHLO leaves it to the implementation", _zero_at_zero, "mask the divisor so no runtime "
                "divides by zero: r = lax.rem(x, jnp.where(y == 0, 1, y)), then jnp.where(y == 0, <the value you "
                "mean>, r) (jaxparity's rewrite keeps XLA's x)",
                _defined_rem),
    ),
    "gather": (
        Variant("gather", "unclamped indices", "reads out-of-bounds start indices unclamped (whatever memory holds "
                "there), where StableHLO's gather clamps them into bounds", _unclamped_gather, "clamp the indices "
                "in the model, jnp.clip(i, 0, n - 1) (or index with .at[i].get(mode='fill')), so no runtime relies "
                "on the gather's own clamp", _clamped_gather, takes=("eqn",), undetermined=_out_of_bounds,
                inputs_words=gather_index_words),
    ),
    "max": (
        Variant("max", "comparison select", "computes max as x > y ? x : y, which keeps a NaN of the second operand "
                "only, where max propagates every NaN", _select(lambda x, y: x > y), "make the NaN explicit: "
                "jnp.where(jnp.isnan(x) | jnp.isnan(y), x + y, jnp.maximum(x, y))", _nan_max),
        Variant("max", "reversed comparison select", "computes max as x < y ? y : x, which keeps a NaN of the first "
                "operand only, where max propagates every NaN", _select(lambda x, y: ~(x < y)), "make the NaN "
                "explicit: jnp.where(jnp.isnan(x) | jnp.isnan(y), x + y, jnp.maximum(x, y))", _nan_max),
    ),
    "min": (
        Variant("min", "comparison select", "computes min as x < y ? x : y, which keeps a NaN of the second operand "
                "only, where min propagates every NaN", _select(lambda x, y: x < y), "make the NaN explicit: "
                "jnp.where(jnp.isnan(x) | jnp.isnan(y), x + y, jnp.minimum(x, y))", _nan_min),
        Variant("min", "reversed comparison select", "computes min as x > y ? y : x, which keeps a NaN of the first "
                "operand only, where min propagates every NaN", _select(lambda x, y: ~(x > y)), "make the NaN "
                "explicit: jnp.where(jnp.isnan(x) | jnp.isnan(y), x + y, jnp.minimum(x, y))", _nan_min),
    ),
    "round": (
        Variant("round", "ties to even", "rounds halves to even (ONNX's Round, tf.round, numpy), where lax.round "
                "rounds them away from zero", _half_to_even, "round halves away from zero from truncation, which "
                "every runtime computes alike: t = jnp.where(x < 0, jnp.ceil(x), jnp.floor(x)); jnp.where(jnp.abs(x "
                "- t) >= 0.5, t + jnp.sign(x), t) (or declare jnp.round, half to even, if that is what you mean)",
                _half_away),
    ),
    "abs": (
        Variant("abs", "unscaled complex magnitude", "computes |re + i·im| as sqrt(re² + im²) without scaling, which "
                "overflows to inf and underflows to 0 where the magnitude itself is finite", _unscaled_abs,
                "scale by the larger component: m = max(|re|, |im|); m * sqrt((re/m)² + (im/m)²) (m = 0 and inf "
                "kept)", _scaled_abs),
    ),
    "pow": (
        Variant("pow", "exp(y·log x)", "computes x ** y as exp(y · log x), which is NaN for every negative base",
                _exp_log_pow, "where the exponent is a constant integer, write the power as products (x * x * x, "
                "or lax.integer_pow(x, 3)), exact on every runtime; otherwise take the power of |x| and restore "
                "the sign for odd integer exponents (jaxparity.interpreter.variants._signed_pow)", _signed_pow),
    ),
}


def standalone_source(variant: Variant) -> str | None:
    """The rewrite's source where it stands alone (it imports what it uses, numpy aside, and takes no
    params): a reproducer writes it in and calls it under ``--fixed``. None otherwise."""
    import inspect
    import textwrap

    fn = variant.rewrite
    if fn is None or variant.takes or fn.__name__ == "<lambda>" or fn.__code__.co_freevars:
        return None
    module = inspect.getmodule(fn)
    names = set(fn.__code__.co_names)
    if any(n != "np" and hasattr(module, n) and not n.startswith("__") for n in names):
        return None  # it calls another helper of this module
    return textwrap.dedent(inspect.getsource(fn))
