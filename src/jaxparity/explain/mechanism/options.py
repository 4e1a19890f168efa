"""``option-diff``: the path is the baseline's runtime with other options (``jit:jax_threefry_partitionable=false``
against ``jit``): those options are the difference, said first; the op's own evidence names the mechanism."""

from __future__ import annotations

from ..causes import Cause
from ..context import Context
from ..verdicts import CauseVerdict

__all__ = ["option_diff"]


def option_diff(cause: Cause, ctx: Context) -> CauseVerdict:
    """The path is the baseline's runtime with other options: those options are the difference."""
    mine, theirs = ctx.path.options, ctx.baseline.options
    what = f"the specs of {ctx.path} and {ctx.baseline}"
    if ctx.path.name != ctx.baseline.name or mine == theirs:
        return CauseVerdict(cause.id, cause.title, "not run", what, "the paths differ by more than options")
    keys = sorted(set(mine) | set(theirs))
    if any(k == "device" and mine.get(k) != theirs.get(k) for k in keys) and ctx.path.device() != ctx.baseline.device():
        return CauseVerdict(cause.id, cause.title, "not run", what, f"{ctx.path} and {ctx.baseline} compute on other "
                            "devices: the device's arithmetic is its own cause (device-arithmetic), not an option")
    differ = "; ".join(f"{k}={mine.get(k, 'default')} on {ctx.path}, {theirs.get(k, 'default')} on {ctx.baseline}"
                       for k in keys if mine.get(k) != theirs.get(k))
    return CauseVerdict(cause.id, cause.title, "confirmed", what, f"the two paths run the same runtime and differ only "
                        f"in {differ}: that setting changes the numbers", cause.fix)
