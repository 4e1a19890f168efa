"""Consumer analysis: the results a semantics does not (only) round to their declared dtype."""

from __future__ import annotations

from typing import Any

import jax.extend.core as jcore
import numpy as np

from jaxparity.rounding import is_float_dtype

from ..jaxcompat import CALL_PARAM as _CALL_PARAM, DropVar as _DropVar
from .semantics import _ALSO_F32, _AS_F32, _EXACT, Semantics, _inexact, _narrow

_RELAX_CACHE: dict[tuple[jcore.Jaxpr, bool, bool], dict] = {}  # Jaxprs hash by identity
_ADDS = frozenset({"add", "sub", "add_any"})  # the consumers that let fma keep a product exact
# Producers whose narrow rounding elide_widened keeps: an explicit convert to a narrow type
# (XLA keeps a user's f32->bf16->f32 pair; it drops only the rounding of an op it computed
# in f32), and call-like / control-flow equations (their inner outputs are already rounded).
_NOT_ELIDED = frozenset({"convert_element_type", *_CALL_PARAM, "cond", "while", "scan",
                         "custom_linear_solve"})


def _widening_convert(eqn: jcore.JaxprEqn | None, dtype: Any) -> bool:
    if eqn is None or eqn.primitive.name != "convert_element_type":
        return False
    new = np.dtype(eqn.params["new_dtype"])
    return is_float_dtype(new) and new.itemsize > np.dtype(dtype).itemsize


def _relaxations(jaxpr: jcore.Jaxpr, sem: Semantics) -> dict[Any, str]:
    """Results of `jaxpr`'s equations that `sem` does not (only) round to their declared
    dtype. ``elide_widened``: a narrow result read by widening converts is also kept in
    float32 for them (only in float32 when nothing else reads it). ``fma``: a product only
    added is kept exact. A jaxpr output is a consumer that needs the declared dtype."""
    if not sem.round_results or not (sem.elide_widened or sem.fma):
        return {}
    key = (jaxpr, sem.elide_widened, sem.fma)
    if key in _RELAX_CACHE:
        return _RELAX_CACHE[key]
    uses: dict[Any, list] = {}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            if not isinstance(v, jcore.Literal):
                uses.setdefault(v, []).append(eqn)
    for v in jaxpr.outvars:
        if not isinstance(v, jcore.Literal):
            uses.setdefault(v, []).append(None)
    relax: dict[Any, str] = {}
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            users, dtype = uses.get(v), v.aval.dtype  # type: ignore[attr-defined]
            if not users or isinstance(v, _DropVar):
                continue
            widened = [_widening_convert(u, dtype) for u in users] if sem.elide_widened else []
            if any(widened) and _narrow(dtype) and eqn.primitive.name not in _NOT_ELIDED:
                relax[v] = _AS_F32 if all(widened) else _ALSO_F32
            elif (sem.fma and eqn.primitive.name == "mul" and _inexact(dtype)
                  and all(u is not None and u.primitive.name in _ADDS for u in users)):
                relax[v] = _EXACT
    _RELAX_CACHE[key] = relax
    return relax
