"""``stored-constant``: the diverging op computes a constant (no input of the case reaches it), and the
runtime's artifact holds the path's value as a stored constant: the converter wrote the constant otherwise
(TFLite stores -inf as -3.4028235e38). The fix is a model change every runtime stores alike (a finite fill),
verified by re-running the path and the baseline on it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...causes import Cause
from ...verdicts import CauseVerdict
from ..captured import bound as _bound
from ..captured import differing_output as _differing_output
from ..captured import model_change as _model_change
from ..captured import named as _named
from ..captured import show as _show
from ..captured import where as _where
from ..captured import with_op as _with_op
from ..op_rules import constant_only

__all__ = ["stored_constant"]


def _jnp_constant(value: float, dtype: str) -> str:
    """How the model writes the stored value: 'jnp.finfo(jnp.float32).min' for -FLT_MAX."""
    try:
        info = np.finfo(np.dtype(dtype))
    except (TypeError, ValueError):
        return repr(value)
    if value == float(info.min):
        return f"jnp.finfo(jnp.{dtype}).min"
    if value == float(info.max):
        return f"jnp.finfo(jnp.{dtype}).max"
    return f"{value:.9g}"


def stored_constant(cause: Cause, ctx: Any) -> CauseVerdict | None:
    loc = ctx.localization
    for d in _named(loc):
        if not constant_only(d):
            continue
        found = _differing_output(ctx, d) if ctx.path_vals is not None and ctx.base_vals is not None else None
        if found is None:
            continue
        vid, mine, theirs = found
        artifact = ctx.artifact()
        tensors = artifact.holding(mine, constant=True) if artifact is not None else []
        what = f"the constant {_where(d)} computes, against {artifact.runtime if artifact else ctx.path}'s own"
        if artifact is not None and not tensors:
            continue  # the artifact computes it: not a stored constant
        declared = _show(theirs) if d.declared_side in ("baseline", "both") else None
        held = (f"{artifact.runtime} stores it as the constant {artifact.describe(tensors[0])}" if tensors else
                f"{ctx.path} gives {_show(mine)}")
        seen = (f"{_where(d)} takes no input of the case (it computes a constant); {held}, where the program "
                f"declares {declared or _show(theirs)}: the converter wrote the constant otherwise")
        # The model change: write the constant as the runtime stores it, so every path computes with it.
        at = d.op.user_source or d.op.source
        differ = mine != theirs
        olds, news = np.unique(np.asarray(theirs)[differ]), np.unique(np.asarray(mine)[differ])
        if at is None or olds.size != 1 or news.size != 1:
            return CauseVerdict(cause.id, cause.title, "confirmed", what, seen, cause.fix)
        old, new = float(olds[0]), float(news[0])
        written = _jnp_constant(new, str(np.asarray(mine).dtype))
        remedy = (f"write the constant as {ctx.path} stores it: {written} in place of {old!r} at {at} "
                  f"({'a finite fill, which changes the model: ' if math.isinf(old) else ''}every path then "
                  f"computes with the value {ctx.path} already uses, {ctx.baseline} too)")
        return _model_change(cause, ctx, what, seen, remedy, _with_constant(ctx.program, d.op.index, old, new),
                             "stored constant", f"with {written} at {at}")
    return None


def _with_constant(program: Any, index: int, declared: float, stored: float) -> Callable[..., tuple]:
    """The case's program with op ``index`` giving ``stored`` where it gave ``declared``: the model written
    with the constant as the runtime stores it."""
    import jax.numpy as jnp

    def stored_as_the_runtime_does(op: Any, ins: list[Any]) -> list[Any]:
        return [jnp.where(o == declared, jnp.asarray(stored, o.dtype), o) if jnp.issubdtype(o.dtype, jnp.inexact)
                else o for o in _bound(op, ins)]

    return _with_op(program, index, stored_as_the_runtime_does)
