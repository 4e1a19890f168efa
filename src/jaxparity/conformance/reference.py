"""High-precision references the tool's own interpreter plays no part in.

* ``elementwise``: one elementwise primitive evaluated with mpmath at 60 significant digits and
  rounded correctly (once, to nearest even) to the output dtype, plus how near each exact value
  lies to a rounding tie (a float64 computation can only round to the wrong side of a tie
  closer than its own error).
* ``upcast``: any harness re-run by XLA with its float arguments widened to float64/complex128
  (x64 on, jitted): for dot_general, convolutions, reductions, scans, FFTs and linear algebra,
  whose float64 error is far below a float32 ULP. Used only where every float output came back
  widened (a harness that pins a dtype internally has no such reference).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ..jaxcompat import enable_x64
from . import oracle

__all__ = ["DIGITS", "Exact", "elementwise", "upcast"]

DIGITS = 60


@cache
def _mp() -> Any:
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = DIGITS
    return ctx


def _table() -> dict[str, Callable[..., Any]]:
    """Primitive name -> mpmath evaluation (raises or returns None where the value is NaN)."""
    mp = _mp()

    def lgamma(x: Any) -> Any:
        if x <= 0 and x == mp.floor(x):
            return mp.inf
        return mp.re(mp.loggamma(x))

    def digamma(x: Any) -> Any:
        if x <= 0 and x == mp.floor(x):
            return None
        return mp.digamma(x)

    def igamma(a: Any, x: Any) -> Any:
        return None if a <= 0 or x < 0 else mp.gammainc(a, 0, x, regularized=True)

    def igammac(a: Any, x: Any) -> Any:
        return None if a <= 0 or x < 0 else mp.gammainc(a, x, mp.inf, regularized=True)

    def betainc(a: Any, b: Any, x: Any) -> Any:
        return None if a <= 0 or b <= 0 or x < 0 or x > 1 else mp.betainc(a, b, 0, x, regularized=True)

    def pow_(x: Any, y: Any) -> Any:
        if x == 0 and y < 0:
            return mp.inf
        return mp.power(x, y)

    def rem(x: Any, y: Any) -> Any:  # C fmod: the sign of x, exact
        return None if y == 0 else x - y * mp.floor(abs(x / y)) * mp.sign(x / y)

    return {
        "sin": mp.sin, "cos": mp.cos, "tan": mp.tan, "exp": mp.exp, "exp2": lambda x: mp.power(2, x),
        "expm1": mp.expm1, "log": mp.log, "log1p": mp.log1p, "tanh": mp.tanh,
        "sinh": mp.sinh, "cosh": mp.cosh, "asinh": mp.asinh, "acosh": mp.acosh,
        "atanh": mp.atanh, "asin": mp.asin, "acos": mp.acos, "atan": mp.atan,
        "atan2": mp.atan2, "logistic": lambda x: 1 / (1 + mp.exp(-x)), "erf": mp.erf, "erfc": mp.erfc,
        "erf_inv": lambda x: None if abs(x) > 1 else mp.erfinv(x), "lgamma": lgamma, "digamma": digamma,
        "igamma": igamma, "igammac": igammac, "bessel_i0e": lambda x: mp.exp(-abs(x)) * mp.besseli(0, x),
        "bessel_i1e": lambda x: mp.exp(-abs(x)) * mp.besseli(1, x), "regularized_incomplete_beta": betainc,
        "cbrt": lambda x: mp.sign(x) * mp.cbrt(abs(x)), "sqrt": mp.sqrt, "rsqrt": lambda x: 1 / mp.sqrt(x),
        "pow": pow_, "div": lambda x, y: x / y, "rem": rem, "add": lambda x, y: x + y,
        "sub": lambda x, y: x - y, "mul": lambda x, y: x * y, "square": lambda x: x * x,
        "reciprocal": lambda x: 1 / x,
    }



@dataclass(frozen=True)
class Exact:
    """High-precision values of some output elements, rounded correctly to the output dtype."""

    index: np.ndarray  # flat indices of the elements evaluated
    rounded: np.ndarray  # the correctly rounded value of each (output dtype)
    nearest64: np.ndarray  # the exact value to float64 (for tolerance checks)
    tie: np.ndarray  # distance of the exact value from the nearest rounding tie, in ULP (0.5 = on a value)


def _mpval(x: Any) -> Any:
    mp = _mp()
    if isinstance(x, (complex, np.complexfloating)):
        return mp.mpc(float(x.real), float(x.imag))
    return mp.mpf(float(x))


def _real(v: Any) -> Any:
    """A real result of a real-input function: mpmath answers outside the real domain (log of a
    negative, asin beyond 1) with a complex number, which is NaN for a real op."""
    mp = _mp()
    if isinstance(v, type(mp.mpc(0))):
        return v.real if abs(v.imag) <= mp.mpf(10) ** (-DIGITS + 10) * max(abs(v), 1) else None
    return v


def _round_mp(v: Any, dtype: np.dtype) -> tuple[Any, float, float]:
    """(correctly rounded value in dtype, exact value to float64, distance from a tie in ULP)."""
    mp = _mp()
    if v is None or (not isinstance(v, type(mp.mpc(0))) and mp.isnan(v)):
        return np.array(np.nan, dtype)[()], float("nan"), 0.5
    if mp.isinf(v):
        return np.array(float(v), dtype)[()], float(v), 0.5
    f = float(v)  # mpmath rounds to nearest
    cand = np.array(f, np.float64).astype(dtype) if np.isfinite(f) else np.array(f, dtype)
    o = float(oracle.ordinal(np.array(cand, dtype)))
    options = [np.array(oracle.from_ordinal(np.array(o + s), dtype), dtype)[()] for s in (-1.0, 0.0, 1.0)]
    finite = [c for c in options if np.isfinite(float(c))]
    best = min(finite, key=lambda c: (abs(mp.mpf(float(c)) - v), float(oracle.ordinal(np.array(c, dtype))) % 2))
    # Distance from the nearest tie: the midpoint between best and its neighbour on v's side.
    ob = float(oracle.ordinal(np.array(best, dtype)))
    side = 1.0 if v > mp.mpf(float(best)) else -1.0
    other = float(oracle.from_ordinal(np.array(ob + side), dtype))
    if not np.isfinite(other) or v == mp.mpf(float(best)):
        return best, f, 0.5
    lo, hi = mp.mpf(float(best)), mp.mpf(other)
    tie = abs(v - (lo + hi) / 2) / abs(hi - lo)
    return best, f, float(tie)


def elementwise(primitive: str, params: dict[str, Any], args: Sequence[np.ndarray], out: np.ndarray,
                where: np.ndarray) -> Exact | None:
    """The exact values of ``primitive(*args)`` at the flat indices ``where`` of output ``out``
    (its dtype and shape), or None when no mpmath rule covers the primitive."""
    table = _table()
    if primitive == "integer_pow":
        y = int(params["y"])
        fn: Callable[..., Any] | None = lambda x: None if x == 0 and y < 0 else x ** y  # noqa: E731
    else:
        fn = table.get(primitive)
    if fn is None:
        return None
    dtype = out.dtype
    xs = [np.broadcast_to(np.asarray(a), out.shape).reshape(-1) for a in args]
    part = np.dtype(np.float32 if dtype == np.complex64 else np.float64) if oracle.is_complex(dtype) else dtype
    rounded: list[complex] = []  # float for real dtypes
    near: list[complex] = []
    ties: list[float] = []
    for i in where:
        vals = [x[i] for x in xs]
        try:
            if any(not np.isfinite(complex(x)) for x in vals):
                raise ZeroDivisionError  # IEEE special values: not judged against mpmath
            v = fn(*[_mpval(x) for x in vals])
        except ZeroDivisionError:  # also x/0: mpmath has no signed zero to give ±inf
            rounded.append(np.nan)
            near.append(np.nan)
            ties.append(np.nan)  # the caller skips elements with a NaN tie
            continue
        except ValueError:  # outside the function's domain
            v = None
        if v is not None and not oracle.is_complex(dtype):
            v = _real(v)
        if oracle.is_complex(dtype) and v is not None:
            v = _mp().mpc(v)
            (re, re64, t1), (im, im64, t2) = _round_mp(v.real, part), _round_mp(v.imag, part)
            rounded.append(complex(float(re), float(im)))
            near.append(complex(re64, im64))
            ties.append(min(t1, t2))
        else:
            r, r64, t = _round_mp(v, part)
            rounded.append(complex(float(r), np.nan) if oracle.is_complex(dtype) else float(r))
            near.append(r64)
            ties.append(t)
    return Exact(index=np.asarray(where, dtype=np.int64), rounded=np.asarray(rounded).astype(dtype),
                 nearest64=np.asarray(near), tie=np.asarray(ties, dtype=np.float64))


def upcast(fn: Callable[..., Any], args: Sequence[Any], outputs: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    """``fn`` on ``args`` widened to float64/complex128, by XLA with x64 on; None when a float
    output does not come back wide (the harness pins its dtype) or the structure changes."""
    import jax

    def widen(a: Any) -> Any:
        a = np.asarray(a)
        if oracle.is_complex(a.dtype):
            return a.astype(np.complex128)
        if oracle.is_float(a.dtype):
            return a.astype(np.float64)
        return a

    try:
        with enable_x64(True):
            outs = jax.tree_util.tree_leaves(jax.jit(fn)(*[widen(a) for a in args]))
            outs = [np.asarray(o) for o in outs]
    except Exception:  # noqa: BLE001 - no reference; the caller says so
        return None
    if len(outs) != len(outputs):
        return None
    for o, want in zip(outs, outputs):
        if o.shape != want.shape:
            return None
        narrow = oracle.is_float(want.dtype) or oracle.is_complex(want.dtype)
        if narrow and o.dtype not in (np.float64, np.complex128):
            return None
        if not narrow and o.dtype != want.dtype:
            return None
    return outs
