"""What a hunt found: plain, frozen values (the terminal, JSON and HTML renderings read only these)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Finding", "HuntResult", "HuntSite"]


@dataclass(frozen=True)
class HuntSite:
    """One hazard site and how the search covered it."""

    op: int
    primitive: str
    hazard: str
    what: str
    where: str
    module: str
    reached: int  # evaluated inputs that brought it to its hazard
    first: int | None  # the first such evaluation
    diverged: int  # of those, the ones on which the paths part beyond rounding (a jump, NaN, a failure)
    loop: int | None = None  # the scan whose body holds the op (``op`` counts within its body)

    def describe(self) -> str:
        inside = f"scan #{self.loop}: " if self.loop is not None else ""
        return f"{inside}#{self.op} {self.primitive} ({self.where})"


@dataclass(frozen=True)
class Finding:
    """The worst input found of one kind of divergence (an output and a kind: ``score.KINDS``)."""

    kind: str
    output: str
    max_ulp: int
    max_abs: float
    max_rel: float
    scaled: float  # max abs against the output's scale (its largest finite magnitude)
    n_differ: int
    size: int
    breaks: bool  # outside the tolerance
    evaluation: int  # the evaluation that found it
    origin: str  # how the search made it
    index: tuple[int, ...] | None = None
    baseline_value: float | int | None = None
    path_value: float | int | None = None
    message: str = ""  # where one path failed: its error
    reached: tuple[str, ...] = ()  # the hazard sites this input is at ("tie of #12 argmax (x.py:3)")
    inputs_file: str | None = None  # the input, as an --inputs file
    explanation: str | None = None  # `jaxparity explain --inputs` on it, the short form
    lead: str | None = None  # the explanation's "where": the divergence that carries it, or why none is named
    cause: str | None = None
    fix: str | None = None  # the fix its re-run verified ("savedmodel:XLA_FLAGS=...: parity restored")
    island: int = 0  # the island whose search found it (its ``evaluation`` counts within that island)

    def describe(self) -> str:
        if self.kind == "fails on one side":
            return self.message
        where = f"{self.output}{list(self.index) if self.index is not None else ''}"
        values = f": {self.path_value!r} vs {self.baseline_value!r}" if self.baseline_value is not None else ""
        if self.kind == "NaN or inf on one side":
            return f"NaN or inf on one side at {where}{values}"
        size = (f"off by {self.max_abs:g}" if self.integer else
                f"{self.max_ulp:,} ULP, max abs {self.max_abs:.3g} ({self.scaled:.2g} of the output's scale)")
        return f"{size} at {where}{values}; {self.n_differ} of {self.size} elements differ"

    @property
    def integer(self) -> bool:
        return isinstance(self.baseline_value, int) and not isinstance(self.baseline_value, bool)


@dataclass(frozen=True)
class HuntResult:
    case: str
    baseline: str
    path: str
    domain: tuple[str, ...]  # one line per varied leaf, then what is kept
    domain_source: str
    seed: int
    budget: int
    evaluations: int
    seconds: float
    tolerance: str
    findings: tuple[Finding, ...]  # worst kind first
    # (evaluations, the worst difference so far against its output's scale (inf: NaN or a failure), kind, seconds)
    progress: tuple[tuple[int, float, str, float], ...]
    sites: tuple[HuntSite, ...]
    considered: dict[str, int] = field(default_factory=dict)  # hazard kind -> ops of that kind on the data
    operators: dict[str, int] = field(default_factory=dict)  # candidates each operator made
    first_found: int | None = None  # the first evaluation whose input broke the tolerance
    first_kind: dict[str, int] = field(default_factory=dict)  # kind -> the first evaluation that showed it
    failed_both: int = 0
    time_limit: float | None = None
    islands: int = 1
    notes: tuple[str, ...] = ()
    case_spec: str = ""  # the CASE as given (FILE.py[:FACTORY]): what an explain command names
    first_island: int | None = None  # the island whose evaluation ``first_found`` counts in (islands > 1)

    @property
    def passed(self) -> bool:
        """No input in the domain breaks the tolerance (what a CI gate reads)."""
        return not any(f.breaks for f in self.findings)

    @property
    def worst(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    def summary(self) -> str:
        """One line a CI gate can print: what was searched, and the worst it found."""
        searched = f"{self.evaluations:,} evaluations in this domain (seed {self.seed})"
        w = self.worst
        if w is None:
            return f"{searched}: {self.path} and {self.baseline} agree bit for bit on every one"
        if not w.breaks:
            return f"{searched}, worst {w.describe()}: within the tolerance ({self.tolerance})"
        island = f" of island {self.first_island + 1}" if self.first_island is not None and self.islands > 1 else ""
        found = f" (first at evaluation {self.first_found}{island})" if self.first_found else ""
        saved = f", saved as {w.inputs_file}" if w.inputs_file else ""
        return f"{searched}: an input breaks the tolerance ({self.tolerance}){found}: {w.describe()}{saved}"

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(dataclasses.asdict(self)) | {"passed": self.passed, "summary": self.summary()}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
