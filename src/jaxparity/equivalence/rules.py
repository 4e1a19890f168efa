"""Canonical forms of outputs that are defined only up to sign, phase or order (numpy only).

Each rule takes the outputs of one equation as two paths computed them (the ``got`` path and the
``expected`` baseline, by role) and returns the leaf's two arrays brought to a common form: sets
sorted, vectors turned to the baseline's sign or phase. Only the freedom the math leaves is used:
a vector's phase is chosen from the vector's own inner product with the baseline's, never from
the values of other elements, so a real difference is never aligned away. A rule that lacks what it
needs (a sibling output the function does not return) compares as is and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["OutputRule", "align", "RULES"]


@dataclass(frozen=True)
class OutputRule:
    """An output that comes straight from an operation whose results are not unique.

    ``group`` names every output of the same equation that the function returns, by role, so that
    vectors can follow their values' order (``(("values", "out/0"), ("vectors", "out/1"))``).
    """

    primitive: str
    role: str
    group: tuple[tuple[str, str], ...]
    params: tuple[tuple[str, Any], ...] = ()  # the op's own params, as the jaxpr holds them

    def leaf(self, role: str) -> str | None:
        return dict(self.group).get(role)


Arrays = Mapping[str, np.ndarray]  # role -> array, for the roles the function returns


# -- building blocks ------------------------------------------------------------------------------
def _phases(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Per column (last axis but one is the vector's), the unit factor that turns got's column most
    nearly into expected's: sign(<e, g>) for real vectors, its phase for complex ones; 1 where the
    inner product is 0 or not finite (nothing to align by), and where the phase is 1 to within the
    rounding of the two columns (they already agree as computed: turning them would only round)."""
    wide = np.complex128 if got.dtype.kind == "c" else np.float64
    c = np.sum(np.conj(expected.astype(wide)) * got.astype(wide), axis=-2)  # [..., k]
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = c / np.abs(c)
    same = np.abs(unit - 1) <= 64 * _eps(got.dtype)
    return np.where(np.isfinite(unit) & (np.abs(c) > 0) & ~same, unit, 1)


def _eps(dtype: np.dtype) -> float:
    dtype = np.dtype(dtype)
    part = np.float32 if dtype in (np.complex64, np.float32) else np.float64 if dtype.itemsize >= 8 else np.float32
    return float(np.finfo(part).eps)


def _turn_columns(x: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """x with column j multiplied by conj(unit[j]): exact for signs; for a phase one rounding of a
    complex product, and none when the phase is exactly 1 (as it is for identical columns)."""
    if x.dtype.kind != "c":
        return np.where(unit[..., None, :] < 0, -x, x).astype(x.dtype)
    turned = (x.astype(np.complex128) * np.conj(unit)[..., None, :]).astype(x.dtype)
    return np.where(unit[..., None, :] == 1, x, turned)


def _take_columns(x: np.ndarray, order: np.ndarray) -> np.ndarray:
    return np.take_along_axis(x, order[..., None, :], axis=-1)


def _lexorder(values: np.ndarray, descending: bool = False) -> np.ndarray:
    """Sort order along the last axis; complex by (real, imag). NaNs last."""
    v = -values if descending else values
    if v.size == 0:
        return np.zeros(v.shape, np.int64)
    if v.dtype.kind == "c":
        flat = v.reshape(-1, v.shape[-1])
        order = np.stack([np.lexsort((r.imag, r.real)) for r in flat])
        return order.reshape(v.shape)
    return np.argsort(v.astype(np.float64), axis=-1, kind="stable")


def _sorted_set(got: np.ndarray, expected: np.ndarray, descending: bool = False) -> tuple[np.ndarray, np.ndarray]:
    return (np.take_along_axis(got, _lexorder(got, descending), -1),
            np.take_along_axis(expected, _lexorder(expected, descending), -1))


def _aligned_vectors(got: np.ndarray, expected: np.ndarray, got_order: np.ndarray | None,
                     expected_order: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Columns put in their values' order on each side, then got's turned to expected's sign/phase."""
    if got_order is not None and expected_order is not None:
        # Only the first k columns belong to the k values (full_matrices=True adds a basis of the rest).
        k = got_order.shape[-1]
        got = np.concatenate([_take_columns(got[..., :k], got_order), got[..., k:]], axis=-1)
        expected = np.concatenate([_take_columns(expected[..., :k], expected_order), expected[..., k:]], axis=-1)
    return _turn_columns(got, _phases(got, expected)), expected


# -- the rules ------------------------------------------------------------------------------------
def _eigen(rule: OutputRule, got: Arrays, expected: Arrays, descending: bool = False, values: str = "values"
           ) -> tuple[np.ndarray, np.ndarray, str]:
    """Eigenvalues (or singular values) as a sorted set; vectors in that order, up to sign/phase."""
    if rule.role == values:
        g, e = _sorted_set(got[values], expected[values], descending)
        return g, e, f"{rule.primitive} {values} compared as a sorted set (their order is not defined)"
    have = values in got and values in expected
    orders = ((_lexorder(got[values], descending), _lexorder(expected[values], descending)) if have
              else (None, None))
    g, e = got[rule.role], expected[rule.role]
    rows = rule.role == "vt"  # svd's V^H holds the vectors in its rows
    if rows:
        g, e = np.swapaxes(g, -1, -2), np.swapaxes(e, -1, -2)
    g, e = _aligned_vectors(g, e, *orders)
    if rows:
        g, e = np.swapaxes(g, -1, -2), np.swapaxes(e, -1, -2)
    how = f"in the order of their {values}" if have else "as computed (the values are not an output)"
    return g, e, f"{rule.primitive} {rule.role} compared up to the sign/phase of each vector, {how}"


def _svd(rule: OutputRule, got: Arrays, expected: Arrays) -> tuple[np.ndarray, np.ndarray, str]:
    return _eigen(rule, got, expected, descending=True, values="s")


def _qr(rule: OutputRule, got: Arrays, expected: Arrays) -> tuple[np.ndarray, np.ndarray, str]:
    """Q R = (Q D*)(D R) for any diagonal D of signs/phases: D is read from Q's columns (or, with
    no Q among the outputs, from R's diagonal) and applied to both."""
    if "q" in got and "q" in expected:
        unit = _phases(got["q"], expected["q"])
    else:
        unit = _phases(np.swapaxes(got["r"], -1, -2), np.swapaxes(expected["r"], -1, -2))
    if rule.role == "q":
        g = _turn_columns(got["q"], unit)
    else:
        k = got["r"].shape[-2]
        g = np.swapaxes(_turn_columns(np.swapaxes(got["r"], -1, -2), unit[..., :k]), -1, -2)
    return g, expected[rule.role], f"qr {rule.role} compared up to a diagonal of signs/phases (Q D*, D R)"


def _schur(rule: OutputRule, got: Arrays, expected: Arrays) -> tuple[np.ndarray, np.ndarray, str]:
    """A Schur form is unique up to a unitary diagonal D (Q D*, D T D*) once the order of the
    eigenvalues on T's diagonal is fixed; that order is compared as computed."""
    if "q" not in got or "q" not in expected:
        return got[rule.role], expected[rule.role], "schur compared as computed (Q is not an output)"
    unit = _phases(got["q"], expected["q"])
    if rule.role == "q":
        return _turn_columns(got["q"], unit), expected["q"], "schur Q compared up to the phase of each column"
    t = _turn_columns(got["t"], unit)  # T D* ...
    t = np.swapaxes(_turn_columns(np.swapaxes(t, -1, -2), np.conj(unit)), -1, -2)  # ... then D (T D*)
    return t, expected["t"], "schur T compared as D T D* for the phases D of Q's columns"


def _unstable_sort(rule: OutputRule, got: Arrays, expected: Arrays) -> tuple[np.ndarray, np.ndarray, str]:
    """Among equal keys an unstable sort may put the other operands in any order: within each run of
    equal keys both sides' values are sorted before they are compared. Keys compare as computed."""
    num_keys = int(dict(rule.params).get("num_keys", 1))
    keys = [f"operand{i}" for i in range(num_keys)]
    if rule.role in keys or not all(k in got and k in expected for k in keys):
        how = "as computed" if rule.role in keys else "as computed (the keys are not an output)"
        return got[rule.role], expected[rule.role], f"sort {rule.role} compared {how}"
    axis = int(dict(rule.params).get("dimension", -1))
    return (_sort_within_ties(got[rule.role], [got[k] for k in keys], axis),
            _sort_within_ties(expected[rule.role], [expected[k] for k in keys], axis),
            "values among equal sort keys compared as a set (an unstable sort may order them either way)")


def _sort_within_ties(x: np.ndarray, keys: list[np.ndarray], axis: int) -> np.ndarray:
    x, keys = np.moveaxis(x, axis, -1), [np.moveaxis(k, axis, -1) for k in keys]
    out = x.copy()
    flat_x, flat_k = out.reshape(-1, x.shape[-1]), [k.reshape(-1, x.shape[-1]) for k in keys]
    for r in range(flat_x.shape[0]):
        same = np.ones(x.shape[-1] - 1, bool)
        for k in flat_k:
            a, b = k[r][1:], k[r][:-1]
            same &= (a == b) | (np.isnan(a.astype(np.complex128)) & np.isnan(b.astype(np.complex128)))
        start = 0
        for i in range(1, x.shape[-1] + 1):
            if i == x.shape[-1] or not same[i - 1]:
                if i - start > 1:
                    flat_x[r, start:i] = np.sort(flat_x[r, start:i])
                start = i
    return np.moveaxis(out, -1, axis)


RULES = {"eigh": _eigen, "eig": _eigen, "svd": _svd, "qr": _qr, "schur": _schur, "sort": _unstable_sort}


def align(rule: OutputRule, got: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]
          ) -> tuple[np.ndarray, np.ndarray, str]:
    """``(got', expected', description)``: the leaf of ``rule.role`` on both sides in canonical form.

    ``got``/``expected`` map leaf names to arrays (every output of each path). Shapes and dtypes are
    kept, so the ordinary metrics measure the result.
    """
    by_role = lambda outs: {role: outs[name] for role, name in rule.group if name in outs}  # noqa: E731
    fn = RULES.get(rule.primitive)
    g, e = by_role(got), by_role(expected)
    if fn is None or rule.role not in g or rule.role not in e:
        return got[rule.leaf(rule.role) or ""], expected[rule.leaf(rule.role) or ""], "compared as computed"
    return fn(rule, g, e)
