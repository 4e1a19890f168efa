"""Stage 4, evidence: what is read about the path before any cause is decided. The compiler's own
evidence where XLA compiles the program (the optimized HLO and its passes, ``hlo``), the runtime's own words
on how it compiles it (``Path.evidence``), and which candidate semantics reproduce its outputs
(``fingerprint``). The runtime's artifact and the ops' captured values are read by the causes that need them
(``mechanism``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...paths import Path, xla_twin

__all__ = ["Evidence", "gather_evidence"]


@dataclass(frozen=True)
class Evidence:
    hlo: Any  # hlo.CompilerEvidence | None: where XLA compiles the program
    fingerprint: Any  # fingerprint.Fingerprint | None


def gather_evidence(fn: Callable[..., Any], args: tuple, path: Path, path_out: Sequence[np.ndarray],
                    notes: list[str], compiler: bool = True) -> Evidence:
    """The evidence of ``path`` (``compiler``: read the compiler's and the runtime's own too)."""
    hlo = compiler_evidence(fn, args, path, notes) if compiler and path.has("takes_xla_options") else None
    if compiler and path.has("other_compiler"):
        runtime_evidence(fn, args, path, notes)
    return Evidence(hlo, fingerprint_of(fn, args, path_out, notes))


def compiler_evidence(fn: Callable[..., Any], args: tuple, path: Path, notes: list[str]) -> Any:
    """XLA's optimized HLO of the program as ``path`` compiles it, read by JAX's own jit with the same
    settings (``paths.xla_twin``); None, with a note, where it cannot be read."""
    from ...paths.staging import reused, signature
    from ...paths.xla import recent_optimized_hlo
    from . import hlo

    if path.has("another_xla_build"):
        notes.append(f"compiler evidence for {path.name} comes from JAX's XLA on the same program; TensorFlow "
                     "runs its own XLA build")
    jit = xla_twin(path)
    compile_options = jit.compiler_options()
    # The optimized HLO of jit with the same options, when the comparison has just compiled it
    # (export and TensorFlow run the same program; evidence is read in jit's naming).
    recent = recent_optimized_hlo(jit.spec, fn, args)
    try:  # the HLO does not depend on the inputs' values: read once per program while compile_once() is active
        return reused("compiler evidence", (id(fn), signature(args), path.spec, jit.spec), fn,
                      lambda: hlo.compiler_evidence(fn, args, compiler_options=compile_options, path=path.spec,
                                                    optimized_text=recent))
    except Exception as e:  # evidence is optional: the experiments still decide
        notes.append(f"no compiler evidence: {type(e).__name__}: {e}")
        return None


def runtime_evidence(fn: Callable[..., Any], args: tuple, path: Path, notes: list[str]) -> None:
    """The runtime's own words on how it compiles this program (``Path.evidence``: IREE's bf16 arithmetic
    computed in float32), as notes; nothing where it says nothing."""
    try:
        lines = path.evidence(fn, args)
    except Exception as e:
        notes.append(f"no {path.name} evidence: {type(e).__name__}: {e}")
        return
    notes.extend(f"{path.evidence_label}: {line}" for line in lines)


def fingerprint_of(fn: Callable[..., Any], args: tuple, outs: Sequence[np.ndarray], notes: list[str]) -> Any:
    """Which candidate semantics reproduce the path's outputs (``fingerprint``); None, with a note, where
    they cannot be run."""
    from .fingerprint import fingerprint

    try:
        return fingerprint(fn, args, list(outs))
    except Exception as e:
        notes.append(f"no fingerprint: {type(e).__name__}: {e}")
        return None
