"""Semantic fingerprint: which candidate semantics reproduces a path's outputs.

The program is traced once; each candidate :class:`~jaxparity.interpreter.Semantics` (declared
per-op rounding, rounding elided before a widening convert, everything in float32, narrow
accumulation, flushed subnormals, fused multiply-adds) evaluates the same jaxpr, and its outputs
are compared with the observed ones in the observed dtypes. A candidate that reproduces every
output bit for bit names the semantics the path actually ran; otherwise the closest one hints at
it. Candidates that give identical outputs on these inputs cannot be told apart by them: each
match lists the others it coincides with (``same_as``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ...interpreter import Semantics, evaluate_jaxpr
from ...jaxcompat import enable_x64
from ...metrics import ulp_distance
from ...rounding import is_float_dtype, round_to_dtype

__all__ = ["CANDIDATES", "CandidateMatch", "Fingerprint", "fingerprint"]

CANDIDATES: tuple[Semantics, ...] = (
    Semantics.declared(),
    Semantics.skip_widened(),
    Semantics.f32_everywhere(),
    Semantics.narrow_accumulation(),
    Semantics.flush_subnormals(),
    Semantics.fma_contraction(),
)


@dataclass(frozen=True)
class CandidateMatch:
    """How one candidate's outputs compare with the observed ones (in the observed dtypes).

    ``exact``: every element equal, the sign of zero included, NaN matching NaN.
    ``max_ulp``: the largest ULP distance (``+0``/``-0`` count as 0 ULP apart, so a
    sign-of-zero difference is inexact at 0 ULP); None when a NaN faces a number.
    ``n_differ``: elements that are not equal in that sense. ``mean_abs``: mean absolute
    difference over all elements (those where a NaN faces a number left out).
    ``same_as``: the other candidates whose outputs are identical to this one's.
    """

    candidate: str
    description: str
    exact: bool
    max_ulp: int | None
    n_differ: int
    mean_abs: float
    same_as: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fingerprint:
    """All candidates, best first: exact ones, then by (max ULP, mean abs difference)."""

    matches: tuple[CandidateMatch, ...]
    best: str | None  # the exact match (the first candidate if several), else the closest
    exact: bool  # whether `best` reproduces the observed outputs bit for bit

    def describe(self) -> str:
        """One line per candidate, for humans."""
        lines = []
        for m in self.matches:
            how = ("exact" if m.exact else "NaN mismatch" if m.max_ulp is None else
                   f"{m.n_differ} differ, max {m.max_ulp} ULP, mean abs {m.mean_abs:.3g}")
            same = f" (same outputs as {', '.join(m.same_as)})" if m.same_as else ""
            lines.append(f"{m.candidate}: {how}{same}: {m.description}")
        return "\n".join(lines)


def _as_observed(value: Any, like: np.ndarray) -> np.ndarray:
    """A candidate's output in the observed leaf's dtype (one rounding where they differ)."""
    if jax.dtypes.issubdtype(getattr(value, "dtype", None), jax.dtypes.prng_key):
        value = jax.random.key_data(value)
    value = np.asarray(value)
    if value.shape != like.shape:
        raise ValueError(f"observed output has shape {like.shape}, the program gives {value.shape}")
    if value.dtype == like.dtype:
        return value
    if like.dtype.kind == "c" and value.dtype.kind == "c":
        real = np.dtype(np.float32 if like.dtype.itemsize == 8 else np.float64)
        return (round_to_dtype(value.real.astype(np.float64), real)
                + 1j * round_to_dtype(value.imag.astype(np.float64), real)).astype(like.dtype)
    return round_to_dtype(value, like.dtype)


def _observed_leaf(o: Any) -> np.ndarray:
    if jax.dtypes.issubdtype(getattr(o, "dtype", None), jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(o))
    return np.asarray(o)


def _real_view(a: np.ndarray) -> np.ndarray:
    """Complex arrays as their (real, imag) float pairs, so ULPs apply to each part."""
    if a.dtype.kind == "c":
        return a.view(np.float32 if a.dtype.itemsize == 8 else np.float64)
    return a


def _leaf_stats(got: np.ndarray, want: np.ndarray) -> tuple[int, int | None, float, int]:
    """(n_differ, max_ulp or None, sum of abs differences, count summed) for one leaf."""
    got, want = _real_view(got).reshape(-1), _real_view(want).reshape(-1)
    if got.size == 0:
        return 0, 0, 0.0, 0
    ulps = ulp_distance(got, want)
    if is_float_dtype(want.dtype):
        g, w = got.astype(np.float64), want.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        same = both_nan | ((g == w) & (np.signbit(g) == np.signbit(w)))
        with np.errstate(invalid="ignore", over="ignore"):
            absdiff = np.where(same, 0.0, np.abs(g - w))
    else:
        same = got == want
        absdiff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    counted = ulps >= 0
    max_ulp = None if (~counted).any() else int(ulps.max())
    return int((~same).sum()), max_ulp, float(absdiff[counted].sum()), int(counted.sum())


def _bits(leaves: Sequence[np.ndarray]) -> tuple:
    """A hashable identity of outputs: raw bytes, with every NaN made the same."""
    key = []
    for a in leaves:
        a = np.ascontiguousarray(a)
        if is_float_dtype(a.dtype) or a.dtype.kind == "c":
            r = _real_view(a).copy()
            r[np.isnan(r.astype(np.float64))] = np.nan
            a = r
        key.append((str(a.dtype), a.shape, a.tobytes()))
    return tuple(key)


def fingerprint(fn: Callable[..., Any], args: tuple, observed: Sequence[np.ndarray], *,
                candidates: Sequence[Semantics] = CANDIDATES) -> Fingerprint:
    """Evaluate `fn(*args)` under each candidate semantics and compare with `observed`.

    `observed` are the path's output leaves, in ``jax.tree_util.tree_leaves(fn(*args))``
    order (numpy arrays; each in the dtype the path produced it). The program is traced
    once, with x64 disabled as ``interpret`` does. Raises ``InterpretError`` when the
    program cannot be interpreted, ``ValueError`` when `observed` does not fit its outputs.
    """
    with enable_x64(False):
        closed = jax.make_jaxpr(fn)(*args)
    leaves = jax.tree_util.tree_leaves(args)
    observed = [_observed_leaf(o) for o in observed]
    if len(observed) != len(closed.jaxpr.outvars):
        raise ValueError(f"the program has {len(closed.jaxpr.outvars)} outputs, "
                         f"{len(observed)} observed")
    results = []
    for sem in candidates:
        outs = [_as_observed(v, o) for v, o in zip(evaluate_jaxpr(closed, leaves, mode=sem),
                                                   observed)]
        n_differ, total, count = 0, 0.0, 0
        max_ulp: int | None = 0
        for got, want in zip(outs, observed):
            n, u, s, c = _leaf_stats(got, want)
            n_differ, total, count = n_differ + n, total + s, count + c
            max_ulp = None if max_ulp is None or u is None else max(max_ulp, u)
        results.append((sem, _bits(outs), n_differ, max_ulp, total / count if count else 0.0))
    matches = []
    for sem, bits, n_differ, max_ulp, mean_abs in results:
        same = tuple(s.name for s, b, *_ in results if b == bits and s is not sem)
        matches.append(CandidateMatch(sem.name, sem.description, n_differ == 0, max_ulp,
                                      n_differ, mean_abs, same))
    order = sorted(range(len(matches)), key=lambda i: (
        not matches[i].exact, matches[i].max_ulp is None, matches[i].max_ulp or 0,
        matches[i].mean_abs, matches[i].n_differ, i))
    ranked = tuple(matches[i] for i in order)
    return Fingerprint(ranked, ranked[0].candidate if ranked else None,
                       bool(ranked and ranked[0].exact))
