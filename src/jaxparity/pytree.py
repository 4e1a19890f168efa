"""Stable, readable names for the leaves of a pytree: ``arg0/params/Conv_0/kernel``, ``out/1``."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

__all__ = ["argument_leaves", "host", "named_leaves", "to_numpy"]


def _key_name(key: Any) -> str:
    for attr in ("key", "idx", "name"):  # DictKey, SequenceKey, GetAttrKey/FlattenedIndexKey
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def named_leaves(tree: Any, root: str) -> list[tuple[str, Any]]:
    """Leaves in ``jax.tree_util`` order, each named by its key path under ``root``."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [("/".join([root, *map(_key_name, path)]), leaf) for path, leaf in flat]


def argument_leaves(args: tuple) -> list[tuple[str, Any]]:
    """Leaves of a function's positional arguments, named ``arg0/...``, ``arg1``..."""
    out: list[tuple[str, Any]] = []
    for i, a in enumerate(args):
        out.extend(named_leaves(a, f"arg{i}"))
    return out


def host(x: Any) -> np.ndarray:
    """One leaf on the host as numpy: bf16 stays ml_dtypes.bfloat16, a PRNG key becomes its key
    data, and a Python scalar gets the dtype JAX gives it (float32, not float64)."""
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(x))
    if isinstance(x, (np.ndarray, np.generic, jax.Array)):
        return np.asarray(x)
    return np.asarray(jax.numpy.asarray(x))


def to_numpy(tree: Any) -> Any:
    """Copy every leaf of ``tree`` to the host (see ``host``)."""
    return jax.tree_util.tree_map(host, tree)
