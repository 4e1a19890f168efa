"""A run captured where it ran, explained elsewhere: ``jaxparity capture`` on the machine that holds the device
(a TPU VM) writes one file with the case's inputs, the path's outputs, every op's values along it, and where
and with what it ran; ``explain CASE --paths observed:FILE --inputs FILE`` on a machine without that device
reads it as the path, localizes it op by op against the host's baseline, and decides the device's arithmetic
on the op's captured values (``explain.mechanism.device``).

This module is the file's format (read here; written by ``execution.capture``). One .npz (or .safetensors) file: the inputs under their leaf names (``arg0/...``: what ``--inputs`` reads),
the outputs as ``out...`` (what ``observed:`` reads), each op's values as ``op/VID``, and ``jaxparity_bundle``:
JSON of the path, its device, the versions and the program's primitives in order (the values are checked
against the program on the host before they are used: another model is an error, never a silent misread).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from .arrayio import load_arrays

__all__ = ["META", "Bundle", "is_bundle_entry", "read_bundle"]

META = "jaxparity_bundle"


@dataclass(frozen=True)
class Bundle:
    path: str  # the path spec it ran along
    device: str  # "tpu", "gpu", "cpu"
    versions: dict[str, str]
    primitives: tuple[str, ...]  # the flat program's ops, in order
    values: dict[int, np.ndarray]  # value id -> the op output's values
    outputs: list[np.ndarray]


def read_bundle(file: str | os.PathLike) -> Bundle | None:
    """The bundle in ``file``, or None where the file holds outputs only (a production log)."""
    arrays = load_arrays(file)
    if META not in arrays:
        return None
    meta = json.loads(bytes(np.asarray(arrays[META], np.uint8)).decode())
    values = {int(k[3:]): v for k, v in arrays.items() if k.startswith("op/")}
    outputs = [v for k, v in arrays.items() if k == "out" or k.startswith("out/")]
    return Bundle(meta["path"], meta["device"], meta.get("versions", {}), tuple(meta["primitives"]), values, outputs)


def is_bundle_entry(name: str) -> bool:
    """An entry of a bundle that is not one of the case's inputs (``--inputs BUNDLE`` skips these)."""
    return name == META or name == "out" or name.startswith(("out/", "op/"))
