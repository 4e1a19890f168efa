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


USE_NUMPY_FAST_PATH = True  # tests switch this off to compare against the bind path


class _NoFast(Exception):
    """The numpy fast path declines this case; use bind."""


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
    return _bind(eqn.primitive, vals, params)


# --------------------------------------------------------------- numpy fast path
def _static(p: dict, *dyn: Any) -> dict:
    if dyn or p.get("dimensions") is not None:  # dynamic shapes / reshape-with-transpose
        raise _NoFast
    return p


# lax.max/min propagate NaN like np.maximum/minimum, but also order -0 < +0.
_max = lambda x, y: np.where((x == 0) & (y == 0), x + y, np.maximum(x, y))  # noqa: E731
_min = lambda x, y: np.where((x == 0) & (y == 0), -(-x + -y), np.minimum(x, y))  # noqa: E731
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
    e = np.exp(-np.abs(x))  # no overflow, no cancellation
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_NUMPY: dict[str, Callable] = {
    # arithmetic, in float64
    "add": _ew(np.add), "sub": _ew(np.subtract), "mul": _ew(np.multiply),
    "div": _ew(np.true_divide), "rem": _ew(np.fmod), "neg": _ew(np.negative),
    "max": _ew(_max), "min": _ew(_min), "abs": _ew(np.abs),
    "sign": _ew(lambda x: np.where(x == 0, x, np.sign(x))),  # lax.sign(-0.0) is -0.0
    "pow": _ew(np.power), "integer_pow": lambda p, x: np.power(x, float(p["y"])),
    "square": _ew(np.square), "sqrt": _ew(np.sqrt), "rsqrt": _ew(lambda x: 1.0 / np.sqrt(x)),
    "exp": _ew(np.exp), "exp2": _ew(np.exp2), "log": _ew(np.log), "log1p": _ew(np.log1p),
    "expm1": _ew(np.expm1), "tanh": _ew(np.tanh), "logistic": _ew(_logistic),
    "sin": _ew(np.sin), "cos": _ew(np.cos), "tan": _ew(np.tan), "atan2": _ew(np.arctan2),
    "floor": _ew(np.floor), "ceil": _ew(np.ceil), "round": _round,
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
    "reduce_sum": _reduction(np.sum), "reduce_max": _reduction(np.max),
    "reduce_min": _reduction(np.min), "reduce_prod": _reduction(np.prod),
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
