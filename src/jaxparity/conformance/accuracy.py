"""The accuracy JAX documents for each primitive: the tolerances its own tests accept.

JAX's op tests (``tests/lax_test.py::testOpAgainstNumpy``) check each elementwise op against a
numpy/scipy reference with ``assertAllClose(atol=tol, rtol=tol)``, i.e.
``|got - want| <= tol + tol * |want|``, where ``tol`` is the op's own entry in
``lax_test_util.lax_ops()`` for that dtype if it has one, else
``public_test_util().default_tolerance()[dtype]``. That is the bar an XLA result has to miss
before the suite calls it *XLA's error*.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

__all__ = ["Bar", "documented_bar", "within_bar"]

# lax_test_util names ops after their lax functions; the harnesses name primitives.
_PRIMITIVE = {"betainc": "regularized_incomplete_beta", "bitwise_and": "and", "bitwise_or": "or",
              "bitwise_xor": "xor", "bitwise_not": "not"}


@dataclass(frozen=True)
class Bar:
    """``|got - want| <= tol + tol*|want|`` with the tolerance's origin, for the report."""

    tol: float
    source: str

    def __repr__(self) -> str:
        return f"tol={self.tol:g} ({self.source})"


@cache
def _op_tolerances() -> dict[tuple[str, str], float]:
    from ..jaxcompat import lax_test_util

    out: dict[tuple[str, str], float] = {}
    for rec in lax_test_util().lax_ops():
        if rec.tol is None:
            continue
        prim = _PRIMITIVE.get(rec.op, rec.op)
        if isinstance(rec.tol, dict):
            for dt, tol in rec.tol.items():
                out[(prim, np.dtype(dt).name)] = float(tol)
        else:
            for dt in rec.dtypes:
                out[(prim, np.dtype(dt).name)] = float(rec.tol)
    return out


def documented_bar(primitive: str, dtype: np.dtype) -> Bar:
    """The tolerance JAX's tests give ``primitive`` on ``dtype``, and where it comes from."""
    from ..jaxcompat import public_test_util

    name = np.dtype(dtype).name
    tol = _op_tolerances().get((primitive, name))
    if tol is not None:
        return Bar(float(tol), f"lax_test_util.lax_ops() {primitive}/{name}")
    return Bar(float(public_test_util().default_tolerance()[np.dtype(dtype)]), f"default_tolerance()[{name}]")


def within_bar(got: np.ndarray, want: np.ndarray, bar: Bar) -> np.ndarray:
    """Elementwise ``|got - want| <= tol + tol*|want|``, as numpy's ``assert_allclose`` (which
    JAX's tests call) computes it: in float64, complex values by modulus; NaN matches NaN."""
    got, want = np.asarray(got), np.asarray(want)
    wide = np.complex128 if got.dtype.kind == "c" or want.dtype.kind == "c" else np.float64
    g, w = got.astype(wide), want.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(g - w) <= bar.tol + bar.tol * np.abs(w)
    return close | (g == w) | (np.isnan(g) & np.isnan(w))
