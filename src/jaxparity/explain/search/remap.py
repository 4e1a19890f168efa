"""Remaps: the elements where the trigger holds moved to a value on which every runtime agrees, chosen so
that JAX's result is unchanged. A label of -1 that one runtime's one-hot wraps to the last class, where JAX
gives a row of zeros, becomes the out-of-range label 5, which every runtime maps to zeros; a negative index
becomes the index it stands for (``x + n``). The model then means the same on JAX, and no runtime meets the
inputs it disagrees on: a fix found by search, not a table of bugs.

Candidates come from the input itself: values that do not trigger (the smallest, the largest, the most
common, 0) and, for integers, the input shifted by a size of the program's arrays. Whether JAX's result is
unchanged is checked, never assumed: on the op's captured inputs for an op (``op_remaps``), by re-running the
baseline for the program's inputs (``input_remaps``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...localize.trigger import Test, Trigger, align, search_trigger
from .candidates import Candidate

__all__ = ["input_trigger", "op_remaps", "remaps"]

_MAX = 5  # replacements tried per input


def _show(r: Any) -> str:
    r = float(r)
    return str(int(r)) if r.is_integer() else f"{r:.6g}"


def remaps(x: np.ndarray, test: Test, sizes: Sequence[int], name: str, predicate: str
           ) -> list[tuple[str, str, Callable[[Any], Any]]]:
    """(name, code, f) for each replacement of the elements of ``x`` where ``test`` holds: ``f`` maps the input
    (a JAX value) to the remapped one, inside the model."""
    x = np.asarray(x)
    if x.dtype.kind not in "iuf" and x.dtype.name != "bfloat16":
        return []
    with np.errstate(invalid="ignore", divide="ignore"):
        mask = np.asarray(test(x.astype(np.float64)), bool)
    if mask.shape != x.shape or not mask.any() or mask.all():
        return []
    rest = x[~mask].astype(np.float64)
    rest = rest[np.isfinite(rest)]
    values: list[float] = []
    if rest.size:
        uniq, counts = np.unique(rest, return_counts=True)
        values += [float(uniq.min()), float(uniq.max()), float(uniq[np.argmax(counts)])]
    values.append(0.0)
    found: list[tuple[str, str, Callable[[Any], Any]]] = []
    for r in dict.fromkeys(values):
        with np.errstate(invalid="ignore", divide="ignore"):
            if bool(np.asarray(test(np.float64(r)))):
                continue  # the replacement would trigger itself

        def f(v: Any, r: float = r) -> Any:
            import jax.numpy as jnp

            return jnp.where(test(v), jnp.asarray(r, v.dtype), v)

        found.append((f"{name} where {predicate} replaced by {_show(r)}",
                      f"{name} = jnp.where(<{predicate}>, {_show(r)}, {name})", f))
    if x.dtype.kind in "iu":
        for n in sorted({int(s) for s in sizes if s > 1}):
            with np.errstate(invalid="ignore", divide="ignore"):
                moved = np.asarray(test(x.astype(np.float64) + n), bool)
            if moved[mask].any():
                continue  # shifted, the elements still trigger

            def g(v: Any, n: int = n) -> Any:
                import jax.numpy as jnp

                return jnp.where(test(v), v + jnp.asarray(n, v.dtype), v)

            found.append((f"{name} where {predicate} shifted by {n}",
                          f"{name} = jnp.where(<{predicate}>, {name} + {n}, {name})", g))
    return found[:_MAX]


def op_remaps(op: Any, ins: list[np.ndarray], mine: np.ndarray, theirs: np.ndarray,
              trigger: Trigger | None = None) -> list[Candidate]:
    """Remaps of the op's input that the trigger reads (found again on the captured inputs, to have the
    predicate as a function), as candidates that compute the op on the remapped input: each a
    ``formulation``, judged on the captured inputs by whether JAX's result of the op stays the same."""
    from ...metrics import ulp_distance
    from ..mechanism.captured import bound

    mine, theirs = np.asarray(mine), np.asarray(theirs)
    if mine.shape != theirs.shape:
        return []
    differ = ulp_distance(mine, theirs) != 0
    aligned = [align(x, mine.shape, op.info.primitive) if np.ndim(x) else None for x in ins]
    found = search_trigger(aligned, differ, None, mine.dtype)
    if found is None:
        return []
    t, i, test = found
    if i is None or test is None:
        return []
    sizes = {d for x in ins for d in np.shape(x)} | set(mine.shape)
    which = f"input {i + 1} of {op.info.primitive}" if len(ins) > 1 else f"the input of {op.info.primitive}"
    predicate = t.predicate.replace(f"input {i + 1}" if len(ins) > 1 else "the input", "x")
    out = []
    for what, code, f in remaps(ins[i], test, sorted(sizes), "x", predicate):
        what, code = what.replace("x where", f"{which} where", 1), f"{code.replace(f'<{predicate}>', predicate)} " \
            f"on x, {which}"

        def instead(o: Any, xs: list[Any], i: int = i, f: Callable[[Any], Any] = f) -> list[Any]:
            return bound(o, [*xs[:i], f(xs[i]), *xs[i + 1:]])

        out.append(Candidate(what, code, "formulation", instead))
    return out


def input_trigger(flat_args: Sequence[Any], mine: Sequence[np.ndarray], theirs: Sequence[np.ndarray]
                  ) -> tuple[Trigger, int, Test] | None:
    """The trigger over the program's own inputs, for the first output that differs: which input, and the
    predicate over it (None where none separates). Each input whose shape leads the output's is searched alone;
    an exact predicate wins."""
    from ...metrics import ulp_distance

    for m, t in zip(mine, theirs):
        m, t = np.asarray(m), np.asarray(t)
        if m.shape != t.shape or m.dtype != t.dtype or m.tobytes() == t.tobytes():
            continue
        try:
            differ = ulp_distance(m, t) != 0
        except Exception:  # noqa: BLE001 - an output no ULP measure reads
            return None
        # Judged at each input's own granularity: an output element differs where its row does (a label's
        # one-hot row, an index's gathered slice), so the differing elements become the input's.
        best = None
        for i, a in enumerate(flat_args):
            a = np.asarray(a)
            if a.ndim == 0 or a.shape != m.shape[:a.ndim]:
                continue
            rows = differ.reshape(a.shape + (-1,)).any(axis=-1)
            found = search_trigger([a], rows, None, m.dtype)
            if found is None or found[2] is None:
                continue
            if found[0].exact:
                return found[0], i, found[2]
            if best is None:
                best = (found[0], i, found[2])
        return best
    return None
