"""An op's own captured values, read from the explanation's context, and the case with that one op computed
otherwise: what the rules that decide a cause on the op itself (``artifact``, ``variants``)
share. ``ctx`` is the explanation's context (``explain.context``): its program, both sides' per-op values, its re-runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..verdicts import CauseVerdict, Fix

__all__ = ["bound", "differing_output", "model_change", "named", "op_inputs", "show", "where", "with_op"]


def where(d: Any) -> str:
    return f"#{d.op.index} {d.op.primitive} ({d.op.user_source or d.op.source or 'unknown line'})"


def named(loc: Any) -> list[Any]:
    """The divergences that carry the output difference, then the others (``Localization.ranked``), at
    the case's top level (the artifact is the whole program's)."""
    return [d for d in (loc.ranked if loc is not None else []) if not d.within]


def differing_output(ctx: Any, d: Any) -> tuple[int, np.ndarray, np.ndarray] | None:
    """(value id, path value, baseline value) of the op's first output that differs."""
    from ...localize.localizer import values_equal

    op = ctx.program.ops[d.op.index]
    for vid in op.outputs:
        if vid is None or vid not in ctx.path_vals.values or vid not in ctx.base_vals.values:
            continue
        p, b = np.asarray(ctx.path_vals.values[vid]), np.asarray(ctx.base_vals.values[vid])
        if not values_equal(p, b):
            return vid, p, b
    return None


def show(x: Any) -> str:
    x = np.asarray(x)
    if x.size == 1:
        v = x.ravel()[0]
        return f"{float(v):.8g}" if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else str(v.item())
    return f"{x.dtype}{list(x.shape)}"


def bound(op: Any, ins: list[Any]) -> list[Any]:
    from ...localize.program import bind_op

    return bind_op(op, ins)


def with_op(program: Any, index: int | set[int], instead: Callable[[Any, list[Any]], list[Any]]) -> Callable[..., tuple]:
    """The case's program with op ``index`` (or each op of a set of indices) computed by ``instead(op,
    inputs)``: the model with that change, as a function of the case's arguments (a model change the
    explanation re-runs on every side)."""
    import jax

    changed_ops = {index} if isinstance(index, int) else set(index)

    def apply(op: Any, ins: list[Any]) -> list[Any]:
        return instead(op, ins) if op.info.index in changed_ops else bound(op, ins)

    def changed(*args: Any) -> tuple:
        return tuple(program.outputs(program.evaluate(jax.tree_util.tree_leaves(args), apply)))

    return changed


def op_inputs(ctx: Any, d: Any) -> list[Any]:
    """The op's inputs as the path computed them (its own captured values)."""
    from ...localize.localizer import _read, arg_values

    args = arg_values(ctx.program, ctx.flat_args)
    args.update(ctx.path_vals.args)
    return [_read(ctx.program, ref, ctx.path_vals.values, args) for ref in ctx.program.ops[d.op.index].inputs]


def model_change(cause: Any, ctx: Any, what: str, seen: str, remedy: str, fixed: Callable[..., Any], label: str,
                 change: str, widened: set[int] | None = None) -> CauseVerdict:
    """A cause confirmed on the op's own evidence, with its model change (``fixed``, named ``label``, said as
    ``change``) re-run on the path and on the baseline: the fix holds where the two then agree. ``widened``:
    the ops the change computes in float32, kept for the fix search (``Context.widened``)."""
    outs = [ctx.run(spec, fixed, label) for spec in (ctx.path, ctx.baseline)]
    failed = next((o for o in outs if isinstance(o, str)), None)
    if failed is not None:
        return CauseVerdict(cause.id, cause.title, "confirmed", what, seen, remedy,
                            Fix("model change", remedy, None, False, f"the rewritten model failed: {failed}"))
    rerun = ctx.compare(outs[0], outs[1])
    if widened:
        ctx.widened.append((frozenset(widened), label, rerun))
    words = (f"re-ran {ctx.path} and {ctx.baseline} on the model {change}: they differ in {rerun.after[0]} elements "
             f"(were {rerun.before[0]})")
    if rerun.after == rerun.before:
        words += (": the difference is unchanged, so what the op shows is real but does not make the output "
                  "difference here")
    return CauseVerdict(cause.id, cause.title, "confirmed", what, seen, remedy,
                        Fix("model change", remedy, f"{ctx.path} [{label}]", rerun.outcome == "parity", words,
                            rerun=rerun))
