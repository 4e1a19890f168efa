"""Bit-exact array files (.npz and .safetensors), bfloat16 and float8 included.

Numpy only: the TensorFlow serving process reads and writes these without importing JAX.
``np.save`` stores ml_dtypes arrays as raw bytes (``|V2`` for bfloat16); we record each array's
dtype name next to it and view the bytes back, so nothing is ever converted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import ml_dtypes
import numpy as np

__all__ = ["ArrayFileError", "dtype_from_name", "load_arrays", "save_arrays"]

_DTYPES_KEY = "__jaxparity_dtypes__"


class ArrayFileError(ValueError):
    """An array file that cannot be read: names the file and what is wrong with it."""


def dtype_from_name(name: str) -> np.dtype:
    """``np.dtype`` for a name such as 'float32' or 'bfloat16' (the ml_dtypes ones too)."""
    try:
        return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)
    except TypeError as e:
        raise ArrayFileError(f"unknown dtype {name!r}") from e


def save_arrays(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write named arrays to ``path`` (.npz or .safetensors), preserving every bit and dtype."""
    path = Path(path)
    arrays = {k: np.require(v, requirements='C') for k, v in arrays.items()}  # keeps 0-d arrays 0-d
    if path.suffix == ".safetensors":
        from safetensors.numpy import save_file

        save_file(arrays, str(path))
        return
    payload = {k: v.reshape(-1).view(np.uint8) if v.dtype.kind == "V" else v for k, v in arrays.items()}
    dtypes = {k: [str(v.dtype), list(v.shape)] for k, v in arrays.items()}
    payload[_DTYPES_KEY] = np.frombuffer(json.dumps(dtypes).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **payload)  # type: ignore[arg-type]  # numpy's stub: a key might be allow_pickle


def load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read every array of an .npz or .safetensors file, in file order, bit-exactly.

    Arrays that numpy itself saved as raw bytes (``|V2``) come back as such; a caller that knows
    the expected dtype views them (see ``case.py``).
    """
    path = Path(path)
    if not path.exists():
        raise ArrayFileError(f"{path}: no such file")
    try:
        if path.suffix == ".safetensors":
            from safetensors.numpy import load_file

            return dict(load_file(str(path)))
        with np.load(path, allow_pickle=False) as z:
            raw = {k: z[k] for k in z.files}
    except ArrayFileError:
        raise
    except Exception as e:  # zipfile, safetensors and numpy raise many kinds for bad files
        raise ArrayFileError(f"{path}: not a readable .npz or .safetensors file ({e})") from e
    meta = raw.pop(_DTYPES_KEY, None)
    if meta is None:
        return raw
    dtypes = json.loads(meta.tobytes().decode())
    out = {}
    for k, v in raw.items():
        name, shape = dtypes.get(k, [str(v.dtype), list(v.shape)])
        dt = dtype_from_name(name)
        out[k] = v.view(dt).reshape(shape) if v.dtype != dt else v
    return out
