"""What an experiment concludes about one cause, and a fix shown to work (or not): plain values
shared by the explanation's stages and every rule of its mechanism."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["TOWARD", "CauseVerdict", "Fix", "Rerun", "Status"]

Status = Literal["confirmed", "partly", "refuted", "noise", "not run"]


@dataclass(frozen=True)
class CauseVerdict:
    cause: str
    title: str
    status: Status
    experiment: str  # what was run or checked
    evidence: str  # what was seen
    fix: str | None = None
    proof: Fix | None = None  # the whole-program re-run that shows the fix working (or not)
    rerun: Rerun | None = None  # where the experiment was a whole-program re-run: what it did
    # The layer at fault where two executions tell it ("compiler", "converter", "kernel", "device"): two
    # runtimes of one converted model that agree put it in the conversion, that disagree in a kernel.
    layer: str | None = None
    # The inputs it happens on, where its experiment measured them over the op's domain (a kernel's accuracy
    # profile: "x ≤ -2.1"): the verdict's trigger then says them, not only the elements of this run.
    trigger: str | None = None


@dataclass(frozen=True)
class Rerun:
    """What a fix's re-run did to the outputs' difference from the baseline: (elements that differ, max
    ULP, max abs) before and after, and the one judgement every sentence about it reads: "parity";
    "narrows" (no more elements, no larger a distance in ULP or in absolute terms, and less in one);
    "no closer"; "no change" (the re-run gave the path's own values). ``across_zero``: the max ULP before
    or after is a distance between values on either side of zero (``measure.crosses_zero``), left out of
    the judgement."""

    before: tuple[int, int, float]
    after: tuple[int, int, float]
    outcome: Literal["parity", "narrows", "no closer", "no change"]
    # Max abs error against the f64 ideal: (path before, path after, baseline before, baseline after); a fix
    # that leaves the paths apart may still make the path as accurate as the baseline (other roundings
    # remain). None where the ideal could not be computed.
    ideal: tuple[float, float, float, float] | None = None
    across_zero: bool = False

    @property
    def shrinks(self) -> bool:
        """The largest difference (in ULP or in absolute terms) is smaller after: a re-run that only changes how
        many elements differ, the largest as large, explains no part of the difference's size."""
        return self.after[1] < self.before[1] or self.after[2] < self.before[2]


@dataclass(frozen=True)
class Fix:
    # "runtime option": an option of a runtime other than XLA (an attribute set on the converted ONNX model's
    # nodes, an iree-compile flag)
    kind: Literal["compile option", "serving flag", "model change", "runtime option"]
    description: str
    spec: str | None  # the path that shows the fix working, e.g. "jit:xla_allow_excess_precision=false"
    verified: bool
    evidence: str
    # Run time with the fix against without, warm, on the path that runs it (+0.43: 43% slower); None
    # where it was not measured (a serving process or a conversion per run); 0.0: within the timing's own
    # spread (execution.timing), no measurable cost.
    cost: float | None = None
    rerun: Rerun | None = None  # the re-run's numbers, where one ran
    # A change the fix search found, as ``--write-fixed`` applies it again (``fixes.searched``): {"ops": [op
    # indices of the flat program], "candidate": its name, "trigger": the trigger's words or None}.
    recipe: dict | None = None
    # The change was run: measured (``rerun``), failed, or ruled out by what it did to the baseline's outputs;
    # False where it was ruled out before any run (on the op's own values, by an earlier re-run, by the budget).
    ran: bool = False
    # Other paths of the comparison where the change was re-run too and holds there (``every_path``): with
    # ``spec``'s own path, where it was shown to work.
    holds_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.rerun is not None:
            object.__setattr__(self, "ran", True)


# A verified fix's words where neither side was near the f64 ideal before it and both are with it (the verdict's
# remedy then says "toward the f64 ideal", not parity).
TOWARD = "toward the f64 ideal on both sides"
