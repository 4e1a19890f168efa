"""``kept-wide``: narrow (bf16/f16) arithmetic a runtime keeps in float32 across ops and rounds once where the
result is stored, reproduced on the region's own inputs (the op check of ``narrow-rounding-skipped``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from jax.extend.core import Literal

from ...causes import Cause
from ...verdicts import CauseVerdict
from ..captured import bound as _bound
from ..captured import differing_output as _differing_output
from ..captured import named as _named

__all__ = ["kept_wide", "per_dispatch"]


# Elementwise arithmetic a compiler may keep in float32 across ops where the program declares bf16/f16.
_ELEMENTWISE = {"add", "sub", "mul", "div", "neg", "sqrt", "rsqrt", "max", "min", "abs", "square", "integer_pow"}


def kept_wide(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """Narrow (bf16/f16) arithmetic kept in float32 across ops, rounded once where the result is stored: the
    elementwise narrow ops that feed the diverging one, run as a region in float32 on the values entering
    it (the path's own) and rounded once, must reproduce the path's values bit for bit; the longest such
    region is named, with the runtime's own note where it printed one (IREE: iree-convert-bf16-arith-to-f32)."""
    import jax
    import jax.numpy as jnp

    from ....localize.region import make_region
    from ....rounding import round_to_dtype

    if ctx.path_vals is None and hasattr(ctx.path, "dispatches"):
        return per_dispatch(cause, ctx)  # no op-level view: the runtime's own dispatches are the view
    if ctx.path_vals is None or ctx.base_vals is None or ctx.localization is None:
        return None
    program = ctx.program
    producers = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
    for d in _named(ctx.localization):
        if d.op.primitive not in _ELEMENTWISE or not d.op.outputs or not d.op.outputs[0].startswith(("bfloat16", "float16")):
            continue
        found = _differing_output(ctx, d)
        if found is None:
            continue
        _, mine, _ = found
        chain = [d.op.index]  # the narrow elementwise ops upstream, nearest first
        frontier = [d.op.index]
        while frontier and len(chain) < 12:
            i = frontier.pop()
            for ref in program.ops[i].inputs:
                j = producers.get(ref) if not isinstance(ref, Literal) else None
                if j is None or j in chain:
                    continue
                op = program.ops[j].info
                if op.primitive in _ELEMENTWISE and op.outputs and op.outputs[0].startswith(("bfloat16", "float16")):
                    chain.append(j)
                    frontier.append(j)
        for size in range(len(chain), 0, -1):
            ops = sorted(chain[:size])
            try:
                region = make_region(program, ctx.path_vals, ops, d.op.index)
            except Exception:  # noqa: BLE001 - a region that cannot be cut is no evidence
                continue
            wide = [jnp.asarray(np.asarray(v).astype(np.float32)) if np.asarray(v).dtype.kind in "fV" or
                    np.asarray(v).dtype.name == "bfloat16" else jnp.asarray(v) for v in region.values]
            sub = region.sub_program()
            with jax.default_device(jax.devices("cpu")[0]):
                values = sub.evaluate(wide, lambda op, ins: _bound_wide(op, ins))
            out = np.asarray(sub.outputs(values)[0], np.float64)
            got = round_to_dtype(out, mine.dtype)
            if got.tobytes() != mine.tobytes():
                continue
            names = " → ".join(f"#{i} {program.ops[i].info.primitive}" for i in ops)
            said = next((n for n in ctx.notes if "bf16 arithmetic ops (" in n), None)  # a dispatch's own line
            seen = (f"{ctx.path} computes {names} ({d.op.user_source or d.op.source or 'unknown line'}) in float32 and "
                    f"rounds to {mine.dtype.name} once, where the program rounds after every op: on the values entering "
                    f"them that reproduces its values bit for bit")
            if said:
                seen += f" (its own note: {said.removeprefix('IREE: ')})"
            return CauseVerdict(cause.id, cause.title, "confirmed", f"the region {names} computed in float32 on "
                                f"{ctx.path}'s own inputs", seen, cause.runtime_fix or cause.fix)
    return None


def _bound_wide(op: Any, ins: list[Any]) -> list[Any]:
    """The op on float32 values: an elementwise narrow op bound on wide inputs (its narrow constants
    widened too, exactly) computes in float32."""
    import jax.numpy as jnp

    wide = [jnp.asarray(x).astype(jnp.float32) if jnp.asarray(x).dtype in (jnp.bfloat16, jnp.float16) else x
            for x in ins]
    return _bound(op, wide)


def per_dispatch(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """Where returning every intermediate changes the path's outputs, each of its dispatches on its own captured
    inputs (``dispatches.findings``): confirmed where every dispatch that stores other values than the declared
    ops give is reproduced bit for bit by computing its narrow ops in float32 and rounding only what it stores,
    and some of them compute narrow arithmetic besides a contraction (a contraction alone is narrow accumulation,
    decided by its own cause). None where the dispatches could not be captured (said in the notes)."""
    from .dispatches import findings, form, rounds_inside

    seen = findings(ctx)
    if not seen or not seen[0]:
        return None
    found, _ = seen
    differ = [f for f in found if f.differ]
    what = f"{ctx.path}'s dispatches, each on its own captured inputs"
    if not differ:
        return CauseVerdict(cause.id, cause.title, "refuted", what, "every dispatch stores what the program's declared "
                            "ops give on its inputs: the difference is not made inside a dispatch")
    worst = max(differ, key=lambda f: (f.differ / max(f.size, 1), f.max_ulp))
    ops = [ctx.program.ops[i].info for i in worst.ops]
    names = ", ".join(dict.fromkeys(op.primitive for op in ops))
    at = sorted({op.user_source or op.source or "?" for op in ops})
    most = (f"the most: {worst.name} (#{worst.ops[0]}..#{worst.ops[-1]} {names}, at {', '.join(at[:2])}), "
            f"{worst.differ} of {worst.size} stored elements, up to {worst.max_ulp} ULP")
    # a dispatch reproduced by the runtime's own order of adding its sums is that, not narrow arithmetic kept wide
    ordered = [f for f in differ if (f.reproduced_by or "").startswith("ordered:")]
    wide = [f for f in differ if f.reproduced_by not in (None, "declared") and f not in ordered]
    if not any(rounds_inside(ctx.program, f) for f in wide):
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"no dispatch that differs computes narrow "
                            f"arithmetic besides its contraction{'' if wide else ' and none is reproduced'}; {most}")
    by_order = (f"; {len(ordered)} more add their sums in {ctx.path}'s own order (read off its kernel)"
                if ordered else "")
    if len(wide) + len(ordered) < len(differ):
        left = [f.name for f in differ if f not in wide and f not in ordered]
        return CauseVerdict(cause.id, cause.title, "partly", what,
                            f"{len(wide)} of the {len(differ)} dispatches that store other values than the declared ops "
                            f"give are reproduced by float32 inside the dispatch{by_order}; {', '.join(left[:3])} by "
                            f"no formulation tried; {most}")
    kinds = sorted({form(f.reproduced_by) for f in wide if f.reproduced_by})
    seen_ = (f"{ctx.path} computes the narrow ops of each dispatch {kinds[0] if len(kinds) == 1 else 'in float32'} "
             f"and rounds only what it stores: on each dispatch's own inputs that reproduces "
             f"{'all ' if not ordered else ''}{len(wide)} dispatches that differ bit for bit "
             f"({'; '.join(kinds) if len(kinds) > 1 else 'the same in each'}){by_order}; {most}")
    notes = [n for n in ctx.notes if "bf16 arithmetic ops (" in n]
    note = next((n for n in notes if f"{worst.name}_" in n), notes[0] if notes else None)
    if note:
        seen_ += f" (its own note: {note.removeprefix('IREE: ')})"
    return CauseVerdict(cause.id, cause.title, "confirmed", what, seen_, cause.runtime_fix or cause.fix)
