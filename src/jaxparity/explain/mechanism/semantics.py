"""``fingerprint``: a candidate semantics of the interpreter (``explain.evidence.fingerprint``) reproduces the
path's outputs bit for bit where the declared semantics do not: how the system that produced them computed."""

from __future__ import annotations

from ..causes import Cause
from ..context import Context
from ..verdicts import CauseVerdict

__all__ = ["fingerprinted"]


def fingerprinted(cause: Cause, ctx: Context) -> CauseVerdict:
    fp = ctx.fingerprint
    what = f"candidate semantics {', '.join(repr(c) for c in cause.candidates)} against {ctx.path}'s outputs"
    if fp is None:
        return CauseVerdict(cause.id, cause.title, "not run", what, "no fingerprint for this path")
    by_name = {m.candidate: m for m in fp.matches}
    declared = by_name.get("declared")
    exact = [c for c in cause.candidates if c in by_name and by_name[c].exact]
    if exact and not (declared and declared.exact):
        return CauseVerdict(cause.id, cause.title, "confirmed", what, f"'{exact[0]}' reproduces {ctx.path} bit for "
                            f"bit ({by_name[exact[0]].description}); the declared semantics do not", cause.fix)
    near = ", ".join(f"'{c}' gives other values in {by_name[c].n_differ} element"
                     f"{'s' if by_name[c].n_differ != 1 else ''}" + (f" (up to {by_name[c].max_ulp} ULP)"
                                                                      if by_name[c].max_ulp is not None and
                                                                      by_name[c].max_ulp < 2**31 else "")
                     for c in cause.candidates if c in by_name)
    return CauseVerdict(cause.id, cause.title, "refuted", what, near or "no such candidate")
