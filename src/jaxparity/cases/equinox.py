"""An Equinox module as a case: its floating-point arrays the weights input, the rest of it bound in."""

from __future__ import annotations

import functools
from typing import Any

from .model import ModelCase, named, split_keywords, with_keywords, without_keywords

__all__ = ["from_equinox"]


def from_equinox(module: Any, *inputs: Any, vmap: bool = False, **kwargs: Any) -> ModelCase:
    """``module(*inputs, **kwargs)`` as ``(fn, (arrays, *inputs))``, in inference mode
    (``eqx.nn.inference_mode``: Dropout off, as served).

    ``eqx.partition(module, eqx.is_inexact_array)``: the floating-point arrays are the weights input, each named
    by its attribute path (``arg0/layers/0/weight``); activation functions, integer arrays and Python numbers
    are bound in. ``vmap``: the inputs carry a batch axis the module, written for one example as Equinox
    modules are, does not: map it over their leading axis. Keyword arguments that are arrays are a last
    input, a dict named by keyword; the others are bound in.
    """
    import equinox as eqx
    import jax

    arrays, static = split_keywords(kwargs)
    weights, rest = eqx.partition(eqx.nn.inference_mode(module), eqx.is_inexact_array)

    def fn(weights: Any, *inputs: Any) -> Any:
        model = eqx.combine(weights, rest)
        positional, keywords = without_keywords(inputs, arrays)
        call = functools.partial(model, **static)
        return jax.vmap(call)(*positional, **keywords) if vmap else call(*positional, **keywords)

    return ModelCase(named(fn, type(module).__name__), (weights, *with_keywords(inputs, arrays)))
