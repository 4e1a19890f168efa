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
from typing import Any

import numpy as np

from .arrayio import load_arrays

__all__ = ["META", "Bundle", "aligned_values", "is_bundle_entry", "read_bundle"]

META = "jaxparity_bundle"


@dataclass(frozen=True)
class Bundle:
    path: str  # the path spec it ran along
    device: str  # "tpu", "gpu", "cpu"
    versions: dict[str, str]
    primitives: tuple[str, ...]  # the flat program's ops, in order
    values: dict[int, np.ndarray]  # value id -> the op output's values
    outputs: list[np.ndarray]
    # Each op: (primitive, its outputs' types "float32[4,8]", its line, the value ids of its outputs' values);
    # empty in a bundle written before they were kept (then the ops are matched by primitive, in order).
    ops: tuple[tuple[str, tuple[str, ...], str | None, tuple[int | None, ...]], ...] = ()
    note: str | None = None  # how its values were aligned to the program here, where not simply (``aligned_values``)


def read_bundle(file: str | os.PathLike) -> Bundle | None:
    """The bundle in ``file``, or None where the file holds outputs only (a production log)."""
    arrays = load_arrays(file)
    if META not in arrays:
        return None
    meta = json.loads(bytes(np.asarray(arrays[META], np.uint8)).decode())
    values = {int(k[3:]): v for k, v in arrays.items() if k.startswith("op/")}
    outputs = [v for k, v in arrays.items() if k == "out" or k.startswith("out/")]
    ops = tuple((o[0], tuple(o[1]), o[2], tuple(o[3])) for o in meta.get("ops", ()))
    return Bundle(meta["path"], meta["device"], meta.get("versions", {}), tuple(meta["primitives"]), values, outputs,
                  ops)


def aligned_values(bundle: Bundle, program: Any, jax_version: str) -> tuple[dict[int, np.ndarray], str | None]:
    """The bundle's per-op values keyed by ``program``'s value ids (the program traced here, under this JAX),
    and a note where they are not simply the program's: its ops aligned to the bundle's by primitive, output
    types and line (another JAX traces a program into other ops: a broadcast more, a convert less), a value
    kept only where its type is the one this program gives it. ``ValueError`` where too few ops align: the
    bundle is of another program."""
    import difflib

    def key(primitive: str, outputs: tuple[str, ...], line: str | None) -> tuple:
        return primitive, outputs, os.path.basename(line or "")

    mine = [key(op.info.primitive, tuple(op.info.outputs), op.info.user_source or op.info.source) for op in program.ops]
    if not bundle.ops:  # an older bundle: the same ops in the same order, or nothing
        if tuple(k[0] for k in mine) != bundle.primitives:
            raise ValueError(f"captured from another program ({len(bundle.primitives)} ops; this one has "
                             f"{len(mine)}{'' if len(mine) != len(bundle.primitives) else ', in another order'})")
        theirs: list[tuple[str, tuple[str, ...], str | None, tuple[int | None, ...]]] = [
            (p, (), None, ()) for p in bundle.primitives]
        pairs = [(i, i) for i in range(len(mine))]
    else:
        theirs = list(bundle.ops)
        blocks = difflib.SequenceMatcher(None, mine, [key(*o[:3]) for o in theirs], autojunk=False).get_matching_blocks()
        pairs = [(b.a + k, b.b + k) for b in blocks for k in range(b.size)]
    if len(pairs) < 0.5 * max(len(mine), len(theirs)):
        raise ValueError(f"captured from another program: {len(pairs)} of its {len(theirs)} ops align with this "
                         f"one's {len(mine)} by primitive, types and line")
    values: dict[int, np.ndarray] = {}
    dropped = 0
    for i, j in pairs:
        op = program.ops[i]
        vids = theirs[j][3] if bundle.ops else op.outputs
        for vid, vid_there, aval in zip(op.outputs, vids, op.eqn.outvars):
            if vid is None or vid_there is None or vid_there not in bundle.values:
                continue
            got = bundle.values[vid_there]
            want = getattr(aval, "aval", None)
            if want is not None and (tuple(got.shape) != tuple(getattr(want, "shape", ())) or
                                     str(got.dtype) != str(getattr(want, "dtype", got.dtype))):
                dropped += 1
                continue
            values[vid] = got
    said = []
    there = bundle.versions.get("jax")
    if there and there != jax_version:
        said.append(f"captured under jax {there}, explained under jax {jax_version}")
    if len(pairs) < len(mine) or len(pairs) < len(theirs):
        said.append(f"{len(pairs)} of this program's {len(mine)} ops align with the bundle's {len(theirs)} by "
                    "primitive, types and line; the others are explained without values of their own")
    if dropped:
        said.append(f"{dropped} captured value{'s' if dropped > 1 else ''} of another type than this trace gives "
                    "left out")
    return values, "; ".join(said) or None


def is_bundle_entry(name: str) -> bool:
    """An entry of a bundle that is not one of the case's inputs (``--inputs BUNDLE`` skips these)."""
    return name == META or name == "out" or name.startswith(("out/", "op/"))
