"""The program as JAX traced it, replayed primitive by primitive for jax2onnx: what the onnx paths convert
where jax2onnx cannot convert the function as written.

jax2onnx traces the function itself with its plugins patched into flax, equinox and jax.numpy
(``nnx.Dropout.__call__``, ``linen.Dense``, ``jnp.shape``...); a real model's own calls can miss those
patches: an NNX ``Dropout`` called with ``rngs=`` (flax's NNX MNIST tutorial), ``jnp.shape`` returning a
tracer inside flax's ``nn.scan`` (flax's sst2 BiLSTM). Here the function is traced once outside them,
dead code is dropped (a ``jax.random.key(0)`` nothing uses), and the trace is replayed: each primitive
bound again, ``jit`` calls inlined, so jax2onnx sees primitives only. Two of them are rewritten, each
into the same values in JAX, where jax2onnx 0.17 lowers them wrongly:

- ``gather`` with an index column for a dimension its slice covers whole (``vmap(jnp.roll)`` by traced
  lengths, flax's ``flip_sequences``): in CLIP mode that start can only be 0, so the column is dropped;
- ``reduce_window_*`` over an N-D operand (jax2onnx makes every dimension a pooling dimension, which ONNX
  Runtime refuses: "Unsupported pooling size"): the windowed dimensions moved last, the others folded
  into one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import jaxcompat

__all__ = ["replayed"]


def replayed(flat_fn: Callable[..., Any], leaves: list[Any]) -> Callable[..., Any]:
    """``flat_fn`` (a function of the argument leaves) as the replay of its own trace on ``leaves``."""
    import jax

    closed = jax.make_jaxpr(flat_fn)(*leaves)
    jaxpr, used = jaxcompat.dce_jaxpr(closed.jaxpr)

    def replay(*xs: Any) -> Any:
        return _evaluate(jaxpr, closed.consts, [x for x, u in zip(xs, used) if u])

    return replay


def _evaluate(jaxpr: Any, consts: Any, args: list[Any]) -> list[Any]:
    from jax.extend import core

    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        if name in ("jit", "pjit"):
            inner = eqn.params[jaxcompat.CALL_PARAM[name]]
            outs = _evaluate(inner.jaxpr, inner.consts, ins)
        else:
            rule = _RULES.get(name)
            out = rule(eqn, ins) if rule is not None else None
            if out is None:
                out = jaxcompat.bind(eqn.primitive, ins, eqn.params)
                outs = list(out) if eqn.primitive.multiple_results else [out]
            else:
                outs = [out]
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _gather(eqn: Any, ins: list[Any]) -> Any:
    """A gather's index columns for dimensions its slice covers whole dropped (in CLIP or PROMISE_IN_BOUNDS
    mode their start is 0 whatever the index); None where it has none."""
    import jax.numpy as jnp
    from jax import lax

    p, (operand, idx) = eqn.params, ins
    dn = p["dimension_numbers"]
    whole = [k for k, d in enumerate(dn.start_index_map)
             if p["slice_sizes"][d] == operand.shape[d] and d not in dn.collapsed_slice_dims]
    clipped = p["mode"] in (lax.GatherScatterMode.CLIP, lax.GatherScatterMode.PROMISE_IN_BOUNDS)
    if not whole or not clipped or len(whole) == len(dn.start_index_map):
        return None
    keep = [k for k in range(len(dn.start_index_map)) if k not in whole]
    numbers = lax.GatherDimensionNumbers(
        offset_dims=dn.offset_dims, collapsed_slice_dims=dn.collapsed_slice_dims,
        start_index_map=tuple(dn.start_index_map[k] for k in keep),
        operand_batching_dims=dn.operand_batching_dims, start_indices_batching_dims=dn.start_indices_batching_dims)
    return lax.gather(operand, jnp.take(idx, np.array(keep), axis=-1), numbers, p["slice_sizes"],
                      indices_are_sorted=p["indices_are_sorted"], unique_indices=p["unique_indices"],
                      mode=p["mode"], fill_value=p["fill_value"])


def _reduce_window(eqn: Any, ins: list[Any]) -> Any:
    """A reduce_window over at most two windowed dimensions as one over [the others folded, *windowed];
    None where it already is one (or windows more)."""
    import jax.numpy as jnp

    p, (x,) = eqn.params, ins
    window, strides, padding = p["window_dimensions"], p["window_strides"], p["padding"]
    base, dilation = p["base_dilation"], p["window_dilation"]
    active = [d for d in range(x.ndim) if window[d] != 1 or strides[d] != 1 or tuple(padding[d]) != (0, 0)
              or base[d] != 1 or dilation[d] != 1]
    if not active or len(active) > 2 or x.ndim <= len(active) + 1:
        return None
    rest = [d for d in range(x.ndim) if d not in active]
    lead = [x.shape[d] for d in rest]
    y = jnp.transpose(x, rest + active).reshape((int(np.prod(lead)), *(x.shape[d] for d in active)))

    def pick(t: Any) -> tuple:
        return (1, *(t[d] for d in active))

    y = eqn.primitive.bind(y, window_dimensions=pick(window), window_strides=pick(strides),
                           padding=((0, 0), *(tuple(padding[d]) for d in active)), base_dilation=pick(base),
                           window_dilation=pick(dilation))
    y = y.reshape((*lead, *y.shape[1:]))
    return jnp.transpose(y, tuple(int(i) for i in np.argsort(rest + active)))


_RULES: dict[str, Callable[[Any, list[Any]], Any]] = {
    "gather": _gather, "reduce_window_max": _reduce_window, "reduce_window_min": _reduce_window,
    "reduce_window_sum": _reduce_window}
