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

__all__ = ["ablate_call", "ablated", "variants"]

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


def _call_variants(sig: Any, arrays: dict[str, np.ndarray], static: dict[str, Any]) -> Iterator[tuple[str, dict, dict]]:
    """(words, arrays, static arguments) of a library call changed alone: each static argument set to every other
    value its kind allows (a flag flipped, 0 / 1 / -1 for an integer, the first and last axis), each float array's
    NaN read as +inf or −inf, and each integer array read by another convention: negative entries counting from the
    end, or clipped into range, for each integer static argument that may be its range."""
    for name, value in static.items():
        others: list[Any] = []
        if isinstance(value, bool):
            others = [not value]
        elif isinstance(value, int):
            others = [v for v in (0, 1, -1) if v != value]
        elif value is None and name == "axis":
            others = [0, -1]
        for other in others:
            yield f"{name}={other!r} (given {value!r})", arrays, {**static, name: other}
    for name, x in arrays.items():  # NaN read as one end of the order (a lowering that sorts or compares it so)
        if x.dtype.kind == "f" and np.isnan(x).any():
            for end, value in (("+inf", np.inf), ("-inf", -np.inf)):
                yield f"NaN in {name} read as {end}", {**arrays, name: np.where(np.isnan(x), value, x).astype(x.dtype)}, \
                    static
    ranges = [v for v in static.values() if isinstance(v, int) and not isinstance(v, bool) and v > 1]
    for name, x in arrays.items():
        if x.dtype.kind not in "iu":
            continue
        for n in ranges:
            yield (f"negative {name} counting from the end ({name} + {n} where {name} < 0)",
                   {**arrays, name: np.where(x < 0, x + n, x).astype(x.dtype)}, static)
            yield f"{name} clipped into [0, {n - 1}]", {**arrays, name: np.clip(x, 0, n - 1).astype(x.dtype)}, static


def ablate_call(ctx: Context, qual: str) -> str | None:
    """For a library call the path's converter lowers whole (``jax.nn.one_hot``): the call's own arguments, taken
    from the case run once eagerly, the call converted alone and run on them, and JAX's call with each argument
    changed alone (``_call_variants``); the change that gives the converter's values bit for bit names what its
    lowering does otherwise: "its lowering computes the call as JAX does with negative x counting from the end
    ...". None where the call alone agrees, or no change reproduces it."""
    import importlib
    import inspect

    import jax

    module, _, attr = qual.rpartition(".")
    try:
        owner = importlib.import_module(module)
        original = getattr(owner, attr)
        sig = inspect.signature(original)
    except Exception:  # noqa: BLE001 - a call this environment cannot name
        return None
    calls: list[Any] = []

    def recorder(*a: Any, **k: Any) -> Any:
        calls.append(sig.bind(*a, **k))
        return original(*a, **k)

    setattr(owner, attr, recorder)
    try:
        with jax.disable_jit():
            ctx.fn(*ctx.args)
    except Exception:  # noqa: BLE001 - the case does not run this way: nothing said
        return None
    finally:
        setattr(owner, attr, original)
    if not calls:
        return None
    bound_args = calls[0].arguments
    arrays = {k: np.asarray(v) for k, v in bound_args.items() if isinstance(v, (np.ndarray, jax.Array))}
    static = {k: v for k, v in bound_args.items() if k not in arrays}

    def call(static_: dict[str, Any]) -> Any:
        def alone(*xs: Any) -> Any:  # looked up at call time: the converter's own lowering of the call applies
            return getattr(owner, attr)(**dict(zip(arrays, xs)), **static_)
        return alone

    def out(x: Any) -> np.ndarray:
        leaves = jax.tree_util.tree_leaves(x)
        return np.asarray(leaves[0]) if len(leaves) == 1 else np.concatenate([np.ravel(np.asarray(y)) for y in leaves])

    try:
        theirs = out(ctx.path.run(call(static), tuple(arrays.values())))
        with jax.default_device(jax.devices("cpu")[0]):
            mine = out(call(static)(*arrays.values()))
    except Exception:  # noqa: BLE001 - the call alone does not convert: nothing said
        return None
    if _same(mine, theirs):
        return None
    for words, xs, st in _call_variants(sig, arrays, static):
        try:
            with jax.default_device(jax.devices("cpu")[0]):
                got = out(call(st)(*xs.values()))
        except Exception:  # noqa: BLE001 - a value the call does not take
            continue
        if _same(got, theirs):
            n = int(np.count_nonzero(mine != theirs))
            return (f"its lowering computes the call as JAX does with {words}, which gives {ctx.path}'s values of the "
                    f"call bit for bit on its own arguments (JAX's call as written: {n} element{'s' if n != 1 else ''} "
                    "apart)")
    return None
