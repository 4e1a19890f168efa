"""A region of a program: some of its ops, cut out with the values that enter them on one path, and
run on their own along any path.

A region is a set of ops of one program level (the case, or the body of one loop iteration) around a
*target* op. Its inputs are the values that enter it, taken from one path's own run; its outputs are
the target's. Running the region alone along two paths says whether the divergence at the target
lives in these ops (``jaxparity reduce`` cuts its reproducer this way; the explainer uses it to ask a
second runtime about one op).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.extend.core import Literal

from ..pytree import host
from .program import FlatProgram, Op, bind_op
from .values import OpValues

__all__ = ["Region", "RegionError", "differs", "make_region", "run_region"]


class RegionError(Exception):
    """A region cannot be cut or run; the message says where and why."""


@dataclass(frozen=True)
class Region:
    program: FlatProgram  # the level: the case, or one loop body
    ops: tuple[int, ...]  # indices into program.ops, in program order
    target: int
    inputs: tuple[int, ...]  # value ids that enter the region, in first-use order
    values: tuple[np.ndarray, ...]  # their values on the path (sliced when elements were shrunk)
    elements: tuple[int, ...] | None = None  # the target's flat output indices kept, when shrunk
    full_size: int = 0  # target output elements before element shrinking

    @property
    def outputs(self) -> tuple[int, ...]:
        return tuple(v for v in self.program.ops[self.target].outputs if v is not None)

    def sub_program(self) -> FlatProgram:
        p = self.program
        return FlatProgram(tuple(p.ops[i] for i in self.ops), self.inputs, self.outputs, {}, p.avals, None, None)

    def function(self, instead: Instead | None = None) -> Callable[..., Any]:
        """The region as a JAX function of its inputs: each op bound as the program bound it, the target
        computed by ``instead(op, inputs)`` where one is given (a change the fix search tries)."""
        sub = self.sub_program()
        apply = bind_op if instead is None else _instead_at(self.program.ops[self.target], instead)

        def region(*xs: Any) -> tuple:
            return tuple(sub.outputs(sub.evaluate(list(xs), apply)))

        return region

    @property
    def size(self) -> int:
        return sum(int(np.asarray(v).size) for v in self.values)


Instead = Callable[[Op, list[Any]], Sequence[Any]]  # (the op, its input values) -> its outputs



def _instead_at(target: Op, instead: Instead) -> Instead:
    return lambda op, ins: instead(op, ins) if op is target else bind_op(op, ins)


def run_region(spec: str, region: Region, instead: Instead | None = None) -> list[np.ndarray]:
    """The target's outputs when ``spec`` runs the region on its own: op by op for eager and the
    declared references, else the path compiles (converts, serves) the region as a program.
    ``instead``: how the target is computed in its place (JAX ops; a declared reference's values stay
    those of the op's own semantics)."""
    from .values import apply_for, op_by_op
    from ..paths import make_path
    from ..paths.base import jax_config

    sub = region.sub_program()
    if make_path(spec).mode is not None:  # the interpreter
        return [host(x) for x in sub.outputs(sub.evaluate([host(v) for v in region.values], apply_for(spec)))]
    if op_by_op(spec):
        path = make_path(spec)
        apply = bind_op if instead is None else _instead_at(region.program.ops[region.target], instead)
        with jax_config(path.options), jax.disable_jit():
            return [host(x) for x in sub.outputs(sub.evaluate([jax.numpy.asarray(v) for v in region.values], apply))]
    outs = make_path(spec).run(region.function(instead), tuple(jax.numpy.asarray(v) for v in region.values))
    return [host(x) for x in jax.tree_util.tree_leaves(outs)]


def differs(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    from .localizer import values_equal

    return len(a) != len(b) or any(not values_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))


def _value(program: FlatProgram, vals: OpValues, vid: int) -> np.ndarray:
    for table in (vals.values, vals.args, program.consts):
        if vid in table:
            return host(table[vid])
    raise RegionError(f"value {vid} was not captured on {vals.path}")


def make_region(program: FlatProgram, vals: OpValues, ops: Sequence[int], target: int) -> Region:
    ops = tuple(sorted(set(ops) | {target}))
    produced = {v for i in ops for v in program.ops[i].outputs if v is not None}
    inputs: list[int] = []
    for i in ops:
        for ref in program.ops[i].inputs:
            if not isinstance(ref, Literal) and ref not in produced and ref not in inputs:
                inputs.append(ref)
    values = tuple(_value(program, vals, v) for v in inputs)
    for v in inputs:
        if jax.dtypes.issubdtype(program.avals[v].dtype, jax.dtypes.prng_key):
            raise RegionError("the region takes a PRNG key: keys cannot be written into a standalone script yet")
    size = int(np.prod(program.avals[region_out].shape)) if (region_out := _first_out(program, target)) else 0
    return Region(program, ops, target, tuple(inputs), values, None, size)


def _first_out(program: FlatProgram, target: int) -> int | None:
    return next((v for v in program.ops[target].outputs if v is not None), None)
