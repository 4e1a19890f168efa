"""Where an op's result changes abruptly or loses accuracy: the input regions a hunt aims at, as data.

Each hazard measures, element by element and from the op's own inputs, a quantity that sits at one of
its ``targets`` where the op is at its hazard: the input of ``floor`` at an integer (where it jumps, so
two paths that round that input a ULP apart give results 1 apart), the two largest values before an
``argmax`` equal, ``exp``'s argument near where it overflows, a ``log`` of a subnormal, a periodic
function at a large argument, a sum that cancels. An element is *at* the hazard when its measure is
within ``width`` of a target. The measures are written in JAX (float32 or wider) so that the hunt can
drive an op's input toward a target by Newton steps on the model's own inputs (``probe``), and they
are in units where one width is the same everywhere (ULPs of the op's input for thresholds; binary
orders of magnitude for ranges).

A new hazard is a new entry of ``HAZARDS``: its primitives, a sentence, a measure and its targets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["HAZARDS", "Hazard", "finfo", "hazards_of"]


@dataclass(frozen=True)
class Hazard:
    name: str  # "threshold", "tie", ...: what the report groups by
    primitives: tuple[str, ...]
    what: str  # "its input at an integer, where it jumps"
    measure: Callable[[Sequence[Any], dict[str, Any], str], Any]  # (inputs, params, primitive) -> array
    # where the measure is at the hazard, by the operand's dtype: (target, width) pairs; an element is at
    # the hazard where its measure is within width of a target (in the measure's own units)
    targets: Callable[[np.dtype], tuple[tuple[float, float], ...]]
    operand: int = 0  # the input whose dtype decides the targets (and must be a float)
    applies: Callable[[Any], bool] = lambda eqn: True  # noqa: E731 - the equation's own conditions


def _f(x: Any) -> Any:
    """``x`` as a float of at least 32 bits, to measure in."""
    import jax.numpy as jnp

    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def _ulp(x: Any, dtype: Any) -> Any:
    """The spacing of ``dtype``'s values at |x| (at least its smallest normal's), computed in float32."""
    import jax.numpy as jnp

    info = finfo(dtype)
    mag = jnp.maximum(jnp.abs(x), float(info.tiny))
    return jnp.exp2(jnp.floor(jnp.log2(mag)) - int(info.nmant))


def finfo(dtype: Any) -> Any:
    """The float dtype's limits (numpy's and ml_dtypes' floats alike): the one place the hunt reads them."""
    import ml_dtypes

    dtype = np.dtype(dtype)
    return np.finfo(dtype) if dtype in (np.float32, np.float64) else ml_dtypes.finfo(dtype)


def _log2_mag(x: Any, dtype: Any) -> Any:
    import jax.numpy as jnp

    floor = float(finfo(dtype).smallest_subnormal) / 2
    return jnp.log2(jnp.maximum(jnp.abs(x), floor))


def _is_float(aval: Any) -> bool:
    from ..rounding import is_float_dtype

    try:
        return is_float_dtype(np.dtype(aval.dtype))  # bfloat16 and float8 (ml_dtypes) too
    except TypeError:  # a PRNG key's dtype
        return False


# -- measures -----------------------------------------------------------------------------------

def _to_integer(ins: Sequence[Any], params: dict, primitive: str) -> Any:  # floor, ceil, float -> int
    import jax.numpy as jnp

    x = _f(ins[0])
    return (x - jnp.round(x)) / _ulp(x, ins[0].dtype)


def _to_half(ins: Sequence[Any], params: dict, primitive: str) -> Any:  # round: jumps at x.5
    import jax.numpy as jnp

    x = _f(ins[0])
    return (x - jnp.floor(x) - 0.5) / _ulp(x, ins[0].dtype)


def _quotient(ins: Sequence[Any], params: dict, primitive: str) -> Any:  # rem: jumps where x / y is an integer
    import jax.numpy as jnp

    q = _f(ins[0]) / _f(ins[1])
    return (q - jnp.round(q)) / _ulp(q, ins[0].dtype)


def _difference(ins: Sequence[Any], params: dict, primitive: str) -> Any:  # comparisons
    import jax.numpy as jnp

    a, b = _f(ins[0]), _f(ins[1])
    return (a - b) / _ulp(jnp.maximum(jnp.abs(a), jnp.abs(b)), ins[0].dtype)


def _top_two(ins: Sequence[Any], params: dict, primitive: str) -> Any:  # argmax / argmin
    import jax
    import jax.numpy as jnp

    sign = -1.0 if primitive == "argmin" else 1.0
    x = jnp.moveaxis(_f(ins[0]) * sign, params["axes"][0], -1)
    if x.shape[-1] < 2:
        return jnp.full(x.shape[:-1], jnp.inf)
    top = jax.lax.top_k(x, 2)[0]
    return (top[..., 0] - top[..., 1]) / _ulp(top[..., 0], ins[0].dtype)


def _nearest_pair(ins: Sequence[Any], params: dict, primitive: str) -> Any:  # sort: equal keys
    import jax.numpy as jnp

    x = jnp.moveaxis(_f(ins[0]), params["dimension"], -1)
    if x.shape[-1] < 2:
        return jnp.full(x.shape[:-1], jnp.inf)
    s = jnp.sort(x, axis=-1)
    gaps = (s[..., 1:] - s[..., :-1]) / _ulp(s[..., 1:], ins[0].dtype)
    return jnp.min(gaps, axis=-1)


def _argument(ins: Sequence[Any], params: dict, primitive: str) -> Any:
    return _f(ins[0])


def _magnitude(operand: int) -> Callable[[Sequence[Any], dict, Any], Any]:
    def measure(ins: Sequence[Any], params: dict, primitive: str) -> Any:
        return _log2_mag(_f(ins[operand]), ins[operand].dtype)
    return measure


def _cancellation(ins: Sequence[Any], params: dict, primitive: str) -> Any:
    """log2 of |result| / (sum of the terms' magnitudes): -k where a sum cancels k bits."""
    import jax
    import jax.numpy as jnp

    op = primitive
    if op == "reduce_sum":
        x = _f(ins[0])
        total, size = jnp.sum(x, axis=params["axes"]), jnp.sum(jnp.abs(x), axis=params["axes"])
    elif op == "dot_general":
        a, b = _f(ins[0]), _f(ins[1])
        dims = params["dimension_numbers"]
        total = jax.lax.dot_general(a, b, dims, preferred_element_type=a.dtype)
        size = jax.lax.dot_general(jnp.abs(a), jnp.abs(b), dims, preferred_element_type=a.dtype)
    else:
        a, b = _f(ins[0]), _f(ins[1])
        total = a + b if op == "add" else a - b
        size = jnp.abs(a) + jnp.abs(b)
    ratio = jnp.where(size > 0, jnp.abs(total) / jnp.where(size > 0, size, 1.0), 1.0)
    return jnp.log2(jnp.maximum(ratio, 2.0 ** -60))


# -- targets ------------------------------------------------------------------------------------

def _ulps(dtype: np.dtype) -> tuple[tuple[float, float], ...]:
    return ((0.0, 4.0),)  # within 4 ULPs of the threshold: where two paths' roundings can fall either side


def _exp_edges(dtype: np.dtype) -> tuple[tuple[float, float], ...]:
    """exp's argument over the last third of a unit below where it overflows (math libraries differ
    there: TFLite's float32 exp gives inf from 88.38), where its result turns subnormal, and where 0."""
    info = finfo(dtype)
    top = float(np.log(float(info.max)))
    return ((top - 0.2, 0.2), (float(np.log(float(info.tiny))), 0.3),
            (float(np.log(float(info.smallest_subnormal))), 0.3))


def _subnormal_band(dtype: np.dtype) -> tuple[tuple[float, float], ...]:
    """log2 |x| across the subnormal band: 2**-149 to 2**-126 in float32 and bfloat16."""
    info = finfo(dtype)
    lo, hi = np.log2(float(info.smallest_subnormal)), np.log2(float(info.tiny))
    return (((lo + hi) / 2, (hi - lo) / 2),)


def _large(dtype: np.dtype) -> tuple[tuple[float, float], ...]:
    return ((14.0, 3.0), (20.0, 3.0), (26.0, 3.0))  # |x| from 2**11 to 2**29: range reduction at large arguments


def _cancelled(dtype: np.dtype) -> tuple[tuple[float, float], ...]:
    return ((-20.0, 8.0),)  # 12 to 28 of the terms' bits cancelled


def _float_to_integer(eqn: Any) -> bool:
    return _is_float(eqn.invars[0].aval) and np.dtype(eqn.outvars[0].aval.dtype).kind in "biu"


def _float_in(eqn: Any) -> bool:
    return all(_is_float(v.aval) for v in eqn.invars if hasattr(v.aval, "dtype"))


def _one_key(eqn: Any) -> bool:
    return _is_float(eqn.invars[0].aval) and eqn.params.get("num_keys", 1) == 1


HAZARDS: tuple[Hazard, ...] = (
    Hazard("threshold", ("floor", "ceil"), "its input at an integer, where it jumps by 1", _to_integer, _ulps,
           applies=_float_in),
    Hazard("threshold", ("convert_element_type",), "a float converted to an integer at an integer, where "
           "truncation jumps", _to_integer, _ulps, applies=_float_to_integer),
    Hazard("threshold", ("round",), "its input at x.5, where rounding jumps", _to_half, _ulps, applies=_float_in),
    Hazard("threshold", ("rem",), "a quotient at an integer, where the remainder jumps", _quotient, _ulps,
           applies=_float_in),
    Hazard("tie", ("gt", "ge", "lt", "le", "eq", "ne"), "its two operands equal, where the comparison flips",
           _difference, _ulps, applies=_float_in),
    Hazard("tie", ("argmax",), "the two largest values equal, where the index jumps", _top_two, _ulps,
           applies=_float_in),
    Hazard("tie", ("argmin",), "the two smallest values equal, where the index jumps",
           _top_two, _ulps, applies=_float_in),
    Hazard("tie", ("sort",), "two keys equal, where the order flips", _nearest_pair, _ulps, applies=_one_key),
    Hazard("overflow", ("exp",), "its argument near where it overflows, turns subnormal or underflows to 0",
           _argument, _exp_edges, applies=_float_in),
    Hazard("subnormal", ("log", "sqrt", "rsqrt", "log1p"), "a subnormal input (flushed to zero by some runtimes)",
           _magnitude(0), _subnormal_band, applies=_float_in),
    Hazard("subnormal", ("div",), "a subnormal divisor (flushed to zero by some runtimes)", _magnitude(1),
           _subnormal_band, operand=1, applies=_float_in),
    Hazard("large argument", ("sin", "cos", "tan"), "a large argument, where range reduction decides the result",
           _magnitude(0), _large, applies=_float_in),
    Hazard("cancellation", ("add", "sub"), "operands that cancel: the result is far smaller than they are",
           _cancellation, _cancelled, applies=_float_in),
    Hazard("cancellation", ("reduce_sum", "dot_general"), "terms that cancel: the sum is far smaller than they are",
           _cancellation, _cancelled, applies=_float_in),
)


def hazards_of(eqn: Any) -> list[Hazard]:
    """The hazards an equation can be at."""
    name = eqn.primitive.name
    return [h for h in HAZARDS if name in h.primitives and len(eqn.invars) > h.operand and h.applies(eqn)]
