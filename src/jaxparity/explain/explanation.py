"""What the explanation of one path says: the result every stage contributes to and every reporter renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..localize.localizer import Localization
from .verdicts import CauseVerdict, Fix

__all__ = ["PathExplanation"]


@dataclass(frozen=True)
class PathExplanation:
    path: str
    baseline: str
    summary: str
    localization: Localization | None
    evidence: Any  # explain.evidence.compiler.CompilerEvidence | None
    fingerprint: Any  # explain.evidence.fingerprint.Fingerprint | None
    causes: tuple[CauseVerdict, ...]
    fixes: tuple[Fix, ...]
    notes: tuple[str, ...] = ()
    # When the closest fix restores parity only partly: that fix applied, and what remains explained
    # the same way (a chain: cause 1 -> remainder -> cause 2 ...).
    remainder: PathExplanation | None = None
    # Another explained path whose outputs are bit for bit this path's: they share the mechanism.
    same_values: str | None = None
    # The changes the fix search (``explain.search``) tried at the carrying op that did not restore parity,
    # each with why: what "no fix verified" was tried against.
    searched: tuple[Fix, ...] = ()
    # Where the path is no farther from the baseline than correct implementations of the program's ops
    # may be (``explain.noise``): rounding noise, which the default gate passes.
    rounding: Any = None  # explain.noise.Rounding | None
    # Where the per-op view is not the path's program (returning every intermediate changes its outputs) and the
    # runtime's own units were captured: each dispatch on its own inputs (``mechanism.artifact.dispatches``).
    dispatches: tuple[Any, ...] = ()  # DispatchFinding

    @property
    def applied(self) -> str | None:
        """The partial fix the remainder is explained with: the remainder's path, or its baseline where the
        fix changed the baseline's side (the accelerator's matmul precision)."""
        r = self.remainder
        if r is None:
            return None
        return r.baseline if r.baseline != self.baseline else r.path

    @property
    def confirmed(self) -> tuple[CauseVerdict, ...]:
        return tuple(c for c in self.causes if c.status in ("confirmed", "partly", "noise"))
