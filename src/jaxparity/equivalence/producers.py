"""Which outputs of a function come straight from an operation whose results are not unique.

Traces the function once (x64 off, as it runs) and follows each output back through call-like
wrappers (``jit``, ``custom_jvp_call``...) to the equation that computed it. Outputs that pass through
any other operation are compared element by element: their canonical form is not known.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.extend.core as jcore

from ..jaxcompat import CALL_PARAM as _CALL_PARAM
from ..pytree import named_leaves
from .rules import OutputRule

__all__ = ["output_rules"]


def _roles(eqn: jcore.JaxprEqn) -> list[str] | None:
    """The role of each result of ``eqn``, for the primitives ``rules`` knows; None for the others."""
    name, p = eqn.primitive.name, eqn.params
    if name == "eigh":
        return ["vectors", "values"]
    if name == "eig":
        return ["values"] + (["vl"] if p.get("compute_left_eigenvectors") else []) + (
            ["vr"] if p.get("compute_right_eigenvectors") else [])
    if name == "svd":
        return ["s", "u", "vt"][:len(eqn.outvars)]
    if name == "qr":
        return ["q", "r"]
    if name == "schur":
        return ["t", "q"][:len(eqn.outvars)]
    if name == "sort" and not p.get("is_stable", True):
        return [f"operand{i}" for i in range(len(eqn.outvars))]
    return None


def _producer(jaxpr: jcore.Jaxpr, var: Any) -> tuple[jcore.JaxprEqn, int] | None:
    """The equation (and result index) that computes ``var``, looking inside call-like equations."""
    for eqn in jaxpr.eqns:
        for i, out in enumerate(eqn.outvars):
            if out is var:
                param = _CALL_PARAM.get(eqn.primitive.name)
                if param is None:
                    return eqn, i
                inner = eqn.params[param]
                inner = inner.jaxpr if isinstance(inner, jcore.ClosedJaxpr) else inner
                inner_var = inner.outvars[i]
                return None if isinstance(inner_var, jcore.Literal) else _producer(inner, inner_var)
    return None  # an input or a constant


def output_rules(fn: Callable[..., Any], args: tuple) -> dict[str, OutputRule]:
    """Leaf name (``out/0``...) -> the rule its values are compared with, for the outputs that need one.

    Read from the trace the compiled paths share (``paths.staging``): no trace of its own once one of
    them has run."""
    from ..paths.staging import staged

    stage, leaves = staged(fn, args)
    closed = stage.jitted.trace(*leaves).jaxpr
    shape = jax.tree_util.tree_unflatten(stage.out_tree(leaves), closed.out_avals)
    names = [n for n, _ in named_leaves(shape, "out")]
    found: dict[int, tuple[jcore.JaxprEqn, int]] = {}
    for k, var in enumerate(closed.jaxpr.outvars):
        if not isinstance(var, jcore.Literal) and (hit := _producer(closed.jaxpr, var)) is not None:
            found[k] = hit
    rules: dict[str, OutputRule] = {}
    for k, (eqn, i) in found.items():
        roles = _roles(eqn)
        if roles is None:
            continue
        group = tuple((roles[j], names[m]) for m, (e, j) in found.items() if e is eqn)
        params = tuple((key, eqn.params[key]) for key in ("num_keys", "dimension") if key in eqn.params)
        rules[names[k]] = OutputRule(eqn.primitive.name, roles[i], group, params)
    return rules
