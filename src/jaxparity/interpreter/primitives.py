"""One primitive computed in float64: numpy rules where they are exact, else the primitive
bound with float64 operands through a cache of jitted callables."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np
from jax import lax

from .semantics import _inexact

# ----------------------------------------------------------- bind (fallback path)
_JIT_CACHE: dict[Any, Callable] = {}


def _bind(prim: jcore.Primitive, vals: Sequence[Any], params: dict) -> list:
    """`prim.bind`, through a cache of jitted callables keyed by (primitive, params)."""
    key: tuple[jcore.Primitive, tuple[tuple[Any, Any], ...]] | None
    fn: Callable | None
    try:
        key = (prim, tuple(sorted(params.items(), key=lambda kv: kv[0])))
        fn = _JIT_CACHE.get(key)
    except TypeError:  # unhashable params: bind directly
        key = fn = None
    if fn is None:
        fn = jax.jit(lambda *xs: prim.bind(*xs, **params))
        if key is not None:
            _JIT_CACHE[key] = fn
    out = fn(*vals)
    return list(out) if prim.multiple_results else [out]


def _bind_op_by_op(prim: jcore.Primitive, vals: Sequence[Any], params: dict) -> list:
    """`prim.bind` with jit disabled: a primitive implemented in JAX (random_gamma) then runs
    its inner operations one at a time, exactly as eager does."""
    with jax.disable_jit():
        out = prim.bind(*vals, **params)
    return list(out) if prim.multiple_results else [out]


USE_NUMPY_FAST_PATH = True  # tests switch this off to compare against the bind path


class _NoFast(Exception):
    """The numpy fast path declines this case; use bind."""


class _BindWhere(Exception):
    """The numpy fast path computed `value` but declines the elements where `mask` is set;
    those are taken from bind."""

    def __init__(self, mask: np.ndarray, value: np.ndarray):
        super().__init__()
        self.mask, self.value = mask, value


def _apply(eqn: jcore.JaxprEqn, vals: list, params: dict, *, exact: bool) -> list:
    name = eqn.primitive.name
    fast = _NUMPY.get(name)
    if (USE_NUMPY_FAST_PATH and fast is not None and (not exact or name in _EXACT_OK)
            and not any(isinstance(x, jax.Array) for x in vals)):
        try:
            with np.errstate(all="ignore"):
                return [fast(params, *vals)]
        except _NoFast:
            pass
        except _BindWhere as partial:
            bound = np.asarray(_bind(eqn.primitive, vals, params)[0])
            return [np.where(partial.mask, bound, partial.value)]
    return _bind(eqn.primitive, vals, params)


# --------------------------------------------------------------- numpy fast path
def _static(p: dict, *dyn: Any) -> dict:
    if dyn or p.get("dimensions") is not None:  # dynamic shapes / reshape-with-transpose
        raise _NoFast
    return p


def _lex_greater(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax's order on complex numbers (mlir._minmax_hlo): the real parts, the imaginary parts
    on a tie; a comparison with NaN is false."""
    return np.where(x.real == y.real, x.imag > y.imag, x.real > y.real)


def _max(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax.max: NaN propagates and -0 < +0 for floats; complex is select(x > y, x, y) in the
    lexicographic order (so y when a NaN is compared); np.maximum for integers and bool."""
    if np.iscomplexobj(x) or np.iscomplexobj(y):
        return np.where(_lex_greater(x, y), x, y)
    if x.dtype.kind in "fV" or y.dtype.kind in "fV":
        return np.where((x == 0) & (y == 0), x + y, np.maximum(x, y))  # -0 + +0 is +0
    return np.maximum(x, y)


def _min(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """lax.min, the mirror of _max (-0 is the smaller zero; complex: select(y > x, x, y))."""
    if np.iscomplexobj(x) or np.iscomplexobj(y):
        return np.where(_lex_greater(y, x), x, y)
    if x.dtype.kind in "fV" or y.dtype.kind in "fV":
        return np.where((x == 0) & (y == 0), -(-x + -y), np.minimum(x, y))
    return np.minimum(x, y)


def _reduce_extremum(p: dict, x: np.ndarray, *, largest: bool) -> np.ndarray:
    """reduce_max/reduce_min: NaN propagates and a zero result is +0 (max) / -0 (min) when
    any reduced zero has that sign, as a fold of lax.max/min gives. Complex goes through
    bind: lax's fold of select(x > y, x, y) keeps a NaN or not depending on its order."""
    if np.iscomplexobj(x):
        raise _NoFast
    axes = tuple(p["axes"])
    out = (np.max if largest else np.min)(x, axis=axes)
    if x.dtype.kind not in "fV" or not (out == 0).any():
        return out
    wanted = np.any((x == 0) & (np.signbit(x) != largest), axis=axes)  # a +0 (max) / -0 (min)
    zero = np.zeros_like(out) if largest else -np.zeros_like(out)
    return np.where((out == 0) & wanted, zero, out)


_ew = lambda f: lambda p, *xs: f(*xs)  # noqa: E731  (elementwise: no params)
_reduction = lambda f: lambda p, x: f(x, axis=tuple(p["axes"]))  # noqa: E731


def _round(p: dict, x: np.ndarray) -> np.ndarray:
    if int(p["rounding_method"]) == int(lax.RoundingMethod.TO_NEAREST_EVEN):
        return np.rint(x)
    t = np.trunc(x)  # AWAY_FROM_ZERO; x - t is exact
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def _convert(p: dict, x: np.ndarray) -> np.ndarray:
    to = np.dtype(p["new_dtype"])
    if x.dtype.kind == "c" and to.kind != "c":
        raise _NoFast
    if to.kind == "b":
        return x != 0
    if _inexact(x.dtype) and to.kind in "iu":  # truncate; bind handles NaN/out of range
        info = np.iinfo(to)
        if not (np.isfinite(x).all() and (x > info.min - 1).all() and (x < info.max + 1).all()):
            raise _NoFast
        return np.trunc(x).astype(to)
    return x.astype(to)


def _broadcast_in_dim(p: dict, x: np.ndarray, *dyn: Any) -> np.ndarray:
    shape = [1] * len(_static(p, *dyn)["shape"])
    for i, d in enumerate(p["broadcast_dimensions"]):
        shape[d] = x.shape[i]
    return np.broadcast_to(x.reshape(shape), p["shape"]).copy()


def _iota(p: dict, *dyn: Any) -> np.ndarray:
    shape, dim = _static(p, *dyn)["shape"], p["dimension"]
    a = np.arange(shape[dim], dtype=p["dtype"])
    a = a.reshape([-1 if i == dim else 1 for i in range(len(shape))])
    return np.broadcast_to(a, shape).copy()


def _select_n(p: dict, pred: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    if pred.dtype == np.bool_:
        return np.where(pred, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    return np.choose(pred, cases)


def _window(x: np.ndarray, idx: Sequence[Any], sizes: Sequence[int]) -> tuple:
    """The slice a dynamic_(update_)slice touches; lax clamps the start indices."""
    return tuple(slice(b, b + s) for b, s in
                 zip((int(np.clip(i, 0, n - s)) for i, n, s in zip(idx, x.shape, sizes)), sizes))


def _dynamic_update_slice(p: dict, x: np.ndarray, upd: np.ndarray, *idx: np.ndarray) -> np.ndarray:
    out = x.copy()
    out[_window(x, idx, upd.shape)] = upd
    return out


def _dot_operands(p: dict, lhs: np.ndarray, rhs: np.ndarray,
                  dtype: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """dot_general as a batched matmul: lhs (batch, free, contracted), rhs (batch,
    contracted, free), and the result's shape."""
    (lc, rc), (lb, rb) = p["dimension_numbers"]
    lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    def as3d(x: np.ndarray, *groups: Sequence[int]) -> np.ndarray:
        shape = [math.prod(x.shape[d] for d in g) for g in groups]
        return x.transpose([d for g in groups for d in g]).astype(dtype).reshape(shape)

    return (as3d(lhs, lb, lf, lc), as3d(rhs, rb, rc, rf),
            [lhs.shape[d] for d in (*lb, *lf)] + [rhs.shape[d] for d in rf])


def _dot_general(p: dict, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    dtype = p["preferred_element_type"]  # (np.dtype is falsy: no `or` here)
    dtype = np.result_type(lhs, rhs) if dtype is None else dtype
    a, b, shape = _dot_operands(p, lhs, rhs, dtype)
    return np.matmul(a, b).reshape(shape)


def _logistic(x: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(x):  # 1 / (1 + e^-z): no order on complex numbers to branch on
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(-np.abs(x))  # no overflow, no cancellation
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _sign(x: np.ndarray) -> np.ndarray:
    """lax.sign: x / |x| for complex, each component divided by the (real) modulus so that
    signed zeros keep their sign (numpy < 2 took the real part's sign instead); sign(±0) is
    ±0."""
    if not np.iscomplexobj(x):
        return np.where(x == 0, x, np.sign(x))
    m = np.where(x == 0, 1.0, np.abs(x))
    out = np.empty_like(x)
    out.real, out.imag = x.real / m, x.imag / m
    return out


def _integer_pow(p: dict, x: np.ndarray) -> np.ndarray:
    """x ** y for a static integer y. Complex: by repeated multiplication (square and
    multiply, as lax.integer_pow expands it, then one reciprocal for y < 0), which is what
    z**n means: exact zeros stay zero ((-1+0j)**2 is 1+0j, where exp(2 log z) gives
    1-2.4e-16j) and each component is within a few float64 ulps of |z|**n. Real floats:
    np.power, within an ulp of float64."""
    y = int(p["y"])
    if not np.iscomplexobj(x):
        return np.power(x, float(y))
    if y == 0:
        return np.ones_like(x)
    out: np.ndarray | None = None
    base, n = x, abs(y)
    while n:
        if n & 1:  # no leading 1 * ...: it would turn a (-0)-signed component into +0
            out = base if out is None else out * base
        base, n = base * base, n >> 1
    assert out is not None  # y != 0: some bit of |y| is set
    return 1.0 / out if y < 0 else out


def _special_complex(f: Callable, divisor: int | None = None) -> Callable:
    """Leave to bind the elements with a complex operand that has an inf or NaN component
    (or, for a division, a zero `divisor` operand): numpy's conventions there (complex
    division by an infinity or by zero, hypot(inf, nan), sign(inf+1j)...) are not XLA's,
    and bind uses XLA's own definition."""
    def rule(p: dict, *xs: np.ndarray) -> np.ndarray:
        out = f(p, *xs)
        bad = [~np.isfinite(x) for x in xs if np.iscomplexobj(x)]
        if bad and divisor is not None:
            bad.append(xs[divisor] == 0)
        if bad and (mask := np.broadcast_to(np.logical_or.reduce(np.broadcast_arrays(*bad)),
                                            out.shape)).any():
            raise _BindWhere(mask, out)
        return out
    return rule


_NUMPY: dict[str, Callable] = {
    # arithmetic, in float64 (complex128; non-finite complex operands go through bind)
    "add": _ew(np.add), "sub": _ew(np.subtract), "mul": _ew(np.multiply),
    "div": _special_complex(_ew(np.true_divide), divisor=1), "rem": _ew(np.fmod),
    "neg": _ew(np.negative),
    "max": _ew(_max), "min": _ew(_min), "abs": _special_complex(_ew(np.abs)),
    "sign": _special_complex(_ew(_sign)), "pow": _special_complex(_ew(np.power)),
    "integer_pow": _special_complex(_integer_pow), "square": _ew(np.square),
    **{name: _special_complex(_ew(f)) for name, f in (
        ("sqrt", np.sqrt), ("rsqrt", lambda x: 1.0 / np.sqrt(x)), ("exp", np.exp),
        ("exp2", np.exp2), ("log", np.log), ("log1p", np.log1p), ("expm1", np.expm1),
        ("tanh", np.tanh), ("logistic", _logistic), ("sin", np.sin), ("cos", np.cos),
        ("tan", np.tan))},
    "atan2": _ew(np.arctan2), "floor": _ew(np.floor), "ceil": _ew(np.ceil), "round": _round,
    "is_finite": _ew(np.isfinite), "clamp": _ew(lambda lo, x, hi: _min(_max(x, lo), hi)),
    # comparisons and logic
    "eq": _ew(np.equal), "ne": _ew(np.not_equal), "lt": _ew(np.less), "le": _ew(np.less_equal),
    "gt": _ew(np.greater), "ge": _ew(np.greater_equal), "and": _ew(np.bitwise_and),
    "or": _ew(np.bitwise_or), "xor": _ew(np.bitwise_xor), "not": _ew(np.invert),
    "select_n": _select_n,
    # structure
    "convert_element_type": _convert, "broadcast_in_dim": _broadcast_in_dim, "iota": _iota,
    "reshape": lambda p, x, *dyn: x.reshape(_static(p, *dyn)["new_sizes"]),
    "transpose": lambda p, x: x.transpose(p["permutation"]),
    "squeeze": lambda p, x: x.reshape([n for i, n in enumerate(x.shape)
                                       if i not in [d % x.ndim for d in p["dimensions"]]]),
    "concatenate": lambda p, *xs: np.concatenate(xs, axis=p["dimension"]),
    "slice": lambda p, x: x[tuple(slice(b, e, s) for b, e, s in zip(
        p["start_indices"], p["limit_indices"], p["strides"] or [1] * x.ndim))],
    "dynamic_slice": lambda p, x, *idx: x[_window(x, idx, p["slice_sizes"])],
    "dynamic_update_slice": _dynamic_update_slice,
    "stop_gradient": _ew(lambda x: x), "copy": _ew(lambda x: x), "copy_p": _ew(lambda x: x),
    # reductions and contraction
    "reduce_sum": _reduction(np.sum), "reduce_prod": _reduction(np.prod),
    "reduce_max": lambda p, x: _reduce_extremum(p, x, largest=True),
    "reduce_min": lambda p, x: _reduce_extremum(p, x, largest=False),
    "reduce_and": _reduction(np.all), "reduce_or": _reduction(np.any),
    "dot_general": _dot_general,
}
try:  # scipy is optional: without it erf goes through bind
    import scipy.special

    _NUMPY["erf"] = _ew(scipy.special.erf)
except ImportError:  # pragma: no cover
    pass

# Fast-path entries also exact for integer/bool operands (wrap-around matches XLA) and for
# comparisons of declared floats; integer div/rem/pow/dot/sum always go through bind.
_EXACT_OK = frozenset({
    "add", "sub", "mul", "neg", "max", "min", "abs", "sign", "eq", "ne", "lt", "le", "gt",
    "ge", "and", "or", "xor", "not", "is_finite", "select_n", "clamp", "convert_element_type",
    "broadcast_in_dim", "iota", "reshape", "transpose", "squeeze", "concatenate", "slice",
    "dynamic_slice", "dynamic_update_slice", "stop_gradient", "copy", "copy_p",
    "reduce_max", "reduce_min", "reduce_and", "reduce_or"})
