"""A Hugging Face Flax model (``FlaxPreTrainedModel``, transformers 4.x) as a case: its params the weights input."""

from __future__ import annotations

from typing import Any

from .model import ModelCase, named, split_keywords

__all__ = ["from_hf"]


def from_hf(model: Any, params: Any = None, **inputs: Any) -> ModelCase:
    """``model(**inputs, params=params, train=False)`` as ``(fn, (params, inputs))``: no dropout.

    ``params`` (default ``model.params``) is one input, named by module path
    (``arg0/encoder/layer/0/attention/self/query/kernel``); the array inputs are another, a dict named by
    keyword (``arg1/input_ids``, ``arg1/attention_mask``); the others (``output_hidden_states=True``) are
    bound in. The output is the model's output dataclass, each field an output (``out/last_hidden_state``).
    """
    arrays, static = split_keywords(inputs)
    if not arrays:
        raise ValueError("from_hf(model, input_ids=...): give the model's inputs by keyword, at least one array")
    static.setdefault("train", False)

    def fn(params: Any, inputs: Any) -> Any:
        return model(**inputs, **static, params=params)

    return ModelCase(named(fn, type(model).__name__), (model.params if params is None else params, arrays))
