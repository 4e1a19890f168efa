"""The JAX-version-specific details the interpreter relies on, in one place."""

from __future__ import annotations

from typing import Any

import jax

__all__ = ["_CALL_PARAM", "_COMBINER_PARAMS", "_DropVar", "_source_info", "_x64"]

# ---------------------------------------------------------------------------------------
# JAX-version-specific details (checked against jax 0.9.2 with jax.make_jaxpr):
#  * jax.jit appears as primitive "jit" (formerly "pjit"), param `jaxpr` (ClosedJaxpr).
#  * jax.checkpoint/remat is "remat2" (printed "checkpoint"); `jaxpr` is an OPEN Jaxpr.
#  * custom_jvp -> "custom_jvp_call", custom_vjp -> "custom_vjp_call"; both carry
#    `call_jaxpr` (ClosedJaxpr) taking *all* the eqn's operands (consts included).
#  * "cond": `branches` (tuple of ClosedJaxpr), operand 0 is the (clamped) branch index.
#  * "while": cond_jaxpr/body_jaxpr (ClosedJaxpr), cond_nconsts, body_nconsts.
#  * "scan": jaxpr (ClosedJaxpr), num_consts, num_carry, length, reverse.
#  * lax.composite is "composite", param `jaxpr` (its decomposition); custom_dce's
#    "custom_dce_call" carries `fun_jaxpr` taking all the eqn's operands.
#  * "custom_linear_solve": `jaxprs` and `const_lengths`, both NamedTuples (matvec, vecmat,
#    solve, transpose_solve) of ClosedJaxprs (or None) and of const counts; the operands
#    are those consts in that order, then b. Its impl runs `solve` on solve's consts + b.
#  * Random samplers: random_gamma's impl is a JAX function (a rejection loop), so under
#    jax.disable_jit its operations run one by one, and jitted they are fused.
#  * Combiner jaxprs typed at the declared dtype (binding them with f64 operands fails MLIR
#    verification): scatter-* `update_jaxpr` (Jaxpr or None) + `update_consts`, "reduce"
#    `jaxpr` (ClosedJaxpr), "reduce_window" `jaxpr` + `consts`.
#  * Jaxpr/ClosedJaxpr hash by identity; jax.extend.core does not export DropVar.
#  * jax.enable_x64 is a config State usable as `with jax.enable_x64(bool):`; before jax 0.5
#    (e.g. 0.4.38, used by `--env`) the context managers are jax.experimental.enable_x64() and
#    disable_x64(): `_x64(bool)` below picks whichever exists.
#  * Source lines: jax._src.source_info_util.summarize(eqn.source_info) ('' if unknown).
# ---------------------------------------------------------------------------------------
from jax._src import source_info_util as _source_info  # noqa: E402


def _x64(on: bool) -> Any:
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(on)
    from jax import experimental

    return experimental.enable_x64() if on else experimental.disable_x64()


from jax._src.core import DropVar as _DropVar  # noqa: E402

_CALL_PARAM = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr",
               "core_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
               "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
               "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr",
               "composite": "jaxpr", "custom_dce_call": "fun_jaxpr"}
_COMBINER_PARAMS = {"reduce": ("jaxpr", None), "reduce_window": ("jaxpr", "consts"),
                    **{f"scatter{s}": ("update_jaxpr", "update_consts")
                       for s in ("", "-add", "-sub", "-mul", "-min", "-max")}}
