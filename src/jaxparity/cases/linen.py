"""A Flax linen module and its variables as a case: ``module.apply(variables, *inputs)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .model import ModelCase, inference_flags, named, split_keywords, with_keywords, without_keywords

__all__ = ["from_flax"]


def from_flax(module: Any, variables: Any, *inputs: Any, method: str | Callable[..., Any] | None = None,
              **kwargs: Any) -> ModelCase:
    """``module.apply(variables, *inputs, method=method, **kwargs)`` as ``(fn, (variables, *inputs))``.

    The variables (``model.init``'s ``{"params": ..., "batch_stats": ...}``) are one input, named by module
    path (``arg0/params/Conv_0/kernel``). Keyword arguments that are arrays (a mask) are a last input, a
    dict named by keyword; the others are bound in. A ``train``/``training``/``is_training`` or
    ``deterministic`` parameter of the method that is not given is set for inference (``train=False``,
    ``deterministic=True``): no dropout, batch statistics read, not updated.
    """
    arrays, static = split_keywords(kwargs)
    if method is None:
        called: Callable[..., Any] = module.__call__
        leading: tuple = ()
    elif isinstance(method, str):
        called, leading = getattr(module, method), ()
    else:  # an unbound method of the module's class, as flax accepts it: self comes first
        called, leading = method, (module,)
    static = {**inference_flags(called, (*leading, *inputs), kwargs), **static}

    def fn(variables: Any, *inputs: Any) -> Any:
        positional, keywords = without_keywords(inputs, arrays)
        return module.apply(variables, *positional, method=method, **static, **keywords)

    name = type(module).__name__ + (f".{getattr(method, '__name__', method)}" if method is not None else "")
    return ModelCase(named(fn, name), (variables, *with_keywords(inputs, arrays)))
