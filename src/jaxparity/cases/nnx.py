"""A Flax NNX module as a case: its state (``nnx.split``) the weights input, its graph bound in."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .model import ModelCase, named, split_keywords, with_keywords, without_keywords

__all__ = ["from_nnx", "module_scopes"]


def from_nnx(module: Any, *inputs: Any, **kwargs: Any) -> ModelCase:
    """``module(*inputs, **kwargs)`` as ``(fn, (state, *inputs))``, on a copy of the module in eval mode
    (``module.eval()``: no dropout, BatchNorm's running statistics); ``module`` itself is left as it is.

    The state is a nested dict of its arrays by attribute path (``arg0/conv/kernel``, ``arg0/bn/mean``); the
    graph and the random-number state (``nnx.Rngs``, unused in eval mode) are bound in. Keyword arguments
    that are arrays are a last input, a dict named by keyword; the others are bound in. Each submodule
    computes under its attribute path (``module_scopes``), so the report names the layer of each op.
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
        with module_scopes(model):
            return model(*positional, **static, **keywords)

    return ModelCase(named(fn, type(module).__name__), (nnx.to_pure_dict(template), *with_keywords(inputs, arrays)))


_PATCHING = threading.RLock()  # classes are patched for one call at a time


@contextmanager
def module_scopes(model: Any) -> Iterator[None]:
    """While it is active, each submodule of ``model`` called computes under ``jax.named_scope`` of its
    attribute path (``blocks/0/attn``), relative to the module that calls it, as linen names its modules:
    the ops of the program then carry the layer that computes them. The classes' ``__call__`` are wrapped
    for the call and set back after; a module of another model calls as it did."""
    import jax
    from flax import nnx

    paths: dict[int, tuple[str, ...]] = {}
    classes: list[type] = []
    for path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Module):
            if path and id(node) not in paths:
                paths[id(node)] = tuple(str(p) for p in path)
            # (a class whose instances are called: ``cls.__call__`` of one that is not would be its metaclass's)
            if type(node) not in classes and any("__call__" in vars(k) for k in type(node).__mro__):
                classes.append(type(node))
    active: list[tuple[str, ...]] = [()]

    def scoped(call: Any) -> Any:
        @functools.wraps(call)
        def scoped_call(self: Any, *args: Any, **kwargs: Any) -> Any:
            path = paths.get(id(self))
            parent = active[-1]
            if path is None or path == parent:  # another model's module, or a super().__call__
                return call(self, *args, **kwargs)
            relative = path[len(parent):] if path[:len(parent)] == parent else path
            active.append(path)
            try:
                with jax.named_scope("/".join(relative)):
                    return call(self, *args, **kwargs)
            finally:
                active.pop()

        return scoped_call

    with _PATCHING:
        originals = {cls: (cls.__dict__.get("__call__"), cls.__call__) for cls in classes}  # all read first
        try:
            for cls, (_, resolved) in originals.items():
                cls.__call__ = scoped(resolved)  # type: ignore[method-assign]
            yield
        finally:
            for cls, (own, _) in originals.items():
                if own is None:
                    del cls.__call__
                else:
                    cls.__call__ = own  # type: ignore[method-assign]
