"""Where a verdict places the difference: the carrier of each kind (an op, the first dispatch that differs, a region
the runtime computes together), with the user's line, module and code."""

from __future__ import annotations

import linecache
import os
import re
from collections.abc import Sequence
from typing import Any

from ...verdict import Carrier

__all__ = ["by_dispatch", "carrier_at", "ops_words", "region", "with_share"]


def by_dispatch(e: Any, loc: Any) -> tuple[Carrier, ...]:
    """Where the per-op view is not the path's program but its own units were captured (``e.dispatches``): the
    first dispatch in program order that stores other values than the declared ops give on its inputs, where the
    difference begins, named at its contraction (else its first op)."""
    differ = sorted((f for f in e.dispatches if f.differ), key=lambda f: f.ops[0])
    if loc is None or not loc.program or not differ:
        return ()
    f = differ[0]
    ops = [loc.program[i] for i in f.ops]
    op = next((o for o in ops if o.primitive in ("dot_general", "conv_general_dilated")), ops[0])
    more = f"; {len(differ) - 1} more after it" if len(differ) > 1 else ""
    return (carrier_at(op, f"the first dispatch that stores other values than the declared ops give on its inputs "
                           f"({f.name}, ops #{f.ops[0]}..#{f.ops[-1]}: {f.differ} of {f.size} elements, up to "
                           f"{f.max_ulp} ULP{more})"),)


def region(loc: Any) -> tuple[Carrier, ...]:
    """Where no op differs alone and observing the ops changes the path's outputs (a runtime that computes them
    together, fused), the region it computes together: its first op, with how many it covers."""
    if loc is None or not loc.perturbed or not loc.cone:
        return ()
    first, last = loc.cone[0], loc.cone[-1]
    span = f"#{first.index}..#{last.index}" if last.index != first.index else f"#{first.index}"
    return (carrier_at(first, f"begins ops {span}, which show no difference one by one: the runtime computes them "
                            "together, and observing them changes its outputs"),)


def ops_words(ops: Sequence[Any], most: int = 3) -> str:
    """A few ops by number ("#3 div, #4 div"); more by module, never as a list of numbers: "47 ops in
    EfficientNetV2B0/block3 and 12 in EfficientNetV2B0/block4"."""
    if len(ops) <= most:
        return ", ".join(f"#{o.index} {o.primitive}" for o in ops)
    by: dict[str, int] = {}
    for o in ops:
        by["/".join((o.name_stack or "the top level").split("/")[:2])] = by.get(
            "/".join((o.name_stack or "the top level").split("/")[:2]), 0) + 1
    parts = sorted(by.items(), key=lambda kv: -kv[1])
    said = [f"{n} ops in {m}" if k == 0 else f"{n} in {m}" for k, (m, n) in enumerate(parts[:most])]
    rest = sum(n for _, n in parts[most:])
    return ", ".join(said) + (f" and {rest} elsewhere" if rest else "")


def with_share(c: Carrier, share: str) -> Carrier:
    import dataclasses

    return dataclasses.replace(c, share=share)


def carrier_at(op: Any, share: str, outputs: tuple[str, ...] = (), within: Sequence[Any] = ()) -> Carrier:
    line = op.user_source or op.source
    return Carrier(op=f"#{op.index} {op.primitive}", primitive=op.primitive, line=line, module=_module(op),
                   code=_code(line), share=share, outputs=outputs,
                   loop=": ".join(f.describe() for f in within) or None,
                   library=op.source if op.source and op.source != op.user_source else None,
                   user=op.user_source is not None)


_WRAPPED = re.compile(r"^((?:[a-z_]+\()*)([^()]*?)(\)*)$")  # "transpose(jvp(obs))": transformations around a scope
_TRANSFORM_WORDS = (("transpose", "in the gradient"), ("jvp", "in a derivative"), ("vmap", "vectorized"))


def _module(op: Any) -> str | None:
    """Where in the model the op is: its module path ("GroupedConvResidual/Conv_0"); under transformations, the
    scope inside them (a NumPyro site's, ``cases.from_numpyro``), else the library function it was created in,
    with the transformation in words ("obs, in the gradient"; "StudentT.log_prob, in the gradient")."""
    stack = op.name_stack or ""
    m = _WRAPPED.match(stack)
    if m is None or not m[1]:
        return stack or None
    transforms = re.findall(r"([a-z_]+)\(", m[1])
    how = next((w for t, w in _TRANSFORM_WORDS if t in transforms), None)
    return ", ".join(x for x in (m[2] or getattr(op, "call", None), how) if x) or None


def _code(line: str | None) -> str | None:
    """The user's source line, where its file is readable here."""
    if not line or ":" not in line:
        return None
    path, _, number = line.rpartition(":")
    if not number.isdigit() or not os.path.exists(path):
        return None
    text = linecache.getline(path, int(number)).strip()
    return text or None
