"""Results that are right in more than one way: decompositions and unspecified orders.

An eigenvector may come back negated (or, complex, times any unit phase), a QR factor pair with
opposite signs on R's diagonal, LU with another pivot among equal candidates, top_k indices of
tied values in another order. ``agree_up_to_symmetry`` checks, independently of the tool, that
two results (eager and declared) are the same answer up to exactly those freedoms, within the
dtype's documented tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SYMMETRIC_GROUPS", "agree_up_to_symmetry", "same_up_to_phase"]


def _close(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    a, b = np.asarray(a, np.complex128), np.asarray(b, np.complex128)
    scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
    return bool(np.all(np.abs(a - b) <= tol * scale))


def _columns_up_to_phase(u: np.ndarray, v: np.ndarray, tol: float) -> bool:
    """Every column of ``u`` equals the matching column of ``v`` times a unit scalar."""
    u, v = np.asarray(u, np.complex128), np.asarray(v, np.complex128)
    inner = np.sum(np.conj(v) * u, axis=-2, keepdims=True)  # <v_j, u_j>
    phase = np.where(np.abs(inner) > 0, inner / np.maximum(np.abs(inner), 1e-300), 1.0)
    return _close(u, v * phase, tol)


def same_up_to_phase(got: np.ndarray, want: np.ndarray) -> bool:
    """Is each column (vector along the last axis but one) of ``got`` that of ``want`` times a
    unit factor: -1 or 1 exactly for real vectors, a phase within 4 ULP of the dtype for complex?"""
    got, want = np.asarray(got), np.asarray(want)
    if got.ndim < 2 or got.dtype.kind not in "fcV":
        return False
    if got.dtype.kind != "c":
        g, w = got.astype(np.float64), want.astype(np.float64)
        sign = np.where(np.sum(g * w, axis=-2, keepdims=True) < 0, -1.0, 1.0)
        return bool(np.all((g == w * sign) | (np.isnan(g) & np.isnan(w))))
    eps = float(np.finfo(got.real.dtype).eps)
    return _columns_up_to_phase(got, want, 4 * eps)


def _eigh(e: Sequence[np.ndarray], d: Sequence[np.ndarray], args: Sequence[Any], tol: float) -> bool:
    (ve, we), (vd, wd) = e, d
    return _close(we, wd, tol) and _columns_up_to_phase(ve, vd, tol)


def _svd(e: Sequence[np.ndarray], d: Sequence[np.ndarray], args: Sequence[Any], tol: float) -> bool:
    if len(e) == 1:
        return _close(e[0], d[0], tol)
    (se, ue, vhe), (sd, ud, vhd) = _svd_parts(e), _svd_parts(d)
    if not _close(se, sd, tol):
        return False
    k = se.shape[-1]  # columns beyond the singular values span a null space: any basis will do
    a = np.asarray(args[0], np.complex128)
    re = (ue[..., :, :k] * se[..., None, :]) @ vhe[..., :k, :]
    rd = (ud[..., :, :k] * sd[..., None, :]) @ vhd[..., :k, :]
    return _close(re, a, tol) and _close(rd, a, tol)


def _svd_parts(out: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = next(o for o in out if o.ndim == min(x.ndim for x in out))
    u, vh = [o for o in out if o is not s]
    return np.asarray(s, np.float64), np.asarray(u, np.complex128), np.asarray(vh, np.complex128)


def _qr(e: Sequence[np.ndarray], d: Sequence[np.ndarray], args: Sequence[Any], tol: float) -> bool:
    """Q_e = Q_d P and R_e = P^H R_d for a diagonal unitary P (read off R's diagonals)."""
    (qe, re_), (qd, rd) = [np.asarray(x, np.complex128) for x in e], [np.asarray(x, np.complex128) for x in d]
    k = min(re_.shape[-2], re_.shape[-1])
    de = np.diagonal(re_[..., :k, :k], axis1=-2, axis2=-1)
    dd = np.diagonal(rd[..., :k, :k], axis1=-2, axis2=-1)
    ratio = np.conj(de) * dd
    p = np.where(np.abs(ratio) > 0, ratio / np.maximum(np.abs(ratio), 1e-300), 1.0)
    return (_close(qe[..., :, :k], qd[..., :, :k] * p[..., None, :], tol)
            and _close(re_[..., :k, :], np.conj(p)[..., :, None] * rd[..., :k, :], tol))


def _lu(e: Sequence[np.ndarray], d: Sequence[np.ndarray], args: Sequence[Any], tol: float) -> bool:
    a = np.asarray(args[0], np.complex128)
    for lu, _, perm in (e, d):
        lu = np.asarray(lu, np.complex128)
        m, n = lu.shape[-2:]
        k = min(m, n)
        lower = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
        upper = np.triu(lu[..., :k, :])
        permuted = np.take_along_axis(a, np.asarray(perm)[..., :, None].astype(np.int64), axis=-2)
        if not _close(lower @ upper, permuted, tol):
            return False
    return True


def _eig(e: Sequence[np.ndarray], d: Sequence[np.ndarray], args: Sequence[Any], tol: float) -> bool:
    we, wd = np.asarray(e[0], np.complex128), np.asarray(d[0], np.complex128)
    order_e = np.lexsort((np.round(we.imag, 4), np.round(we.real, 4)), axis=-1)
    order_d = np.lexsort((np.round(wd.imag, 4), np.round(wd.real, 4)), axis=-1)
    if not _close(np.take_along_axis(we, order_e, -1), np.take_along_axis(wd, order_d, -1), tol):
        return False
    for ve, vd in zip(e[1:], d[1:]):  # left/right eigenvectors, matched by eigenvalue order
        ve = np.take_along_axis(np.asarray(ve, np.complex128), order_e[..., None, :], -1)
        vd = np.take_along_axis(np.asarray(vd, np.complex128), order_d[..., None, :], -1)
        if not _columns_up_to_phase(ve, vd, tol):
            return False
    return True


def _top_k(e: Sequence[np.ndarray], d: Sequence[np.ndarray], args: Sequence[Any], tol: float) -> bool:
    (vals_e, idx_e), (vals_d, idx_d) = e[:2], d[:2]
    x = np.asarray(args[0])
    if not np.array_equal(np.asarray(vals_e, np.float64), np.asarray(vals_d, np.float64), equal_nan=True):
        return False
    # Indices may differ only between tied values: both must point at their reported values.
    for vals, idx in ((vals_e, idx_e), (vals_d, idx_d)):
        picked = np.take_along_axis(x.astype(np.float64), np.asarray(idx, np.int64), axis=-1)
        if not np.array_equal(picked, np.asarray(vals, np.float64), equal_nan=True):
            return False
    return True


_CHECKS = {"eigh": _eigh, "svd": _svd, "qr": _qr, "lu": _lu, "eig": _eig, "top_k": _top_k, "approx_top_k": _top_k}
SYMMETRIC_GROUPS = frozenset(_CHECKS)


def agree_up_to_symmetry(group: str, eager: Sequence[np.ndarray], declared: Sequence[np.ndarray],
                         args: Sequence[Any], tol: float) -> bool:
    """Are ``eager`` and ``declared`` (a harness's outputs) one answer, up to the sign, phase,
    pivot or tie order that ``group``'s operation leaves unspecified?"""
    check = _CHECKS.get(group)
    if check is None:
        return False
    try:
        with np.errstate(all="ignore"):
            return check(eager, declared, args, tol)
    except (ValueError, IndexError, StopIteration):
        return False
