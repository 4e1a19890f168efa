"""A Haiku ``hk.transform``-ed function as a case: its params (and state) the weights input."""

from __future__ import annotations

from typing import Any

from .model import ModelCase, named, split_keywords, with_keywords, without_keywords

__all__ = ["from_haiku"]


def from_haiku(transformed: Any, params: Any, *inputs: Any, state: Any = None, **kwargs: Any) -> ModelCase:
    """``transformed.apply(params, [state,] None, *inputs, **kwargs)`` as ``(fn, (variables, *inputs))``.

    ``variables`` is ``{"params": params}``, with ``"state"`` beside it for ``hk.transform_with_state``
    (whose new state is dropped: the output alone), named ``arg0/params/mlp/~/linear_0/w`` as Haiku names
    its modules. The random key is None, as Haiku's inference runs: a function that draws one raises.
    Haiku's functions take their training flag as the user wrote it: pass ``is_training=False`` (or the
    name yours has). Keyword arguments that are arrays are a last input, a dict named by keyword; the
    others are bound in.
    """
    import haiku as hk

    with_state = isinstance(transformed, hk.TransformedWithState)
    if with_state and state is None:
        raise ValueError("an hk.transform_with_state function needs its state: from_haiku(f, params, x, state=state)")
    if not with_state and state is not None:
        raise ValueError("state= is for hk.transform_with_state; this function was made by hk.transform")
    arrays, static = split_keywords(kwargs)
    variables = {"params": params, **({"state": state} if with_state else {})}

    def fn(variables: Any, *inputs: Any) -> Any:
        positional, keywords = without_keywords(inputs, arrays)
        if with_state:
            out, _ = transformed.apply(variables["params"], variables["state"], None, *positional, **static,
                                       **keywords)
            return out
        return transformed.apply(variables["params"], None, *positional, **static, **keywords)

    # Haiku keeps the function it transformed on its apply (``_original_fn``): the name the user gave it
    name = getattr(getattr(transformed.apply, "_original_fn", None), "__qualname__", "apply")
    return ModelCase(named(fn, name), (variables, *with_keywords(inputs, arrays)))
