"""A Flax NNX module as a case: its state (``nnx.split``) the weights input, its graph bound in."""

from __future__ import annotations

from typing import Any

from .model import ModelCase, named, split_keywords, with_keywords, without_keywords

__all__ = ["from_nnx"]


def from_nnx(module: Any, *inputs: Any, **kwargs: Any) -> ModelCase:
    """``module(*inputs, **kwargs)`` as ``(fn, (state, *inputs))``, on a copy of the module in eval mode
    (``module.eval()``: no dropout, BatchNorm's running statistics); ``module`` itself is left as it is.

    The state is a nested dict of its arrays by attribute path (``arg0/conv/kernel``, ``arg0/bn/mean``); the
    graph and the random-number state (``nnx.Rngs``, unused in eval mode) are bound in. Keyword arguments
    that are arrays are a last input, a dict named by keyword; the others are bound in.
    """
    import jax
    from flax import nnx

    arrays, static = split_keywords(kwargs)
    served = nnx.clone(module)
    served.eval()
    graphdef, *states = nnx.split(served, nnx.RngState, ...)
    rng_state, template = states

    def fn(state: Any, *inputs: Any) -> Any:
        positional, keywords = without_keywords(inputs, arrays)
        variables = jax.tree.map(lambda v: v, template)  # a fresh State each call: the template never holds a tracer
        nnx.replace_by_pure_dict(variables, state)
        model = nnx.merge(graphdef, rng_state, variables)
        return model(*positional, **static, **keywords)

    return ModelCase(named(fn, type(module).__name__), (nnx.to_pure_dict(template), *with_keywords(inputs, arrays)))
