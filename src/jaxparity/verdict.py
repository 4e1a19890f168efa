"""The answer: one verdict per group of paths with the same values, from a closed set, decided once at the end
of the explanation (``explain.verdict``) and only rendered afterwards (terminal, HTML, JSON, notebook, pytest).

- *identical*: the same values as the baseline (bit for bit, or equal as the math defines them);
- *noise*: within what correct implementations of the program's ops may differ by (``explain.noise``): no
  cause, no fix, nothing to report;
- *divergence*: the call and line that carry the difference, the mechanism, the layer at fault, which side is
  right, the trigger, and the fix as its re-runs showed it (or what was tried);
- *could not run*: whose fault (the converter, the runtime, the program) and where.

Plain frozen data beside the result model (``result``), at the bottom of the import graph. ``violations``
states the invariants every report keeps; the test suite checks them on every result it produces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["LAYER_WORDS", "Carrier", "Kind", "Lost", "Outcome", "Remedy", "Verdict", "violations"]

Kind = Literal["identical", "noise", "divergence", "could not run"]
# What a fix's re-run did: "parity" (bit for bit), "noise" (within the rounding noise the triage judges by),
# "toward f64" (both sides were far from the f64 ideal and are near it with the change: neither was right),
# "narrows" (closer, not parity), "no closer", "no change", "failed" (the re-run did not complete).
Outcome = Literal["parity", "noise", "toward f64", "narrows", "no closer", "no change", "failed"]
HOLDS: tuple[Outcome, ...] = ("parity", "noise", "toward f64")


# Each layer a verdict can put the fault in, in words.
LAYER_WORDS = {"converter": "the converter", "kernel": "the runtime's kernel", "compiler": "the compiler",
               "device": "the device's arithmetic", "program": "the program itself", "runtime": "the runtime",
               "environment": "this environment"}

@dataclass(frozen=True)
class Carrier:
    """An op that carries (part of) the output difference, as the user wrote it."""

    op: str  # "#3 convert_element_type"
    primitive: str
    line: str | None  # the user's file:line, "examples/conv_bf16.py:30"
    module: str | None = None  # the name stack, "GroupedConvResidual/Conv_0"
    code: str | None = None  # the user's source line, stripped
    share: str = ""  # "carries 100% of the output difference"
    outputs: tuple[str, ...] = ()  # the outputs it carries; () where it carries every one that differs
    loop: str | None = None  # the loop and iteration around it: "layers (scan at model.py:40), iteration 3 of 8"
    library: str | None = None  # the library's line that made the op, where not the user's
    user: bool = True  # ``line`` is the user's own (False: a library's, the model having no line of the user's)


@dataclass(frozen=True)
class Remedy:
    """A change that was re-run, in the user's terms, with what its re-run showed on each path it ran on."""

    change: str  # "jax.jit(fn, compiler_options={'xla_allow_excess_precision': False})"
    kind: str  # "compile option", "serving flag", "model change", "runtime option"
    outcome: Outcome
    on: tuple[str, ...]  # the paths where its re-run showed ``outcome``
    words: str = ""  # what the re-run showed: "parity restored", "narrows: 16 → 5 elements, max 12 → 1 ULP"
    at: str | None = None  # the user's line it changes, where it changes one
    cost: float | None = None  # run time with it against without, warm (+0.43: 43% slower); None: not timed
    elsewhere: tuple[tuple[str, str], ...] = ()  # (path, outcome) where it was re-run with another result
    how: str = ""  # how it is applied, per path where that differs: "jax.jit(fn, compiler_options={...}) (jit)"

    @property
    def holds(self) -> bool:
        return self.outcome in HOLDS


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    paths: tuple[str, ...]
    baseline: str
    passes: bool  # what the gate makes of it: the exit status is a function of the verdicts alone
    size: str = ""  # how far from the baseline: "16 of 20 elements, up to 12 ULP, max abs 0.0156"
    scale: str = ""  # against the model's own rounding noise: "1.6× the model's own rounding noise"
    judgement: str = ""  # the noise or tolerance judgement, in one clause
    tolerance: str | None = None  # the smallest tolerances that would pass it: "--ulp 7168 (of float32) or ..."
    outputs: tuple[str, ...] = ()  # the outputs that differ
    carriers: tuple[Carrier, ...] = ()  # the largest share first
    mechanism: str | None = None  # one sentence
    title: str | None = None  # the mechanism's name, for the headline: "elided bf16/f16 rounding"
    cause: str | None = None  # the cause's id (``explain.causes``)
    layer: str | None = None  # "compiler", "converter", "kernel", "device", "program"
    right: str | None = None  # the side that is right: a path, the baseline, "neither"; None: not judged
    right_words: str | None = None  # why, in one clause
    trigger: str | None = None  # the elements it happens on
    fixes: tuple[Remedy, ...] = ()  # those that hold first
    tried: str | None = None  # where no fix holds: what was tried, and why none held
    remains: str | None = None  # where the closest fix only narrows it: what remains with it applied, and why
    advice: str | None = None  # what to do where no fix holds (report it, a tolerance)
    reason: str | None = None  # could not run: why, in the runtime's or converter's words (first line)
    fault: str | None = None  # could not run: whose fault ("converter", "runtime", "program", "environment")
    explained: bool = True  # False: a divergence not explained (compare only, or interrupted)
    stage_errors: tuple[str, ...] = ()  # stages that failed or could not run, said in the text
    notes: tuple[str, ...] = ()  # what --verbose and the HTML report add

    @property
    def holding(self) -> tuple[Remedy, ...]:
        return tuple(f for f in self.fixes if f.holds)


@dataclass(frozen=True)
class Lost:
    """Every path, the baseline too, far from the f64 ideal: no runtime is right, and agreeing with the baseline
    says little. Decided once for the comparison (``explain.toward``), said after the verdicts: where the program
    loses its digits, and the change toward the ideal re-run on every path."""

    output: str  # the output it is judged on
    scale: float  # the largest |ideal| of that output
    errors: tuple[tuple[str, float], ...]  # (path, max abs error against the f64 ideal), the baseline first
    where: Carrier | None = None  # the op where the digits are lost
    how: str = ""  # "a one-pass variance, mean(x²) − mean(x)²: its inputs' error grows 120,000× there"
    change: str | None = None  # the well-conditioned form, in the user's terms
    apply: str = ""  # how to apply it without editing the model: "jaxparity.fixes.well_conditioned(fn)"
    verified: bool = False  # with it every path is near the ideal
    after: tuple[tuple[str, float], ...] = ()  # (path, max abs error against the f64 ideal) with the change
    tried: str | None = None  # where no change was verified: what was tried, and why it did not hold


_NOISE_FREE = ("unknown", "wrong code", "report it", "cause unknown")


def violations(verdicts: Sequence[Verdict], compared: Sequence[str], passed: bool | None = None) -> list[str]:
    """The invariants every report keeps, broken: each compared path in exactly one verdict; a noise or identical
    verdict carries no cause, fix, mechanism or "unknown"; a divergence's fixes that hold are not contradicted by
    another verdict's; the exit status (``passed``) is the verdicts' alone."""
    out = []
    seen: dict[str, int] = {}
    for v in verdicts:
        for p in v.paths:
            seen[p] = seen.get(p, 0) + 1
    for p in compared:
        if seen.get(p, 0) != 1:
            out.append(f"{p} is in {seen.get(p, 0)} verdicts")
    for p in seen:
        if p not in compared:
            out.append(f"{p} has a verdict but was not compared")
    for v in verdicts:
        who = ", ".join(v.paths)
        if v.kind in ("noise", "identical"):
            if v.cause or v.mechanism or v.title or v.fixes or v.layer or v.tried or v.advice or v.carriers:
                out.append(f"{who}: a {v.kind} verdict carries a cause, mechanism, fix or carrier")
            text = " ".join([v.size, v.scale, v.judgement]).lower()
            if any(w in text for w in _NOISE_FREE):
                out.append(f"{who}: a {v.kind} verdict says {text!r}")
        if v.kind == "divergence" and v.mechanism and "cause unknown" in v.mechanism:
            out.append(f"{who}: 'cause unknown' as a mechanism")
        if v.kind == "could not run" and not v.reason:
            out.append(f"{who}: could not run, with no reason")
    said: dict[tuple[str, str], Outcome] = {}
    for v in verdicts:
        for f in v.fixes:
            for p in f.on:
                key = (f.change, p)
                if key in said and said[key] != f.outcome:
                    out.append(f"the fix {f.change!r} on {p} is said to give {said[key]} and {f.outcome}")
                said[key] = f.outcome
    if passed is not None and passed != all(v.passes for v in verdicts):
        out.append(f"the exit status (passed={passed}) is not the verdicts' ({[v.passes for v in verdicts]})")
    return out
