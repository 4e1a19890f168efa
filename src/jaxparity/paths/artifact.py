"""What a runtime really runs, read back from its own artifact: its kernels (a TFLite flatbuffer's
operators, fused ones included), its tensors with the constants as stored, and every tensor's value in
one run of that very artifact on the case's inputs.

A path that converts or compiles the program into something else (``tflite``) returns an ``Artifact``
from ``Path.artifact``; the explainer reads it to name a runtime's own mechanism ("the converter stores
-inf as -3.4028235e38", "reduce_window_sum and div run as one AVERAGE_POOL_2D") instead of reading the
runtime as if it were XLA. Values map to the JAX program by value, not by name: a tensor holding
exactly the bits, shape and dtype of an op's output on that path *is* that output, whatever the
converter called it (``holding``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

__all__ = ["Artifact", "Kernel", "MOVES", "Tensor", "kinds"]

# Kernels that move or reshape values without computing (TFLite's and ONNX's names): no rounding of theirs
# can change a result.
MOVES = frozenset({"TRANSPOSE", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "GATHER", "SLICE", "STRIDED_SLICE", "PACK",
                   "UNPACK", "CONCATENATION", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Flatten",
                   "Expand", "Slice", "Concat", "Gather", "Split"})


@dataclass(frozen=True)
class Tensor:
    index: int
    name: str  # the converter's name: "jit(fn)/exp", "arith.constant1", "StatefulPartitionedCall:0"
    shape: tuple[int, ...]
    dtype: str
    constant: bool  # stored in the artifact (a weight or a folded constant), not computed


@dataclass(frozen=True)
class Kernel:
    """One operator of the artifact: what the runtime runs as one kernel."""

    index: int
    kind: str  # the runtime's own op code: "AVERAGE_POOL_2D", "SELECT_V2"
    inputs: tuple[int, ...]  # tensor indices (negative: an optional input left out)
    outputs: tuple[int, ...]
    # What the runtime says about how it runs the kernel: IREE's dispatch, its operand and accumulator
    # types, its tiling ({"dispatch": "main_dispatch_0_matmul_32x64x64_bf16", "accumulator": "bf16",
    # "vector_reduction": "[0, 0, 16]"}).
    attributes: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass
class Artifact:
    runtime: str  # what the artifact is, for sentences: "the TFLite model"
    kernels: tuple[Kernel, ...]
    tensors: dict[int, Tensor]
    # Every tensor's value in one run of the artifact on the case's inputs (constants: as stored).
    values: dict[int, np.ndarray]
    outputs: tuple[int, ...]  # the tensor of each flat output of the case, in order
    notes: list[str] = field(default_factory=list)
    # What the converter converted whole, in program order: a flax module or a jax.nn function as one
    # call ("linen.dense", "jax.nn.gelu"), with its output tensors (jax2onnx's own record of its calls).
    converted: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @cached_property
    def _producers(self) -> dict[int, Kernel]:
        made: dict[int, Kernel] = {}
        for k in self.kernels:
            for t in k.outputs:
                made.setdefault(t, k)
        return made

    @cached_property
    def _computed_names(self) -> dict[tuple[int, ...], list[tuple[int, tuple[str, str], list[str]]]]:
        """Each computed tensor with a value, by shape: its index, its first and last fused name without
        "jit(fn)/", and those names without their numbers (what ``named`` looks up, indexed once)."""
        import re

        by_shape: dict[tuple[int, ...], list[tuple[int, tuple[str, str], list[str]]]] = {}
        for i, t in self.tensors.items():
            x = self.values.get(i)
            if t.constant or i not in self._producers or x is None:
                continue
            names = [n.rsplit(")/", 1)[-1] for n in t.name.split(";")]
            stems = [n.rsplit(")/", 1)[-1] for n in re.sub(r"\d+$", "", t.name).split(";")]
            by_shape.setdefault(tuple(x.shape), []).append((i, (names[0], names[-1]), stems))
        return by_shape

    def producer(self, tensor: int) -> Kernel | None:
        return self._producers.get(tensor)

    def consumers(self, tensor: int) -> list[Kernel]:
        return [k for k in self.kernels if tensor in k.inputs]

    def holding(self, value: np.ndarray, constant: bool | None = None) -> list[int]:
        """The tensors whose value is exactly ``value`` (bits, shape and dtype; a scalar also matches a
        one-element tensor), constants only or computed only where ``constant`` says so."""
        want = np.asarray(value)
        found = []
        for i, x in self.values.items():
            t = self.tensors[i]
            if constant is not None and t.constant != constant:
                continue
            if x.dtype != want.dtype or x.size != want.size or (x.shape != want.shape and want.size != 1):
                continue
            if x.tobytes() == want.tobytes():
                found.append(i)
        return found

    def named(self, program: Any, index: int) -> int | None:
        """The computed tensor the converter named after op ``index`` of ``program`` (a FlatProgram), of the
        op's shape. TFLite keeps JAX's location names, numbering repeats ("jit(fn)/div1": the second ``div``
        of that name stack) and joining the names of fused ops with ";" (numbered as a whole). A case output
        is the artifact's output tensor; else the exact name; else the one tensor of that shape that names the
        op among its fused ones; else None."""
        op = program.ops[index].info
        stem = "/".join(filter(None, [op.name_stack, op.primitive]))
        same = [o.info.index for o in program.ops
                if o.info.primitive == op.primitive and o.info.name_stack == op.name_stack]
        key = stem + (str(same.index(index)) if same.index(index) else "")
        shape = _shape(op.outputs[0]) if op.outputs else None
        first = next((v for v in program.ops[index].outputs if v is not None), None)
        if first in program.out_ids and len(self.outputs) == len(program.out_ids):  # a case output: its tensor
            t = self.outputs[list(program.out_ids).index(first)]
            if self.values.get(t) is not None and tuple(self.values[t].shape) == shape:
                return t
        exact, loose = [], []
        for i, ends, stems in self._computed_names.get(shape, []) if shape is not None else []:
            if key in ends:
                exact.append(i)
            elif stem in stems:
                loose.append(i)
        return exact[0] if exact else loose[0] if len(loose) == 1 else None

    def describe(self, tensor: int) -> str:
        """'arith.constant1 = -3.4028235e+38, an input of SELECT_V2': a tensor as a sentence names it."""
        t = self.tensors[tensor]
        x = self.values.get(tensor)
        shown = f" = {_show(x)}" if x is not None and x.size <= 4 else ""
        users = sorted({k.kind for k in self.consumers(tensor)})
        made = self.producer(tensor)
        role = (f", an input of {' and '.join(users)}" if t.constant and users else
                f", made by {made.kind}" if made is not None else "")
        return f"{t.name or f'tensor {t.index}'}{shown}{role}"


def _show(x: np.ndarray) -> str:
    flat = [float(v) if x.dtype.kind == "f" else v.item() for v in np.asarray(x).ravel()]
    text = ", ".join(repr(v) if not isinstance(v, float) else f"{v:.8g}" for v in flat)
    return text if len(flat) == 1 else f"[{text}]"


def kinds(kernels: Sequence[Kernel]) -> str:
    """'AVERAGE_POOL_2D' or 'SELECT_V2 and REDUCE_MAX': the kernels' op codes for a sentence."""
    names = list(dict.fromkeys(k.kind for k in kernels))
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + f" and {names[-1]}"


def _shape(aval: str) -> tuple[int, ...] | None:
    """(2, 14, 14, 32) from an OpInfo type, "float32[2,14,14,32]"."""
    inside = aval[aval.find("[") + 1:aval.rfind("]")] if "[" in aval else None
    return None if inside is None else tuple(int(x) for x in inside.split(",") if x.strip())
