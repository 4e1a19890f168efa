"""Many inputs: input sets drawn from the example inputs, or read from a directory of files.

An input set is a dict {input leaf name: numpy array}, named like ``--inputs`` files (``arg1``,
``arg0/params/...``); leaves it does not name keep the case's own values. A drawn set holds the
float leaves of the case's data (``Case.data_leaves``: the model stays the trained one, see
``roles``), each standard normal scaled and shifted to the example's own mean and std (same shape and
dtype), with the example's sign where it has one sign (a scale, a variance, an image in [0, 1]), and
the integer leaves of the data that hold more than one value, uniform within the example's own
range (token ids, lengths). It leaves out, so they stay as the case has them: the model's variables,
masks (booleans, or integers of 0 and 1), position ids (integers counting up by 0 or 1 along the last
axis), PRNG keys and integers with a single value (a step, a count).
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Collection
from typing import Any

import jax
import numpy as np
from jax.extend.core import Literal

from ..arrayio import ArrayFileError, load_arrays
from ..rounding import is_float_dtype

__all__ = ["InputSlots", "args_with", "draw_sample", "draw_samples", "drawn_names", "read_samples"]


def draw_samples(example: dict[str, np.ndarray], n: int, seed: int,
                 data: Collection[str] | None = None) -> list[dict[str, np.ndarray]]:
    """``n`` input sets like ``example`` (same shapes and dtypes), reproducible from ``seed``, varying
    the leaves of ``data`` (``Case.data_leaves``; None: every leaf outside a linen collection).

    Sample ``i`` depends only on (seed, i), so one sample can be drawn again on its own.
    """
    return [draw_sample(example, seed, i, data) for i in range(n)]


def drawn_names(example: dict[str, np.ndarray], data: Collection[str] | None = None) -> list[str]:
    """The leaves a drawn sample varies: among ``data``, the float leaves, and the integer ones whose example
    holds more than one value (token ids, lengths: drawn within the example's own range)."""
    if data is None:
        from ..roles import LINEN_COLLECTIONS

        variables = {name.split("/", 1)[0] for name in example if LINEN_COLLECTIONS.intersection(name.split("/")[1:2])}
        data = [name for name in example if name.split("/", 1)[0] not in variables]
    return [name for name, x in example.items() if name in data and np.size(x) and _drawable(np.asarray(x))]


def key_inputs(fn: Any, args: tuple) -> set[str]:
    """Names of the input leaves that are PRNG keys: typed keys, and raw (legacy ``uint32[2]``) keys, known by
    feeding a PRNG primitive of the program. Drawn as data they would be other keys, not other inputs."""
    from ..localize.program import RANDOM_PRIMITIVES, flatten
    from ..pytree import argument_leaves

    leaves = argument_leaves(args)
    keys = {name for name, x in leaves if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)}
    try:
        program = flatten(fn, args)
    except Exception:  # noqa: BLE001 - a program that does not trace here: its typed keys only
        return keys
    names = dict(zip(program.arg_ids, (name for name, _ in leaves)))
    for op in program.ops:
        if op.eqn.primitive.name in RANDOM_PRIMITIVES:
            keys.update(names[r] for r in op.inputs if not isinstance(r, Literal) and r in names)
    return keys


def _drawable(x: np.ndarray) -> bool:
    if is_float_dtype(x.dtype):
        return True
    return x.dtype.kind in "iu" and x.min() < x.max() and not _structural(x)


def _structural(x: np.ndarray) -> bool:
    """An integer leaf that says where the data is, not what it is: a mask of 0 and 1 (an int32 attention
    mask), or positions counting up by 0 or 1 along the last axis (position ids, padded ones included).
    Drawn within their range they would be invalid inputs (position 3 after position 0)."""
    if np.isin(x, (0, 1)).all():
        return True
    steps = np.diff(x.astype(np.int64), axis=-1) if x.ndim and x.shape[-1] > 2 else None
    return steps is not None and bool(np.isin(steps, (0, 1)).all())


def draw_sample(example: dict[str, np.ndarray], seed: int, index: int,
                data: Collection[str] | None = None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, index])
    out = {}
    for name in drawn_names(example, data):
        x = np.asarray(example[name])
        if x.dtype.kind in "iu":  # ids, lengths, positions: uniform within the example's own range
            out[name] = rng.integers(int(x.min()), int(x.max()), size=x.shape, endpoint=True).astype(x.dtype)
            continue
        ref = x.astype(np.float64)
        finite = ref[np.isfinite(ref)]
        mean = float(finite.mean()) if finite.size else 0.0
        std = float(finite.std()) if finite.size else 1.0
        std = std if std > 0 else (abs(mean) or 1.0)
        drawn = rng.standard_normal(x.shape) * std + mean
        if finite.size and finite.min() >= 0 and finite.max() > 0:  # one sign: a scale, a variance, pixels
            drawn = np.abs(drawn)
        elif finite.size and finite.max() <= 0 and finite.min() < 0:
            drawn = -np.abs(drawn)
        out[name] = drawn.astype(x.dtype)
    return out


def read_samples(directory: str | os.PathLike) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Every .npz / .safetensors file of ``directory``, sorted by name: (file name, arrays)."""
    files = sorted(p for p in Path(directory).iterdir() if p.suffix in (".npz", ".safetensors") and p.is_file())
    if not files:
        raise ArrayFileError(f"{directory}: no .npz or .safetensors files")
    return [(p.name, load_arrays(p)) for p in files]


def args_with(args: tuple, arrays: dict[str, np.ndarray], where: str = "input set") -> tuple:
    """``args`` with leaves replaced by ``arrays`` (by leaf name or ``arr_N``), as ``--inputs`` does."""
    return InputSlots(args).fill(arrays, where)


class InputSlots:
    """The leaves of ``args`` that input sets replace, worked out once (names, tree structure, the
    shape and dtype each expects), so that ``fill`` only checks a set's arrays and puts them in place."""

    def __init__(self, args: tuple) -> None:
        import jax

        from ..pytree import argument_leaves

        leaves = argument_leaves(args)
        self.names = [n for n, _ in leaves]
        self._known = frozenset(self.names)
        self._leaves = [x for _, x in leaves]
        self._treedef = jax.tree_util.tree_structure(args)
        # name -> (position, dtype, shape) of each leaf a set may replace; PRNG keys stay as they are
        self._slots: dict[str, tuple[int, np.dtype, tuple]] = {}
        for i, (name, x) in enumerate(leaves):
            if not (isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)):
                ref = np.asarray(x)
                self._slots[name] = (i, ref.dtype, ref.shape)

    def fill(self, arrays: dict[str, np.ndarray], where: str = "input set") -> tuple:
        """The arguments with ``arrays`` in place (one transfer to the device for all of them)."""
        import jax

        names = self.names
        if arrays and all(k.startswith("arr_") for k in arrays) and not self._known.intersection(arrays):
            arrays = {names[int(k[4:])]: v for k, v in arrays.items() if int(k[4:]) < len(names)}
        unknown = sorted(arrays.keys() - self._known)
        if unknown:
            raise ValueError(f"{where}: arrays {unknown} match no input; inputs are {names}")
        positions, new = [], []
        for name, (i, dtype, shape) in self._slots.items():
            if name not in arrays:
                continue
            a = np.asarray(arrays[name])
            if a.dtype.kind == "V" and a.dtype.itemsize == dtype.itemsize:
                a = a.view(dtype)
            if a.shape != shape or a.dtype != dtype:
                raise ValueError(f"{where}: {name} is {a.dtype}{list(a.shape)}, the case expects "
                                 f"{dtype}{list(shape)}")
            positions.append(i)
            new.append(a)
        leaves: list[Any] = list(self._leaves)
        for i, x in zip(positions, jax.device_put(new)):
            leaves[i] = x
        return tuple(jax.tree_util.tree_unflatten(self._treedef, leaves))
