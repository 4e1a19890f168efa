"""Many inputs: input sets drawn from the example inputs, or read from a directory of files.

An input set is a dict {input leaf name: numpy array}, named like ``--inputs`` files (``arg1``,
``arg0/params/...``). Drawn sets keep every shape and dtype: float inputs are standard normal
scaled and shifted to the example's own mean and std; integer, boolean and PRNG-key inputs
(parameters, indices, keys) are copied unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .arrayio import ArrayFileError, load_arrays
from .rounding import is_float_dtype

__all__ = ["args_with", "draw_samples", "read_samples"]


def draw_samples(example: dict[str, np.ndarray], n: int, seed: int) -> list[dict[str, np.ndarray]]:
    """``n`` input sets like ``example`` (same shapes and dtypes), reproducible from ``seed``.

    Sample ``i`` depends only on (seed, i), so one sample can be drawn again on its own.
    """
    return [draw_sample(example, seed, i) for i in range(n)]


def draw_sample(example: dict[str, np.ndarray], seed: int, index: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, index])
    out = {}
    for name, x in example.items():
        x = np.asarray(x)
        if is_float_dtype(x.dtype) and x.size:
            ref = x.astype(np.float64)
            finite = ref[np.isfinite(ref)]
            mean = float(finite.mean()) if finite.size else 0.0
            std = float(finite.std()) if finite.size else 1.0
            std = std if std > 0 else (abs(mean) or 1.0)
            out[name] = (rng.standard_normal(x.shape) * std + mean).astype(x.dtype)
        else:
            out[name] = x.copy()
    return out


def read_samples(directory: str | os.PathLike) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Every .npz / .safetensors file of ``directory``, sorted by name: (file name, arrays)."""
    files = sorted(p for p in Path(directory).iterdir() if p.suffix in (".npz", ".safetensors") and p.is_file())
    if not files:
        raise ArrayFileError(f"{directory}: no .npz or .safetensors files")
    return [(p.name, load_arrays(p)) for p in files]


def args_with(args: tuple, arrays: dict[str, np.ndarray], where: str = "input set") -> tuple:
    """``args`` with leaves replaced by ``arrays`` (by leaf name or ``arr_N``), as ``--inputs`` does."""
    import jax

    from .pytree import argument_leaves

    leaves = argument_leaves(args)
    names = [n for n, _ in leaves]
    if arrays and all(k.startswith("arr_") for k in arrays) and not set(arrays) & set(names):
        arrays = {names[int(k[4:])]: v for k, v in arrays.items() if int(k[4:]) < len(names)}
    unknown = sorted(set(arrays) - set(names))
    if unknown:
        raise ValueError(f"{where}: arrays {unknown} match no input; inputs are {names}")
    new: list[Any] = []
    for name, old in leaves:
        if name not in arrays or (isinstance(old, jax.Array)
                                  and jax.dtypes.issubdtype(old.dtype, jax.dtypes.prng_key)):
            new.append(old)
            continue
        a, old_np = np.asarray(arrays[name]), np.asarray(old)
        if a.dtype.kind == "V" and a.dtype.itemsize == old_np.dtype.itemsize:
            a = a.view(old_np.dtype)
        if a.shape != old_np.shape or a.dtype != old_np.dtype:
            raise ValueError(f"{where}: {name} is {a.dtype}{list(a.shape)}, the case expects "
                             f"{old_np.dtype}{list(old_np.shape)}")
        new.append(jax.numpy.asarray(a))
    return tuple(jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(args), new))
