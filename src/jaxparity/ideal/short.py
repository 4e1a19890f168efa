"""The short value a rounded constant plausibly stands for: a named constant (pi, sqrt(2/pi)...), a short
rational p/q (q at most ``MAX_DENOMINATOR``) or a short decimal (at most ``MAX_DIGITS`` significant digits),
accepted only where it rounds to exactly the constant in its dtype and takes fewer digits to write than the
constant itself (0.5, 2.0 and 1/8 are their own shortest form: nothing is said of them).

Which short value the user meant cannot be known: every value in the constant's rounding interval gives
the same program (``2/255`` and ``1/127`` both round to bfloat16's 0.007874). ``ShortValue`` therefore keeps
the interval beside the simplest candidate, and the measurement uses both (``ideal.constants``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..rounding import is_float_dtype

__all__ = ["MAX_DENOMINATOR", "MAX_DIGITS", "NAMED", "ShortValue", "rounding_interval", "short_value"]

MAX_DENOMINATOR = 1000
MAX_DIGITS = 4
# Constants a program computes at trace time by name; each also as its negative.
NAMED: tuple[tuple[str, float], ...] = (
    ("pi", math.pi), ("pi/2", math.pi / 2), ("pi/4", math.pi / 4), ("2*pi", 2 * math.pi), ("1/pi", 1 / math.pi),
    ("e", math.e), ("sqrt(2)", math.sqrt(2)), ("1/sqrt(2)", 1 / math.sqrt(2)), ("sqrt(3)", math.sqrt(3)),
    ("sqrt(2/pi)", math.sqrt(2 / math.pi)), ("sqrt(pi)", math.sqrt(math.pi)), ("2/sqrt(pi)", 2 / math.sqrt(math.pi)),
    ("log(2)", math.log(2)), ("1/log(2)", 1 / math.log(2)), ("log(10)", math.log(10)),
    ("0.044715", 0.044715),  # the tanh approximation of GELU
)
# Family order among candidates written in as many digits: a name, a reciprocal (1/6), a decimal, a fraction.
_NAMED, _RECIPROCAL, _DECIMAL, _FRACTION = range(4)


@dataclass(frozen=True)
class ShortValue:
    """The simplest short value that rounds to a constant, and the others found."""

    text: str  # "1/6", "0.1", "sqrt(2/pi)"
    value: float
    alternatives: tuple[str, ...]  # the simplest of each other kind (name, fraction, decimal) that rounds to it
    interval: tuple[float, float]  # every value strictly inside rounds to the constant


def rounding_interval(x: float, dtype: np.dtype) -> tuple[float, float]:
    """The values that round to ``x`` (a finite value of ``dtype``): from the midpoint with its lower
    neighbour to the midpoint with its upper one (ties at the ends go either way)."""
    v = np.asarray(x, dtype)
    with np.errstate(over="ignore"):  # the largest finite value's neighbour is infinity: handled below
        down = float(np.nextafter(v, np.asarray(-np.inf, dtype)))
        up = float(np.nextafter(v, np.asarray(np.inf, dtype)))
    # The largest finite value (finfo.min as a mask's fill): its neighbour past it is infinity, but rounding
    # goes to infinity only from the midpoint with where the next value would be, one spacing further.
    if math.isinf(up):
        up = 2 * float(v) - down
    if math.isinf(down):
        down = 2 * float(v) - up
    return (float(v) + down) / 2, (float(v) + up) / 2


def short_value(x: float, dtype: np.dtype | str) -> ShortValue | None:
    """The simplest short value that rounds to ``x`` in ``dtype`` and is not ``x`` itself, where it takes
    fewer digits to write than ``x``; None otherwise (``x`` exact, non-finite, the largest finite, zero, or no
    such value)."""
    dtype = np.dtype(dtype)
    if not is_float_dtype(dtype) or not math.isfinite(x) or x == 0 or np.dtype(dtype).itemsize >= 8:
        return None
    with np.errstate(over="ignore"):
        past = float(np.nextafter(np.asarray(abs(x), dtype), np.asarray(np.inf, dtype)))
    if math.isinf(past):
        return None  # finfo.max or finfo.min: "as large as there is" (a mask's fill), not a rounded number
    lo, hi = rounding_interval(x, dtype)
    sign, a, b = (1, lo, hi) if x > 0 else (-1, -hi, -lo)
    exact = Fraction(abs(x))
    found = [c for c in (*_named(a, b), _fraction(a, b), *_decimals(exact, a, b)) if c is not None
             and c[2] != exact and _rounds_to(sign * float(c[2]), x, dtype)]
    own = _digits_of(exact)
    found = sorted((c for c in found if c[0] < own), key=lambda c: (c[0], c[1]))
    if not found:
        return None
    minus = "-" if sign < 0 else ""
    families = {_kind(found[0])}
    others = []
    for c in found[1:]:  # the simplest of each other family (1/10 is no other value than 0.1)
        if _kind(c) not in families and c[2] != found[0][2]:
            families.add(_kind(c))
            others.append(minus + c[3])
    return ShortValue(minus + found[0][3], sign * float(found[0][2]), tuple(others), (lo, hi))


Candidate = tuple[int, int, Fraction, str]  # (digits, family, value, text)


def _kind(c: Candidate) -> int:
    return _FRACTION if c[1] == _RECIPROCAL else c[1]


def _rounds_to(v: float, x: float, dtype: np.dtype) -> bool:
    return float(np.asarray(v).astype(dtype)) == x


def _named(a: float, b: float) -> list[Candidate]:
    return [(1, _NAMED, Fraction(v), name) for name, v in NAMED if a < v < b]


def _fraction(a: float, b: float) -> Candidate | None:
    """The simplest p/q strictly between a and b (0 < a < b), where q is 2 to ``MAX_DENOMINATOR``."""
    f = _simplest_between(Fraction(a), Fraction(b))
    if f is None or not 1 < f.denominator <= MAX_DENOMINATOR:
        return None
    return (_ndigits(f.numerator) + _ndigits(f.denominator), _RECIPROCAL if f.numerator == 1 else _FRACTION, f,
            f"{f.numerator}/{f.denominator}")


def _simplest_between(lo: Fraction, hi: Fraction | None, depth: int = 0) -> Fraction | None:
    """The fraction of smallest denominator strictly between lo and hi (hi None: infinity), by continued
    fractions; None past 40 terms (no short fraction there anyway)."""
    n = math.floor(lo) + 1
    if hi is None or n < hi:
        return Fraction(n)
    if depth > 40:
        return None
    whole = math.floor(lo)
    inner = _simplest_between(1 / (hi - whole), None if lo == whole else 1 / (lo - whole), depth + 1)
    return None if inner is None else whole + 1 / inner


def _decimals(exact: Fraction, a: float, b: float) -> list[Candidate]:
    """The decimals of 1 to ``MAX_DIGITS`` significant digits next to the constant, inside (a, b)."""
    out = []
    top = math.floor(math.log10(float(exact)))
    for n in range(1, MAX_DIGITS + 1):
        step = Fraction(10) ** (top - n + 1)
        k = math.floor(exact / step)
        for m in (k, k + 1):
            v = m * step
            if m and a < v < b:
                out.append((_significant(m), _DECIMAL, v, _decimal_text(v)))
    return out


def _digits_of(exact: Fraction) -> int:
    """How many digits the constant itself takes: its dyadic fraction p/2^k or its exact decimal, the shorter."""
    p, q = exact.numerator, exact.denominator
    if q == 1:
        return _significant(p)
    k = q.bit_length() - 1  # q is a power of two
    return min(_ndigits(p) + _ndigits(q), _significant(p * 5 ** k))


def _ndigits(n: int) -> int:
    return len(str(abs(n)))


def _significant(n: int) -> int:
    return len(str(abs(n)).rstrip("0")) or 1


def _decimal_text(v: Fraction) -> str:
    return f"{float(v):.12g}"  # v has at most MAX_DIGITS significant digits: this is them
