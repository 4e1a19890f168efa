"""``parameter-ignored``: which parameter of the carrying op the path's converter or compiler loses, found by
ablation, not by a table. JAX's own op is re-bound on the op's captured inputs with each of its parameters set,
one at a time, to every other value its kind allows (a flag flipped, each other member of an enum such as a
rounding method or a gather's out-of-bounds mode, axes empty or all of them, an integer 0 or 1, the other
precisions); a variant that gives the path's own values of the op bit for bit where the declared parameters do
not names what the path computes instead: "jax2onnx ignores rounding_method of round (it computes
ROUND_TO_NEAREST_EVEN)".
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..causes import Cause
from ..context import Context
from ..verdicts import CauseVerdict
from .captured import differing_output, named, op_inputs, where

__all__ = ["ablated", "variants"]

_MOST = 48  # variants bound per op at most
_SKIP = frozenset({"jaxpr", "call_jaxpr", "body_jaxpr", "cond_jaxpr", "branches", "fun_jaxpr", "out_sharding",
                   "sharding", "name", "inline", "keep_unused", "donated_invars", "in_shardings", "out_shardings",
                   "in_layouts", "out_layouts", "resource_env", "ctx_mesh", "compiler_options_kvs", "new_dtype",
                   "weak_type", "shape", "dimensions", "broadcast_dimensions", "slice_sizes", "dimension_numbers",
                   "update_jaxpr", "update_consts", "indices_are_sorted", "unique_indices", "algorithm", "accuracy"})


def variants(name: str, value: Any, ndim: int) -> Iterator[Any]:
    """Every other value a parameter of this kind may take: a flag flipped, each other member of its enum, axes
    empty and all of them (for an op of ``ndim`` dimensions), 0 and 1 for an integer, the other precisions."""
    from jax import lax

    if name in _SKIP:
        return
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, enum.Enum):
        yield from (m for m in type(value) if m is not value)
    elif isinstance(value, int):
        yield from (v for v in (0, 1) if v != value)
    elif isinstance(value, tuple) and all(isinstance(v, int) for v in value) and name in ("axes", "dimension"):
        for axes in ((), tuple(range(ndim))):
            if axes != value:
                yield axes
    elif name == "precision":
        for p in (lax.Precision.DEFAULT, lax.Precision.HIGHEST):
            if value != (p, p):
                yield (p, p)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def ablated(cause: Cause, ctx: Context) -> CauseVerdict:
    """The carrying op re-bound with each of its parameters changed alone: the change that gives the path's own
    values of the op bit for bit names the parameter the path ignores (confirmed); none: refuted."""
    loc = ctx.localization
    if loc is None or ctx.path_vals is None or ctx.base_vals is None:
        return CauseVerdict(cause.id, cause.title, "not run", "", "no per-op values for this path")
    tried = 0
    for d in named(loc)[:2]:
        op = ctx.program.ops[d.op.index]
        params = dict(op.eqn.params)
        out = differing_output(ctx, d)
        if out is None or not params:
            continue
        vid, mine, theirs = out
        k = [v for v in op.outputs if v is not None].index(vid)
        try:
            ins = op_inputs(ctx, d)
        except Exception:  # noqa: BLE001 - not captured
            continue
        declared = _bind(op, ins, params, k)
        if declared is None or _same(declared, mine):
            continue  # JAX's op gives the path's values as declared: no parameter to blame
        ndim = max((np.ndim(x) for x in ins), default=0)
        for name, value in params.items():
            for other in variants(name, value, ndim):
                if tried >= _MOST:
                    break
                tried += 1
                got = _bind(op, ins, {**params, name: other}, k)
                if got is None or not _same(got, mine):
                    continue
                who = ctx.path.converter or ctx.path.spec
                n = int(np.count_nonzero(np.asarray(mine) != np.asarray(theirs)))
                said = (f"{who} ignores {name} of {op.info.primitive}: JAX's {op.info.primitive} with {name}="
                        f"{_show(other)} gives {ctx.path}'s values of {where(d)} bit for bit on its captured inputs, "
                        f"as declared ({name}={_show(value)}) it gives {ctx.baseline}'s ({n} elements apart)")
                layer = "converter" if ctx.path.converter else "compiler"
                return CauseVerdict(cause.id, f"{name} of {op.info.primitive} ignored", "confirmed",
                                    f"{where(d)} re-bound with each parameter changed alone", said,
                                    f"report it to {who}'s maintainers ({name} of {op.info.primitive} is computed as "
                                    f"{_show(other)}); until then, write the op in a form that does not depend on "
                                    f"{name} (the fix search tries them)", layer=layer)
    return CauseVerdict(cause.id, cause.title, "refuted" if tried else "not run",
                        "the carrying op re-bound with each parameter changed alone",
                        f"none of the {tried} variants of its parameters gives the path's values" if tried else
                        "the carrying op has no parameter with other values to try")


def _bind(op: Any, ins: list[Any], params: dict[str, Any], k: int) -> np.ndarray | None:
    import jax

    try:
        with jax.default_device(jax.devices("cpu")[0]):
            outs = op.eqn.primitive.bind(*[jax.numpy.asarray(x) for x in ins], **params)
        outs = outs if op.eqn.primitive.multiple_results else [outs]
        return np.asarray(outs[k])
    except Exception:  # noqa: BLE001 - a value the primitive does not take: no variant
        return None


def _show(v: Any) -> str:
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, tuple) and v and all(hasattr(p, "name") for p in v):
        return v[0].name
    return repr(v)
