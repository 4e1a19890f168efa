"""A-priori forward error bounds for the tests that compare compiled float32 paths with each other.

Compiled paths sum dot products and reductions in an order that follows the CPU (vector width,
tiling, FMA), so two correct paths can differ by many ULP on one machine and agree on another. A
test that fixes a ULP count holds on one CPU only. What holds on every CPU is the standard error
analysis (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3): a sum or dot product of
n terms computed in any order, with or without FMA, is within gamma_n * sum|a_i b_i| of the exact
value, gamma_n = n*u / (1 - n*u), u the unit roundoff (2^-24 for float32). The bounds here carry that
through a computation (a ``Bounded`` value: the exact value, computed in float64, and a bound on the
error of any float32 evaluation of it), so a test asserts each path is within the bound of the f64
ideal and two paths are within the sum of their bounds of each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U32 = 2.0**-24  # unit roundoff of float32 (round to nearest)

# Accuracy allowed an elementary function of a math library (tanh, exp, log1p, ...), in ULP of its
# float32 result. XLA's and IREE's float32 approximations are specified within 1-3 ULP (XLA: exp,
# log1p, tanh 1-2 ULP; measured here: at most 2 ULP from the correctly rounded value); 4 leaves a
# margin for another FMA contraction of the polynomial.
LIB_ULP = 4


def gamma(n: int, u: float = U32) -> float:
    """gamma_n = n u / (1 - n u): the relative error bound of n floating-point operations in a row."""
    assert n * u < 1, (n, u)
    return n * u / (1 - n * u)


def ulp_bound(y: np.ndarray, u: float = U32) -> np.ndarray:
    """An upper bound on one ULP of |y| (2u|y|, or the smallest subnormal spacing for y near 0)."""
    return np.maximum(2 * u * np.abs(y), np.float64(np.finfo(np.float32).smallest_subnormal))


@dataclass(frozen=True)
class Bounded:
    """An exact value (float64) and a bound on |computed - value| for any float32 evaluation."""

    value: np.ndarray
    err: np.ndarray

    @staticmethod
    def exact(x) -> Bounded:
        x = np.asarray(x, np.float64)
        return Bounded(x, np.zeros_like(x))

    @property
    def magnitude(self) -> np.ndarray:
        """A bound on |computed value|."""
        return np.abs(self.value) + self.err


def dense(a: Bounded, w, b=None, u: float = U32) -> Bounded:
    """a @ w + b, summed in any order (n = fan-in products, plus the bias): each output within
    gamma_n * (sum_i |a_i w_i| + |b|) of the exact dot product of the computed inputs, plus the input
    error carried through |w|."""
    w = np.asarray(w, np.float64)
    n = w.shape[0] + (b is not None)
    value, mag = a.value @ w, a.magnitude @ np.abs(w)
    if b is not None:
        b = np.asarray(b, np.float64)
        value, mag = value + b, mag + np.abs(b)
    return Bounded(value, a.err @ np.abs(w) + gamma(n, u) * mag)


def elementwise(z: Bounded, f, lipschitz: float, lib_ulp: float = LIB_ULP, u: float = U32) -> Bounded:
    """f(z) for an f whose derivative is at most ``lipschitz`` in absolute value, computed by a
    library within ``lib_ulp`` ULP: |f^(z^) - f(z)| <= L |z^ - z| + lib_ulp * ulp(f(z^))."""
    value = f(z.value)
    err = lipschitz * z.err
    return Bounded(value, err + lib_ulp * ulp_bound(np.abs(value) + err, u))


def relu(z: Bounded) -> Bounded:
    return elementwise(z, lambda v: np.maximum(v, 0), 1.0, lib_ulp=0)


def gelu_tanh(z: Bounded, u: float = U32) -> Bounded:
    """jax.nn.gelu(approximate=True) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    Derivative at most 1.13 in absolute value. Evaluated in float32: t has relative error gamma_5
    (x^3, two products, the sum of same-sign terms, the scaling), and |t| sech^2(t) <= 0.45 carries it
    into tanh as at most 0.45 gamma_5 absolute; tanh adds LIB_ULP ULP (<= 2 LIB_ULP u absolute); 1 + tanh
    one rounding (<= 2u); times x/2 and the final rounding gamma_2 relative. In all:
    |gelu^ - gelu| <= |x|/2 (0.45 gamma_5 + (2 LIB_ULP + 2) u) + gamma_2 |gelu|.
    """
    c = np.sqrt(2 / np.pi)

    def f(x):
        return 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3)))

    value = f(z.value)
    x = z.magnitude
    rounding = 0.5 * x * (0.45 * gamma(5, u) + (2 * LIB_ULP + 2) * u) + gamma(2, u) * (np.abs(value) + 1.13 * z.err)
    return Bounded(value, 1.13 * z.err + rounding)


def flax_dense(a: Bounded, params: dict, u: float = U32) -> Bounded:
    """A float32 flax ``nn.Dense`` with its params ({"kernel", "bias"})."""
    return dense(a, np.asarray(params["kernel"]), np.asarray(params["bias"]) if "bias" in params else None, u)


def assert_within(got, ideal, bound, what: str = "") -> None:
    """|got - ideal| <= bound elementwise, with the worst element named on failure."""
    got = np.asarray(got, np.float64)
    ideal, bound = np.broadcast_to(np.asarray(ideal, np.float64), got.shape), np.broadcast_to(bound, got.shape)
    excess = np.abs(got - ideal) - bound
    if np.any(excess > 0) or not np.all(np.isfinite(got)):
        i = np.unravel_index(int(np.nanargmax(excess)), got.shape) if got.size else ()
        raise AssertionError(f"{what}: |got - ideal| exceeds the error bound at {i}: got {got[i]!r}, ideal "
                             f"{ideal[i]!r}, |diff| {abs(got[i] - ideal[i]):.3g} > bound {bound[i]:.3g}")
