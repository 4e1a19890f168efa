"""The order a runtime adds a sum in, measured on that runtime (FPRev's probe: Xie et al., "Revealing
Floating-Point Accumulation Orders in Software/Hardware Implementations", USENIX ATC 2025).

One row of the sum's length n holds x_i = M, x_j = −M and ones elsewhere, M so large that a one added to a partial
sum holding M (or −M) is lost. The row's sum is then the number of ones outside the smallest partial sum that holds
both i and j: the size of their join in the tree of additions. Every pair of terms, one row each, run alone as the
path runs a program (converted, compiled or served there), gives the whole tree. The tree is named where it is one
of the usual orders (one term at a time, pairwise, k interleaved lanes then a tree, blocks of b) and evaluated on the
op's own captured inputs: where it gives the runtime's values bit for bit, that is how the runtime sums them, and
the baseline's tree likewise. Two correct orders differ by rounding only; the program's form (a one-pass variance,
x − mean(x) of offset data) is what makes that large.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

__all__ = ["PROBED", "SumOrder", "describe", "evaluate", "order_of", "probe", "sum_order_words", "tree_of",
           "with_order"]

Tree = Union[int, tuple["Tree", "Tree"]]  # a term's index, or the addition of two partial sums

PROBED = 256  # longest sum probed: n·(n−1)/2 rows of n terms (256: 32,640 rows, 33 MB in float32)
_DTYPES = ("float32", "bfloat16")  # M = 2^34 and sums of up to 256 ones are exact in both (f16's range is too short)


@dataclass(frozen=True)
class SumOrder:
    """A runtime's order of adding n terms: its tree of additions, in words."""

    n: int
    tree: Tree | None  # None: no fixed tree of rounded additions (wider or compensated accumulation, or no probe)
    words: str  # "in 8 interleaved lanes (term i into lane i mod 8), the lanes then added pairwise"


def probe(n: int, dtype: Any = np.float32) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The probe's rows (one per pair of terms: M at i, −M at j, ones elsewhere) and the pairs, in row order."""
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    big = 2.0 ** 34  # its ULP in float32 is 2048: a partial sum of up to 256 ones added to it is lost
    rows = np.ones((len(pairs), n), np.float32)
    index = np.arange(len(pairs))
    rows[index, [i for i, _ in pairs]] = big
    rows[index, [j for _, j in pairs]] = -big
    return rows.astype(dtype), pairs


def tree_of(n: int, sums: np.ndarray, pairs: list[tuple[int, int]]) -> Tree | None:
    """The tree of additions the probe's row sums describe: joins by size, smallest first (each pair's join has
    n − sum terms); None where they describe no binary tree (the runtime's sum is not a fixed tree of additions
    that each round: it accumulates wider, compensates, or orders by the values)."""
    sums = np.asarray(sums, np.float64)
    if not np.all(np.isfinite(sums)) or not np.array_equal(sums, np.rint(sums)):
        return None  # a count of ones is a whole number
    sizes = n - sums.astype(np.int64)
    parent = list(range(n))
    trees: dict[int, Tree] = {i: i for i in range(n)}
    count = {i: 1 for i in range(n)}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for k in np.argsort(sizes, kind="stable"):
        i, j = pairs[int(k)]
        a, b = find(i), find(j)
        if a == b:  # joined lower down already: whether every pair's size agrees is checked at the end
            continue
        if count[a] + count[b] != sizes[k]:
            return None
        parent[b] = a
        trees[a], count[a] = (trees[a], trees.pop(b)), count[a] + count.pop(b)
    root = find(0)
    if count[root] != n:
        return None
    tree = trees[root]
    return tree if _joins(tree, n) == {p: int(s) for p, s in zip(pairs, sizes)} else None


def _joins(tree: Tree, n: int) -> dict[tuple[int, int], int]:
    """For every pair of terms, the size of the smallest partial sum holding both."""
    out: dict[tuple[int, int], int] = {}

    def walk(t: Tree) -> list[int]:
        if isinstance(t, int):
            return [t]
        left, right = walk(t[0]), walk(t[1])
        size = len(left) + len(right)
        for i in left:
            for j in right:
                out[(min(i, j), max(i, j))] = size
        return left + right

    walk(tree)
    return out


def evaluate(tree: Tree, rows: np.ndarray, accumulate: Any = np.float32) -> np.ndarray:
    """Each row's sum added as ``tree`` says, every addition rounded to ``accumulate``."""
    acc = np.dtype(accumulate)
    x = np.asarray(rows).astype(acc)

    def walk(t: Tree) -> np.ndarray:
        if isinstance(t, int):
            return x[:, t]
        with np.errstate(over="ignore", invalid="ignore"):
            return (walk(t[0]) + walk(t[1])).astype(acc)

    return walk(tree)


# -- the usual orders, as trees --------------------------------------------------------------------------------
def _sequential(terms: list[Tree]) -> Tree:
    out = terms[0]
    for t in terms[1:]:
        out = (out, t)
    return out


def _halves(terms: list[Tree]) -> Tree:
    """Pairwise, as a vector register is reduced: the first half plus the second, until one is left."""
    terms = list(terms)
    while len(terms) > 1:
        half = (len(terms) + 1) // 2
        terms = [(terms[i], terms[i + half]) if i + half < len(terms) else terms[i] for i in range(half)]
    return terms[0]


def _neighbours(terms: list[Tree]) -> Tree:
    """Pairwise, each term with its neighbour (numpy's and Kahan-free pairwise summation's tree)."""
    terms = list(terms)
    while len(terms) > 1:
        terms = [(terms[i], terms[i + 1]) if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]


_COMBINE: dict[str, tuple[Callable[[list[Tree]], Tree], str]] = {
    "halves": (_halves, "pairwise (first half plus second half)"), "neighbours": (_neighbours, "pairwise"),
    "sequential": (_sequential, "in order")}


def _lanes(n: int, k: int, combine: str) -> Tree:
    lanes = [_sequential(list(range(j, n, k))) for j in range(min(k, n))]
    return _COMBINE[combine][0](lanes)


def _blocks(n: int, b: int, combine: str) -> Tree:
    return _COMBINE[combine][0]([_sequential(list(range(s, min(s + b, n)))) for s in range(0, n, b)])


def _canonical(t: Tree) -> Any:
    return t if isinstance(t, int) else frozenset((_canonical(t[0]), _canonical(t[1])))


def _usual(n: int) -> list[tuple[str, Tree]]:
    """The usual orders of n terms, each in words, simplest first."""
    found = [("in order, one term at a time", _sequential(list(range(n)))),
             ("pairwise, each term with its neighbour, then each pair with the next", _neighbours(list(range(n)))),
             ("pairwise, the first half plus the second half, halving again", _halves(list(range(n))))]
    for k in (2, 4, 8, 16, 32, 64):
        if k < n:
            for combine, (_, how) in _COMBINE.items():
                found.append((f"in {k} interleaved lanes (term i into lane i mod {k}, each lane in order), the lanes "
                              f"then added {how}", _lanes(n, k, combine)))
    for b in (4, 8, 16, 32, 64, 128):
        if b < n:
            for combine, (_, how) in _COMBINE.items():
                found.append((f"in blocks of {b} terms (each in order), the blocks' sums then added {how}",
                              _blocks(n, b, combine)))
    return found


def describe(tree: Tree, n: int) -> str:
    """The tree in words: the first of the usual orders with its shape, else its depth and first additions."""
    shape = _canonical(tree)
    for words, usual in _usual(n):
        if _canonical(usual) == shape:
            return words
    first: list[tuple[int, int]] = []

    def leaves(t: Tree) -> None:
        if isinstance(t, tuple):
            a, b = t
            if isinstance(a, int) and isinstance(b, int):
                first.append((min(a, b), max(a, b)))
            leaves(a)
            leaves(b)

    leaves(tree)
    strides = [j - i for i, j in first]
    stride = max(set(strides), key=strides.count) if strides else 0
    if stride > 1 and strides.count(stride) * 2 > len(strides):  # vector lanes: term i first meets term i + w
        return (f"in {stride} interleaved lanes (term i first added to term i + {stride}), combined in a tree of "
                f"depth {_depth(tree)} of its own")
    shown = ", ".join(f"{i}+{j}" for i, j in first[:4])
    return f"in an order of its own (a tree of depth {_depth(tree)}; first additions {shown})"


def _depth(t: Tree) -> int:
    return 0 if isinstance(t, int) else 1 + max(_depth(t[0]), _depth(t[1]))


def order_of(spec: str, n: int, dtype: Any) -> SumOrder | str:
    """How path ``spec`` adds n terms of ``dtype`` (a row of a sum over the last axis, run alone there); a reason
    where it was not probed."""
    import jax.numpy as jnp

    from ...execution.crashes import attempt
    from ...execution.inprocess import run_in_process
    from ...paths import make_path

    name = np.dtype(dtype).name
    if name not in _DTYPES:
        return f"a sum of {name} is not probed (only {', '.join(_DTYPES)})"
    if not 2 < n <= PROBED:
        return f"a sum of {n} terms is not probed (3 to {PROBED})"
    rows, pairs = probe(n, dtype)
    with attempt(f"{spec} [sum order probe]"):
        r = run_in_process(make_path(spec), lambda x: jnp.sum(x, axis=-1), (rows,))
    if r.status != "ok" or not r.outputs:
        return f"the probe did not run on {spec} ({r.status})"
    tree = tree_of(n, np.asarray(r.outputs[0][1], np.float64), pairs)
    if tree is None:
        return SumOrder(n, None, "not as one fixed tree of additions each rounded to its dtype (the probe's rows "
                        "describe none: its order changes from row to row, as a kernel aligned to memory does, or it "
                        "accumulates wider, or compensates)")
    return SumOrder(n, tree, describe(tree, n))


def _rows(op: Any, x: np.ndarray) -> np.ndarray | None:
    """The op's input as rows of its one reduced axis (None: it reduces several axes, or none)."""
    axes = tuple(op.eqn.params.get("axes", ()))
    if len(axes) != 1:
        return None
    return np.moveaxis(np.asarray(x), axes[0], -1).reshape(-1, np.shape(x)[axes[0]])


def _reproduces(order: SumOrder, rows: np.ndarray, got: np.ndarray) -> bool:
    if order.tree is None:
        return False
    mine = evaluate(order.tree, rows).astype(got.dtype)
    a, b = mine.astype(np.float64).ravel(), np.asarray(got, np.float64).ravel()
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def sum_order_words(ctx: Any, d: Any) -> str | None:
    """For a carrying reduce_sum: how the path and the baseline add its terms, probed on each, and whether each
    order gives that side's values of the op on the path's captured inputs bit for bit; None where it is no sum
    over one axis, or nothing was probed. Memoized per op in the context."""
    memo = ctx.memo.setdefault("sum order", {})
    if d.op.index in memo:
        return memo[d.op.index]
    memo[d.op.index] = words = _words(ctx, d)
    return words


def _words(ctx: Any, d: Any) -> str | None:
    from ...localize.program import bind_op
    from .captured import op_inputs

    op = ctx.program.ops[d.op.index]
    if op.info.primitive != "reduce_sum" or ctx.path_vals is None or not op.outputs:
        return None
    try:
        (x,) = op_inputs(ctx, d)
    except Exception:  # noqa: BLE001 - not captured
        return None
    x = np.asarray(x)
    rows = _rows(op, x)
    vid = op.outputs[0]
    if rows is None or vid not in ctx.path_vals.values or x.dtype.name not in _DTYPES:
        return None
    mine = np.asarray(ctx.path_vals.values[vid])
    said: list[str] = []
    for side, spec in ((ctx.path, ctx.path.spec), (ctx.baseline, ctx.baseline.spec)):
        order = order_of(spec, rows.shape[1], x.dtype)
        if isinstance(order, str):
            said.append(f"{side}: {order}")
            continue
        got: np.ndarray | None
        if side is ctx.path:
            got = mine
        else:
            import jax

            got = np.asarray(jax.device_get(bind_op(op, [x])[0])) if ctx.baseline.has("op_by_op") else None
        held = got is not None and _reproduces(order, rows, got)
        said.append(f"{side} adds the {order.n} terms of each {'row' if rows.shape[0] > 1 else 'sum'} {order.words}"
                    + (f" (that order gives {side}'s values of the op on its captured inputs bit for bit)" if held else
                       "" if got is None else " (measured on the probe; that order does not give its values of the "
                       "op on the captured inputs: the kernel orders this sum by its shape)"))
    return "; ".join(said) if said else None


def with_order(verdict: Any, ctx: Any) -> Any:
    """``verdict`` (a cause that says the program amplifies two correct summation orders) with the orders said: the
    first carrying divergence that is a sum over one axis, probed on the path and on the baseline."""
    import dataclasses

    from .captured import named

    if verdict.status not in ("confirmed", "partly") or ctx.localization is None:
        return verdict
    d = next((d for d in named(ctx.localization) if d.op.primitive == "reduce_sum"), None)
    if d is None:
        return verdict
    try:
        words = sum_order_words(ctx, d)
    except Exception:  # noqa: BLE001 - the orders are evidence, not a requirement
        words = None
    if not words:
        return verdict
    return dataclasses.replace(verdict, evidence=f"{verdict.evidence}; at #{d.op.index} reduce_sum, {words}")
