"""JAX's own primitive test corpus (``test_harnesses.all_harnesses``), loaded and stratified.

Each harness is one primitive (sometimes a few) on one dtype and shape, with a deterministic
argument maker. The corpus is what JAX itself tests its primitives with, so running it through
every path exercises each interpreter rule on the inputs JAX considers representative.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SEED", "dtype_name", "harness_args", "load_corpus", "stratified", "stratum"]

SEED = 0  # every harness draws its arguments from np.random.RandomState(SEED)


def load_corpus(device: str = "cpu") -> list[Any]:
    """Every harness JAX declares runnable on ``device``, sorted by full name (stable order)."""
    from ..jaxcompat import test_harnesses

    return sorted((h for h in test_harnesses().all_harnesses if h.filter(device)), key=lambda h: h.fullname)


def dtype_name(h: Any) -> str:
    """The harness's dtype as a short name: ``float32``, ``bfloat16``, ``bool``."""
    return np.dtype(h.dtype).name


def stratum(h: Any) -> tuple[str, str]:
    """(group, dtype): the unit the suite reports by and samples from."""
    return h.group_name, dtype_name(h)


def harness_args(h: Any) -> list[Any]:
    """The harness's dynamic arguments, drawn from a fresh ``RandomState(SEED)``."""
    return list(h.dyn_args_maker(np.random.RandomState(SEED)))


def stratified(harnesses: Sequence[Any], *, thin: bool = False) -> list[Any]:
    """One harness per (group, dtype): the first by full name.

    With ``thin``, only as many as cover every group and every dtype at least once: per group,
    the first harness of each dtype not yet covered by an earlier group, else the group's first.
    """
    first: dict[tuple[str, str], Any] = {}
    for h in sorted(harnesses, key=lambda h: h.fullname):
        first.setdefault(stratum(h), h)
    if not thin:
        return sorted(first.values(), key=lambda h: h.fullname)
    chosen: list[Any] = []
    dtypes_seen: set[str] = set()
    groups = sorted({g for g, _ in first})
    for g in groups:
        mine = [h for (gg, _), h in sorted(first.items()) if gg == g]
        new = [h for h in mine if dtype_name(h) not in dtypes_seen]
        picks = new or mine[:1]
        chosen.extend(picks)
        dtypes_seen.update(dtype_name(h) for h in picks)
    return sorted(chosen, key=lambda h: h.fullname)
