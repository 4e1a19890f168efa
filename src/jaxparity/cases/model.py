"""What every model helper returns: a case's ``(fn, args)``, the weights one argument named by module path.

A helper binds in what is not an array (the module's structure, its activation functions, flags) and
passes the weights as a nested dict keyed by module path, so a leaf is named where it lives
(``arg0/params/Conv_0/kernel``, ``arg0/conv_bn/moving_variance``) and the reports can group by module.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

__all__ = ["ModelCase", "inference_flags", "nest", "split_keywords", "unnest", "with_keywords", "without_keywords"]


class ModelCase(NamedTuple):
    """``(fn, args)``: what a case file's factory returns, and what ``jaxparity.compare(fn, *args)`` takes."""

    fn: Callable[..., Any]
    args: tuple


def named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` under the model's name, the one a report shows for the case."""
    fn.__name__ = fn.__qualname__ = name
    return fn


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def split_keywords(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword arguments as (arrays, the rest): arrays are inputs (a mask, token ids), the rest is bound in."""
    arrays = {k: v for k, v in kwargs.items() if _is_array(v)}
    return arrays, {k: v for k, v in kwargs.items() if k not in arrays}


def with_keywords(inputs: tuple, arrays: Mapping[str, Any]) -> tuple:
    """The inputs, then the array keyword arguments as one last input (a dict, each named by its keyword)."""
    return (*inputs, dict(arrays)) if arrays else tuple(inputs)


def without_keywords(inputs: tuple, arrays: Mapping[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """``with_keywords``'s inverse inside the function: (positional inputs, keyword inputs)."""
    return (tuple(inputs[:-1]), dict(inputs[-1])) if arrays else (tuple(inputs), {})


def nest(flat: Mapping[str, Any], sep: str = "/") -> dict[str, Any]:
    """``{"block/conv/kernel": x}`` -> ``{"block": {"conv": {"kernel": x}}}``. A path that is also the
    prefix of another (a variable named like a layer) keeps its remaining part as one key there."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        parts = path.split(sep)
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):  # ``part`` holds a variable already: the rest is one key
                parts = [*parts[:i], sep.join(parts[i:])]
                break
            node = child
        key = parts[-1]
        if isinstance(node.get(key), dict):
            raise ValueError(f"{path!r} names a variable and a module holding others")
        if key in node:
            raise ValueError(f"two variables at one path {path!r}")
        node[key] = value
    return out


def unnest(tree: Mapping[str, Any], sep: str = "/", prefix: str = "") -> dict[str, Any]:
    """``nest``'s inverse: ``{path: value}``."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{sep}{key}" if prefix else key
        if isinstance(value, Mapping):
            out.update(unnest(value, sep, path))
        else:
            out[path] = value
    return out


# Inference mode, as each convention spells it in a signature: the value that turns training off.
INFERENCE = {"train": False, "training": False, "is_training": False, "deterministic": True}


def inference_flags(method: Callable[..., Any], args: tuple, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The inference flags ``method``'s signature has and the caller left unsaid (``train=False``,
    ``deterministic=True``): models run as served, with no dropout and batch statistics frozen."""
    try:
        signature = inspect.signature(method)
        given = signature.bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return {}
    return {name: value for name, value in INFERENCE.items()
            if name in signature.parameters and name not in given
            and signature.parameters[name].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                   inspect.Parameter.KEYWORD_ONLY)}
