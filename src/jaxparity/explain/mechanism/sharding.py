"""``partition``: a path sharded over a mesh (``jit:mesh=8``) diverges at a reduction whose partial sums the
compiled program combines with a collective (all-reduce, reduce-scatter): named from the optimized HLO, and
judged against the reduction's error bound."""

from __future__ import annotations

import re

from ..causes import Cause
from ..context import Context, first_line
from ..verdicts import CauseVerdict, Status

__all__ = ["partitioned"]

_COLLECTIVE = re.compile(r"%([\w.\-]+) = \S+ (all-reduce|reduce-scatter)(?:-start)?\(.*?op_name=\"([^\"]*)\"")


def partitioned(cause: Cause, ctx: Context) -> CauseVerdict:
    """A sharded path's divergence at a reduction: the collective that combines its partial sums (from
    the optimized HLO of the sharded program), and whether the difference is within the bound."""
    options = ctx.path.options
    what = "the collectives of the sharded program's optimized HLO, and each reduction's error bound"
    if "mesh" not in options:
        return CauseVerdict(cause.id, cause.title, "not run", what, f"{ctx.path} is not sharded (no mesh=N)")
    loc = ctx.localization
    reductions = [d for d in (loc.local if loc is not None else ()) if d.op.primitive in (cause.primitives or ())]
    if loc is None or not reductions:
        return CauseVerdict(cause.id, cause.title, "refuted", what, "no local divergence is a reduction")
    try:
        hlo = ctx.path.optimized_hlo(ctx.fn, ctx.args)
    except Exception as e:
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the sharded program could not be compiled "
                            f"for its HLO ({first_line(e)})")
    found = _COLLECTIVE.findall(hlo or "")
    parts = []
    for d in reductions[:3]:
        suffix = "/".join(x for x in (d.op.name_stack, d.op.primitive) if x)
        mine = [f"%{name} ({kind})" for name, kind, op_name in found if op_name.endswith(suffix)]
        if not mine:
            continue
        bound = (f"within the error bound of this sum ({d.max_abs:.3g} <= {d.noise_bound:.3g})" if d.within_noise_bound
                 else f"beyond the error bound of this sum ({d.max_abs:.3g} > {d.noise_bound:.3g}): not order alone"
                 if d.noise_bound is not None else "no error bound known for it")
        parts.append((d, f"#{d.op.index} {d.op.primitive} ({d.op.user_source or d.op.source or 'unknown line'}) is "
                      f"summed as {options['mesh']} partial sums, one per device, combined by {', '.join(mine[:2])}; "
                      f"{bound}"))
    if not parts:
        kinds = sorted({kind for _, kind, _ in found})
        return CauseVerdict(cause.id, cause.title, "refuted", what, "the diverging reductions are not combined by a "
                            f"collective ({'the program has ' + ', '.join(kinds) if kinds else 'none in the program'})")
    status: Status = "noise" if all(d.within_noise_bound for d, _ in parts) and len(parts) == len(loc.local) else "confirmed"
    return CauseVerdict(cause.id, cause.title, status, what, "; ".join(t for _, t in parts), cause.fix)
