"""The smallest piece of a program that still diverges on its own: a region of ops, and its elements.

Shrinking is delta debugging in two steps, around the locally diverging op (the *target*):
1. ops: the target alone; else the target with its producers, one generation further each time (a
   fused region: FMA needs the multiply, excess precision the narrow op whose rounding was dropped);
   then every op but the target is dropped in turn while the region still diverges (1-minimal);
2. elements: where every op is elementwise, only the elements whose outputs differ are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from dataclasses import replace

import numpy as np
from jax.extend.core import Literal

from ..localize.program import FlatProgram
from ..localize.region import Region, RegionError, differs, make_region, run_region
from ..localize.values import OpValues

__all__ = ["NotReproduced", "ReduceError", "Runner", "grow_and_shrink", "shrink_elements", "ELEMENTWISE"]

MAX_GENERATIONS = 4  # producers added around the target before giving up on a local region
MAX_REGION_OPS = 24
MAX_ELEMENTS = 8  # differing elements kept by element shrinking

# Primitives whose output element i depends only on element i of each (same-shaped) input, and whose
# parameters do not name a shape: they run unchanged on a slice of their inputs.
ELEMENTWISE = frozenset(
    "abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp convert_element_type cos cosh div eq "
    "erf erf_inv erfc exp exp2 expm1 floor ge gt imag integer_pow is_finite le lgamma digamma log log1p logistic "
    "lt max min mul ne neg nextafter not or population_count pow real reduce_precision rem round rsqrt "
    "select_n shift_left shift_right_arithmetic shift_right_logical sign sin sinh sqrt square sub tan tanh "
    "xor copy copy_p".split())


class ReduceError(RegionError):
    """The divergence could not be reduced; the message says where and why."""


class NotReproduced(ReduceError):
    """Every script written for the divergence was run in a fresh process and none reproduced it."""


Runner = Callable[[str, Region], list[np.ndarray]]


def _producers(program: FlatProgram) -> dict[int, int]:
    return {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}


def grow_and_shrink(program: FlatProgram, vals: OpValues, target: int, base: str, path: str,
                    run: Runner = run_region, log: Callable[[str], None] = lambda _: None,
                    start: set[int] | None = None, required: set[int] = frozenset()
                    ) -> tuple[Region, list[np.ndarray], list[np.ndarray], int]:
    """The 1-minimal region around ``target`` that diverges when ``base`` and ``path`` each run it
    alone, its two results, and how many regions were tried. ``start``: the ops to begin with (a
    fused region the localizer could only bound), else the target alone; ``required``: ops the op's own
    evidence names (the mul an FMA fused in), never dropped."""
    producer = _producers(program)
    chosen: set[int] = set(start or ()) | {target}
    frontier = set(chosen)
    seen: dict[frozenset, tuple[list, list]] = {}  # op set -> both results: each region runs once

    def both(region: Region) -> tuple[list, list]:
        key = frozenset(region.ops)
        if key not in seen:
            seen[key] = (run(base, region), run(path, region))
        return seen[key]

    found: tuple[Region, list, list] | None = None
    for _ in range(MAX_GENERATIONS + 1):
        region = make_region(program, vals, chosen, target)
        b, p = both(region)
        if differs(b, p):
            found = (region, b, p)
            break
        log(f"{len(chosen)} op(s) around #{target} agree on their own; adding their producers")
        nxt = {producer[r] for i in frontier for r in program.ops[i].inputs
               if not isinstance(r, Literal) and r in producer} - chosen
        if not nxt or len(chosen | nxt) > MAX_REGION_OPS:
            break
        chosen |= nxt
        frontier = nxt
    if found is None:
        raise ReduceError(f"op #{target} {program.ops[target].info.primitive} and the {len(chosen) - 1} op(s) before "
                          f"it agree when {base} and {path} run them on their own: the divergence needs more of the "
                          "program (how the compiler fuses it) than a small region keeps")
    region, b, p = found
    for i in sorted(region.ops):  # earliest (farthest from the target) first
        if i == target or i in required or len(region.ops) == 1:
            continue
        smaller = make_region(program, vals, [j for j in region.ops if j != i], target)
        b2, p2 = both(smaller)
        if differs(b2, p2):
            region, b, p = smaller, b2, p2
    return region, b, p, len(seen)


def shrink_elements(region: Region, base_out: list[np.ndarray], path_out: list[np.ndarray], base: str, path: str,
                    run: Runner = run_region, cause: str | None = None
                    ) -> tuple[Region, list[np.ndarray], list[np.ndarray]] | None:
    """The region on only the elements whose outputs differ (at most MAX_ELEMENTS), when every op is
    elementwise and still diverges that way; None when it cannot be shrunk. With ``cause``, only the
    differing elements that cause concerns are kept (subnormal inputs for subnormal handling...), so
    the reproducer shows that divergence and its fix removes it."""
    prog = region.program
    if any(prog.ops[i].info.primitive not in ELEMENTWISE for i in region.ops):
        return None
    shape = np.asarray(path_out[0]).shape
    if len(shape) == 0 or any(np.asarray(v).shape not in (shape, ()) for v in region.values):
        return None
    differ = np.zeros(int(np.prod(shape)), bool)
    for b, p in zip(base_out, path_out):
        from ..metrics import ulp_distance

        differ |= (ulp_distance(np.asarray(p), np.asarray(b)) != 0).reshape(-1)
    concerned = _concerned(cause, [np.asarray(v) for v in region.values], shape)
    if concerned is not None and np.any(differ & concerned):
        differ &= concerned
    idx = np.flatnonzero(differ)[:MAX_ELEMENTS]
    if idx.size == 0 or idx.size == differ.size:
        return None
    values = tuple(np.asarray(v).reshape(-1)[idx] if np.asarray(v).shape == shape else v for v in region.values)
    small = replace(region, values=values, elements=tuple(int(i) for i in idx), full_size=int(differ.size))
    b, p = run(base, small), run(path, small)
    return (small, b, p) if differs(b, p) else None


def _concerned(cause: str | None, values: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray | None:
    """The output elements whose inputs show what ``cause`` is about, or None for any element."""
    import ml_dtypes

    floats = [v.astype(np.float64).reshape(-1) for v in values
              if v.shape == shape and v.dtype.kind in "fV" and v.dtype.name != "void"]
    if not floats:
        return None
    if cause == "denormal-flush":
        masks = []
        for v, orig in zip(floats, [v for v in values if v.shape == shape and v.dtype.kind in "fV"]):
            tiny = float(ml_dtypes.finfo(orig.dtype).smallest_normal)
            masks.append((np.abs(v) > 0) & (np.abs(v) < tiny))
        return np.logical_or.reduce(masks)
    if cause in ("implementation-defined-conversion", "ieee-fold", "fast-min-max"):
        return np.logical_or.reduce([~np.isfinite(v) | (np.abs(v) >= 2.0**31) for v in floats])
    return None


_REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin"}


def _slices_for(op: Any, shapes: list[tuple[int, ...]], idx: tuple[int, ...]) -> list[tuple[slice, ...]] | None:
    """For one output element ``idx`` of a contraction or reduction, the slice of each input it reads:
    every dimension the element picks one index of (batch, free, kept) cut to that index, the
    contracted or reduced ones kept whole. None for any other op."""
    name = op.info.primitive
    if name == "dot_general" and len(shapes) == 2:
        (lc, rc), (lb, rb) = op.eqn.params["dimension_numbers"]
        lfree = [d for d in range(len(shapes[0])) if d not in lc and d not in lb]
        rfree = [d for d in range(len(shapes[1])) if d not in rc and d not in rb]
        cut: list[dict[int, int]] = [{}, {}]
        k = 0
        for l_dim, r_dim in zip(lb, rb):
            cut[0][l_dim] = cut[1][r_dim] = idx[k]
            k += 1
        for d in lfree:
            cut[0][d] = idx[k]
            k += 1
        for d in rfree:
            cut[1][d] = idx[k]
            k += 1
    elif name in _REDUCTIONS and len(shapes) == 1:
        axes = set(op.eqn.params["axes"])
        kept = [d for d in range(len(shapes[0])) if d not in axes]
        cut = [dict(zip(kept, idx))]
    else:
        return None
    return [tuple(slice(c[d], c[d] + 1) if d in c else slice(None) for d in range(len(s))) for c, s in zip(cut, shapes)]


def shrink_operands(region: Region, base_out: list[np.ndarray], path_out: list[np.ndarray], base: str, path: str,
                    run: Runner = run_region) -> tuple[Region, list[np.ndarray], list[np.ndarray]] | None:
    """A contraction or reduction alone, on only what one differing output element reads (the row and
    column of a matmul, the reduced slice of a sum): None when that does not apply or no longer
    diverges."""
    prog = region.program
    op = prog.ops[region.target]
    if any(prog.ops[i].info.primitive not in ELEMENTWISE for i in region.ops if i != region.target):
        return None  # elementwise ops before the target read the same elements it does
    p, b = np.asarray(path_out[0]), np.asarray(base_out[0])
    from ..metrics import ulp_distance

    differ = np.argwhere(ulp_distance(p, b) != 0)
    shapes = [tuple(prog.avals[r].shape) if not isinstance(r, Literal) else () for r in op.inputs]
    if not len(differ) or p.size == 1:
        return None
    slices = _slices_for(op, shapes, tuple(int(i) for i in differ[0]))
    if slices is None:
        return None
    values = []
    for v in (np.asarray(x) for x in region.values):  # each input cut like the operand of its shape
        which = [k for k, s in enumerate(shapes) if s == v.shape]
        if v.ndim and (not which or len({repr(slices[k]) for k in which}) > 1):
            return None
        values.append(v[slices[which[0]]] if v.ndim else v)
    small = replace(region, values=tuple(values), elements=(int(np.ravel_multi_index(tuple(differ[0]), p.shape)),),
                    full_size=int(p.size))
    try:
        b2, p2 = run(base, small), run(path, small)
    except Exception:
        return None
    return (small, b2, p2) if differs(b2, p2) else None
