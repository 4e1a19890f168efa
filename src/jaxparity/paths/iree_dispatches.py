"""IREE in its own terms: the dispatches it runs, which of the program's ops each computes, and the values
each stores, captured from IREE's own run.

IREE forms dispatch regions before it generates code: every op of a region runs in one kernel, and only
what a dispatch stores to a buffer is ever rounded to its declared dtype there (IREE's llvm-cpu pipeline
computes bf16 arithmetic in float32 inside a dispatch). Which JAX ops a dispatch holds is read from IREE's
own IR: the program is traced op by op, each op under a name scope of its own (``jp<index>``), so every
StableHLO op carries the index of the JAX op it came from, and ``iree-compile --compile-to=dispatch-creation``
prints each dispatch's body with those locations, every call site its own.

A dispatch's stored values are captured by compiling the program with those values returned as well: IREE
stores them anyway, so the dispatches are the same; the capture is used only where IREE's outputs are then
bit for bit those of the plain compile (checked by the caller against the path's own outputs).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import PathError

__all__ = ["Dispatch", "capture_stores", "dispatch_map", "scoped_function"]

_SCOPE = "jp"
_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$", re.M)
_INDEX = re.compile(rf"/{_SCOPE}(\d+)(?:/|\")")
_NAMED = re.compile(rf"\"{_SCOPE}(\d+)\"")
# Lines of a dispatch body that compute: arith/math ops and linalg ops other than a fill (tensor.empty, fills,
# loads and stores carry the location of whatever op IREE's canonicalisation kept, not of a computation).
_COMPUTES = re.compile(r"=\s*(?:arith|math|linalg)\.(?!fill\b)(?!yield\b)\w+|^\s*(?:arith|math)\.\w+")


@dataclass(frozen=True)
class Dispatch:
    """One dispatch of IREE's flow program: its name (``main_dispatch_6_matmul_4x64x64_bf16``), the program's
    ops it computes (indices into ``FlatProgram.ops``) and the values it stores (value ids: results of those
    ops read outside the dispatch, or outputs of the program)."""

    name: str
    ops: tuple[int, ...]
    stores: tuple[int, ...]


def scoped_function(program: Any, extra: Sequence[int] = ()) -> Callable[..., tuple]:
    """The flat program as a function of its flat arguments, each op bound under ``jax.named_scope('jp<i>')``:
    its outputs, then the values ``extra`` (value ids) names."""
    import jax

    from ..localize.program import bind_op

    def apply(op: Any, ins: list[Any]) -> list[Any]:
        with jax.named_scope(f"{_SCOPE}{op.info.index}"):
            return bind_op(op, ins)

    def scoped(*xs: Any) -> tuple:
        values = program.evaluate(list(xs), apply)
        return (*program.outputs(values), *(values[v] for v in extra))

    return scoped


def _named_locations(text: str) -> str:
    """The StableHLO text with every location reduced to the op index it names (``loc("jp12")``), so that
    IREE's IR stays small and says plainly which op each of its ops came from."""
    def named(m: re.Match[str]) -> str:
        found = _INDEX.search(m[2])
        return f'{m[1]} = loc("{_SCOPE}{found[1]}")' if found else f"{m[1]} = loc(unknown)"

    return _LOC_DEF.sub(named, text)


def _aliases(ir: str) -> dict[str, str]:
    return {m[1]: m[2] for m in _LOC_DEF.finditer(ir)}


def _indices(line: str, aliases: dict[str, str]) -> set[int]:
    """The op indices a printed op's location names (aliases ``#loc3`` resolved; fused locations all)."""
    loc = line[line.rfind(" loc(") + 5:] if " loc(" in line else ""
    found = {int(i) for i in _NAMED.findall(loc)}
    for alias in re.findall(r"#loc\d*", loc):
        found |= {int(i) for i in _NAMED.findall(aliases.get(alias, ""))}
    return found


def _bodies(ir: str) -> list[tuple[str, list[str]]]:
    """(name, body lines) of each ``flow.dispatch.workgroups`` region of the program after IREE's dispatch
    formation, in program order: every call site its own (before IREE outlines them into executables and merges
    the identical ones); named as IREE then names them, ``main_dispatch_<n>``."""
    found: list[tuple[str, list[str]]] = []
    depth = 0
    for line in ir.splitlines():
        if depth == 0:
            if "= flow.dispatch.workgroups" in line:
                found.append((f"main_dispatch_{len(found)}", []))
                depth = -1  # opened at its first brace
            continue
        found[-1][1].append(line)
        opened, closed = line.count("{"), line.count("}")
        depth = (opened - closed) if depth == -1 and opened else depth + opened - closed if depth > 0 else depth
        if depth == 0:
            continue
    return found


def dispatch_map(program: Any, text: str, compile_text: Callable[[str, tuple[str, ...]], bytes]) -> list[Dispatch]:
    """IREE's dispatches of ``program``, from its flow IR: ``text`` is the StableHLO of ``scoped_function(program)``
    with its locations, ``compile_text(stablehlo, extra flags)`` the path's own compile (stopped here after
    dispatch formation). An op that no dispatch computes (a reshape IREE does as metadata, a broadcast folded
    into its consumer's indexing) belongs to the dispatch of its input."""
    text = _named_locations(text)
    out = compile_text(text, ("--compile-to=dispatch-creation", "--mlir-print-debuginfo", "--mlir-elide-elementsattrs-if-larger=16"))
    ir = out.decode() if isinstance(out, bytes) else str(out)
    aliases = _aliases(ir)
    seen_in: dict[int, list[str]] = {}
    for name, body in _bodies(ir):
        ops: set[int] = set()
        for line in body:
            if _COMPUTES.search(line):
                ops |= _indices(line, aliases)
        for i in ops:
            seen_in.setdefault(i, []).append(name)
    # An op several dispatches compute (a loop: its body's dispatches all name the loop op) is one unit of them.
    owner = {i: names[0] if len(names) == 1 else f"{names[0]}..{names[-1].rsplit('_', 1)[1]}"
             for i, names in seen_in.items()}
    members: dict[str, list[int]] = {}
    for i in sorted(owner):
        members.setdefault(owner[i], []).append(i)
    if not members:
        raise PathError("IREE's flow IR has no dispatch that jaxparity could read")
    producer = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
    # An op no dispatch computes (a reshape, a broadcast folded into its consumer's indexing) belongs where its
    # input was computed: data movement, exact, stored or not with it.
    home: dict[int, str | None] = {}
    for i, op in enumerate(program.ops):
        if i in owner:
            home[i] = owner[i]
            continue
        ins = [producer[r] for r in op.inputs if not hasattr(r, "val") and r in producer]
        home[i] = next((home[j] for j in ins if home.get(j)), None)
    outputs = {v for v in program.out_ids if not hasattr(v, "val")}
    read_by: dict[int, set[str | None]] = {}
    for i, op in enumerate(program.ops):
        for r in op.inputs:
            if not hasattr(r, "val") and r in producer:
                read_by.setdefault(r, set()).add(home[i])
    found: list[Dispatch] = []
    for name, computed in members.items():
        if not computed:
            continue
        mine = [i for i in range(len(program.ops)) if home[i] == name]
        stores = [v for i in mine for v in program.ops[i].outputs if v is not None
                  and (v in outputs or read_by.get(v, set()) - {name})]
        found.append(Dispatch(name, tuple(mine), tuple(stores)))
    return found


def capture_stores(run: Callable[[Callable[..., Any], tuple], Any], program: Any, flat_args: Sequence[Any],
                   dispatches: Sequence[Dispatch]) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
    """IREE's values of every dispatch's stores: the program compiled with them returned too (``run``: the
    path's own run). Returns (the program's outputs in that run, value id -> stored value)."""
    import jax

    stores = [v for d in dispatches for v in d.stores]
    n = len(program.out_ids)
    got = jax.tree_util.tree_leaves(run(scoped_function(program, stores), tuple(flat_args)))
    got = [np.asarray(x) for x in got]
    return got[:n], dict(zip(stores, got[n:]))
