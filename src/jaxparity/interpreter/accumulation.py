"""Narrow accumulation (``Semantics.sequential_narrow``): sums, dots and convs that round
their running sum to the narrow dtype after every addition, in index order."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxparity.rounding import round_to_dtype

from .primitives import _dot_operands

def _rounded(x: np.ndarray, dtype: Any) -> np.ndarray:
    """`x` rounded once to `dtype`, held in float64."""
    return round_to_dtype(np.asarray(x, np.float64), dtype).astype(np.float64)


def _accumulate(term: Callable[[int], np.ndarray], n: int, shape: Sequence[int],
                dtype: Any) -> np.ndarray:
    """0 + term(0) + term(1) + ... in index order, rounding to `dtype` after every addition."""
    acc = np.zeros(shape)
    for k in range(n):
        acc = _rounded(acc + term(k), dtype)
    return acc


def _seq_reduce_sum(p: dict, vals: list, dtype: Any) -> list:
    (x,) = vals
    axes = sorted(a % x.ndim for a in p["axes"])
    keep = [d for d in range(x.ndim) if d not in axes]
    xt = x.transpose(keep + axes).reshape([x.shape[d] for d in keep] + [-1])
    return [_accumulate(lambda k: _rounded(xt[..., k], dtype), xt.shape[-1], xt.shape[:-1], dtype)]


def _seq_dot_general(p: dict, vals: list, dtype: Any) -> list | None:
    lhs, rhs = vals
    if np.iscomplexobj(lhs) or np.iscomplexobj(rhs):
        return None
    a, b, shape = _dot_operands(p, lhs, rhs, np.float64)
    acc = _accumulate(lambda k: _rounded(a[:, :, k, None] * b[:, None, k, :], dtype),
                      a.shape[2], (a.shape[0], a.shape[1], b.shape[2]), dtype)
    return [acc.reshape(shape)]


def patches(x: np.ndarray, window: Sequence[int], strides: Sequence[int], padding: Sequence[tuple[int, int]],
            lhs_dilation: Sequence[int], rhs_dilation: Sequence[int]) -> np.ndarray:
    """Every window of ``x`` (N, C, *spatial) as ``lax.conv_general_dilated_patches`` gathers it:
    (N, C * prod(window) with C major, *out_spatial), read in numpy (views, one copy) where lax would
    compile a convolution with a one-hot kernel for every shape (Keras's MobileNetV3: 99 compiles, 6 s)."""
    nd = len(window)
    sp = (slice(None),) * 2
    if any(d != 1 for d in lhs_dilation):  # the input's elements spread apart, zeros between
        spread = np.zeros(x.shape[:2] + tuple((s - 1) * d + 1 for s, d in zip(x.shape[2:], lhs_dilation)), x.dtype)
        spread[sp + tuple(slice(None, None, d) for d in lhs_dilation)] = x
        x = spread
    x = np.pad(x, [(0, 0)] * 2 + [(max(lo, 0), max(hi, 0)) for lo, hi in padding])  # negative padding crops
    x = x[sp + tuple(slice(max(-lo, 0), x.shape[2 + i] - max(-hi, 0)) for i, (lo, hi) in enumerate(padding))]
    span = tuple((w - 1) * d + 1 for w, d in zip(window, rhs_dilation))
    if any(s < w for s, w in zip(x.shape[2:], span)):  # no window fits: an empty output
        return np.zeros((x.shape[0], x.shape[1] * math.prod(window))
                        + tuple(0 if s < w else (s - w) // t + 1 for s, w, t in zip(x.shape[2:], span, strides)), x.dtype)
    views = np.lib.stride_tricks.sliding_window_view(x, span, axis=tuple(range(2, 2 + nd)))  # N C *positions *span
    views = views[sp + tuple(slice(None, None, s) for s in strides) + tuple(slice(None, None, d) for d in rhs_dilation)]
    views = views.transpose(0, 1, *range(2 + nd, 2 + 2 * nd), *range(2, 2 + nd))  # N C *window *out
    return views.reshape(x.shape[0], -1, *views.shape[2 + nd:])


def _seq_conv(p: dict, vals: list, dtype: Any) -> list | None:
    """conv_general_dilated as patches (``patches``, exact: it only gathers) times the kernel, summed
    over (input feature, window position) in that order."""
    lhs, rhs = vals
    if p["batch_group_count"] != 1 or np.iscomplexobj(lhs) or np.iscomplexobj(rhs):
        return None
    dn = p["dimension_numbers"]
    lhs, rhs = lhs.transpose(dn.lhs_spec), rhs.transpose(dn.rhs_spec)  # N C *S, O I *W
    n, (o, i), win, g = lhs.shape[0], rhs.shape[:2], rhs.shape[2:], p["feature_group_count"]
    gathered = patches(np.asarray(lhs, np.float64), win, p["window_strides"], p["padding"], p["lhs_dilation"],
                       p["rhs_dilation"])  # N, C*W (C major), *out_spatial
    k = i * math.prod(win)
    pt = gathered.reshape(n, g, k, -1)  # C = g * i
    kt = rhs.reshape(g, o // g, k)
    acc = _accumulate(lambda j: _rounded(pt[:, :, None, j, :] * kt[None, :, :, j, None], dtype),
                      k, (n, g, o // g, pt.shape[-1]), dtype)
    return [acc.reshape(n, o, *gathered.shape[2:]).transpose(np.argsort(dn.out_spec))]


_SEQUENTIAL: dict[str, Callable] = {"reduce_sum": _seq_reduce_sum, "dot_general": _seq_dot_general,
                                    "conv_general_dilated": _seq_conv}


def _blocked(a: np.ndarray, b: np.ndarray, dtype: Any, block: int) -> np.ndarray:
    """a (B, M, K) times b (B, K, N), accumulated ``block`` terms at a time in float32 (each product exact:
    16-bit operands), the running sum rounded to ``dtype`` between blocks."""
    n = a.shape[2]
    acc = np.zeros((a.shape[0], a.shape[1], b.shape[2]), np.float32)
    for k0 in range(0, n, block):
        part = acc
        for k in range(k0, min(k0 + block, n)):
            part = part + (a[:, :, k, None] * b[:, None, k, :]).astype(np.float32)
        acc = round_to_dtype(part.astype(np.float64), dtype).astype(np.float32)
    return acc


def blocked_dot_general(p: dict, lhs: np.ndarray, rhs: np.ndarray, dtype: Any, block: int) -> np.ndarray | None:
    """dot_general accumulated ``block`` terms at a time in float32 (in index order, each product exact: the
    operands are 16-bit floats), the running sum rounded to ``dtype`` between blocks: what a kernel does
    whose accumulator is its narrow output buffer (IREE's llvm-cpu matmul, tiled by its vector reduction
    size). ``block`` at least the contracted length: accumulated in float32 and rounded once."""
    if np.iscomplexobj(lhs) or np.iscomplexobj(rhs) or block < 1:
        return None
    a, b, shape = _dot_operands(p, lhs, rhs, np.float64)
    return _blocked(a, b, dtype, block).reshape(shape)


def blocked_conv(p: dict, lhs: np.ndarray, rhs: np.ndarray, dtype: Any, block: int) -> np.ndarray | None:
    """conv_general_dilated accumulated as ``blocked_dot_general`` does, over (window position, input
    feature) with the feature innermost: the loop order of IREE's linalg convolution (its reduction dims
    kh, kw, c; ``vector_reduction = [.., 1, 1, 3]`` adds the 3 features of one window position per block).
    Ungrouped convolutions only (None otherwise)."""
    if p["batch_group_count"] != 1 or p["feature_group_count"] != 1 or np.iscomplexobj(lhs) \
            or np.iscomplexobj(rhs) or block < 1:
        return None
    dn = p["dimension_numbers"]
    x, w = np.asarray(lhs, np.float64).transpose(dn.lhs_spec), np.asarray(rhs, np.float64).transpose(dn.rhs_spec)
    n, (o, i), win = x.shape[0], w.shape[:2], w.shape[2:]
    gathered = patches(x, win, p["window_strides"], p["padding"], p["lhs_dilation"],
                       p["rhs_dilation"])  # N, C*W (C major), *out_spatial
    spatial = gathered.shape[2:]
    k = math.prod(win)
    a = gathered.reshape(n, i, k, -1).transpose(0, 3, 2, 1).reshape(1, -1, k * i)  # (N*S, window, feature)
    b = w.reshape(o, i, k).transpose(2, 1, 0).reshape(1, k * i, o)
    acc = _blocked(a, b, dtype, block).reshape(n, *spatial, o)  # N, *S, O
    out = np.moveaxis(acc, -1, 1)  # N, O, *S: the out_spec's order
    return out.transpose(np.argsort(dn.out_spec))
