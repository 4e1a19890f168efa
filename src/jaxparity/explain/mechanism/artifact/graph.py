"""How the program's ops reach one another, and the path's own value of each: what the artifact rules share to
map a runtime's kernels back to the JAX ops they compute."""

from __future__ import annotations

from typing import Any

import numpy as np
from jax.extend.core import Literal

__all__ = ["ancestors", "reaches_from", "value_of"]


def ancestors(program: Any, index: int) -> set[int]:
    """Indices of the ops whose outputs ``program.ops[index]`` reads, transitively."""
    producers = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
    seen: set[int] = set()
    stack = [index]
    while stack:
        for ref in program.ops[stack.pop()].inputs:
            if not isinstance(ref, Literal) and ref in producers and producers[ref] not in seen:
                seen.add(producers[ref])
                stack.append(producers[ref])
    return seen


def value_of(ctx: Any, vid: int) -> np.ndarray | None:
    for table in (ctx.path_vals.values, ctx.path_vals.args):
        if vid in table:
            return np.asarray(table[vid])
    return None


def reaches_from(program: Any, index: int, sources: set[int]) -> bool:
    """Does op ``index`` read (transitively) one of the values ``sources``?"""
    producers = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
    stack, seen = [index], set()
    while stack:
        i = stack.pop()
        for ref in program.ops[i].inputs:
            if isinstance(ref, Literal):
                continue
            if ref in sources:
                return True
            j = producers.get(ref)
            if j is not None and j not in seen:
                seen.add(j)
                stack.append(j)
    return False
