"""The one result model. Every reporter (terminal, JSON, notebook) renders a ComparisonResult.

The bottom of the import graph: plain data that imports nothing of jaxparity but the metrics it
holds. What a user calls on a result (``explain()``, ``print``, a notebook's table) is added by
``comparison.Comparison``, which the API returns.

Frozen dataclasses of plain values; ``to_dict()`` is the JSON schema (``schema/result-v1.json``,
documented in ``docs/json-schema.md``). Bump ``SCHEMA_VERSION`` on any incompatible change.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from ._version import __version__
from .metrics import LeafDiff, ReferenceError, Tolerance
from .verdict import Lost, Verdict as Answer

__all__ = ["SCHEMA_VERSION", "ArrayInfo", "CheckResult", "ComparisonResult", "Degenerate", "Fault", "HostCallback",
           "IdealUncertainty", "LeafResult", "PathMove", "PathResult", "RoundedConstant", "SampleStats"]

SCHEMA_VERSION = 1

Verdict = Literal[
    "baseline", "identical", "equal", "within tolerance", "differs", "error", "crashed", "timeout", "unavailable"
]
# Verdicts for which a path is considered in agreement with the baseline.
PASSING = ("baseline", "identical", "equal", "within tolerance")


@dataclass(frozen=True)
class ArrayInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class RoundedConstant:
    """A constant the program holds in a dtype narrower than float64 that plausibly rounds a short value
    computed at trace time (``1/127.5`` held as bfloat16's 0.007874): the f64 ideal computes with the
    rounded value, which every value in ``interval`` would have given alike."""

    value: float  # as the program holds it
    dtype: str
    short: str  # the simplest short value that rounds to it: "1/6", "0.1", "sqrt(2/pi)"
    short_value: float
    relative_error: float  # |value - short_value| / |short_value|
    interval: tuple[float, float]  # every value strictly inside rounds to ``value``
    alternatives: tuple[str, ...] = ()  # other short values that round to it ("1/127" beside "0.0079")
    uses: int = 1  # literals and consts of the program that hold it
    where: str | None = None  # the user's lines of its uses ("model.py:12", "model.py:12 and model.py:30")

    def describe(self) -> str:
        """'0.007874 (bfloat16), which 0.0079, 1/127 or anything in [0.007843, 0.007904] rounds to (0.33% from
        0.0079), at model.py:12'."""
        which = ", ".join([self.short, *self.alternatives])
        lo, hi = self.interval
        # as many digits as tell the ends and the value apart (a float32 0.001's interval is 1e-10 wide)
        digits = next((d for d in range(4, 18) if len({f"{v:.{d}g}" for v in (lo, self.value, hi)}) == 3), 17)
        uses = f", {self.uses} uses" if self.uses > 1 else ""
        at = f", at {self.where}" if self.where else ""
        off = f"{self.relative_error:.2%}" if self.relative_error >= 5e-5 else f"{self.relative_error * 100:.1e}%"
        return (f"{self.value:.{digits}g} ({self.dtype}), which {which} or anything in [{lo:.{digits}g}, "
                f"{hi:.{digits}g}] rounds to ({off} from {self.short}{uses}){at}")


@dataclass(frozen=True)
class IdealUncertainty:
    """How far the f64 ideal moves when the program's rounded constants (``RoundedConstant``) take the short
    values they plausibly stand for, or the ends of their rounding intervals: the ideal is known no better."""

    constants: tuple[RoundedConstant, ...]  # the most rounded first
    moved: dict[str, float]  # per output: max abs change of the ideal, the larger of the two re-runs
    moved_to_short: dict[str, float]  # per output: max abs change with every constant at its short value


@dataclass(frozen=True)
class LeafResult:
    """One output array of one path: against the baseline, and both against the f64 ideal."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    diff: LeafDiff | None  # None for the baseline itself
    error_vs_f64: ReferenceError | None
    baseline_error_vs_f64: ReferenceError | None
    # Which of this path and the baseline is nearer the ideal (by max abs error, then mean); "mixed" where
    # their max ULP errors against it name the other side (the larger values decide the one, the smaller the
    # other; ULP distances of 2^p or more, p the dtype's precision, are not counted).
    closer_to_f64: Literal["path", "baseline", "tie", "mixed"] | None
    # The values themselves for outputs of at most 16 elements (what a bug report quotes): floats,
    # exact ints (bools as 0/1), [real, imag] pairs for complex.
    values: tuple[float | int | tuple[float, float], ...] | None = None
    # How the values were compared when the math defines them only up to sign, phase or order
    # (e.g. "eigh vectors compared up to the sign/phase of each vector"); None: element by element.
    rule: str | None = None
    # Where neither side is called closer to the f64 ideal because the ideal itself moves by more than their
    # errors against it differ (the program's constants rounded at trace time): by how much it moves.
    ideal_uncertain_by: float | None = None
    # How far the f64 ideal of this output moves with the constants the program rounded at trace time replaced
    # by the short rationals they round (``ideal.constants``), judged or not; None where nothing was measured.
    ideal_moves_by: float | None = None
    # The f64 ideal takes other loop and branch decisions than the program (an adaptive solver accepts other
    # steps): it computes another program, so neither side is called closer to it, and the baseline's distance
    # from it is no rounding noise floor.
    ideal_decides_otherwise: bool = False


@dataclass(frozen=True)
class Degenerate:
    """An output of the baseline that shows nothing of the model (``degenerate.find_degenerate``):
    ``out: 0 of 40 outputs finite (all NaN)``, a constant, the same on every drawn sample."""

    output: str
    kind: str  # "non-finite", "constant", "independent of the inputs"
    text: str
    hides: bool = False  # every output is degenerate: the comparison shows nothing, and does not pass


@dataclass(frozen=True)
class Fault:
    """Why a path did not run, where the runtime is not at fault: the converter wrote an artifact its own checker
    rejects (jax2onnx's bf16 ``Einsum``, which the ONNX spec does not allow). Every path that runs that artifact
    reports the same fault, and no value of theirs is compared."""

    layer: Literal["converter"]
    converter: str  # "jax2onnx 0.17.1"
    check: str  # what rejected it: "onnx.checker.check_model(full_check=True)"
    what: str  # the checker's words for the node
    text: str  # the whole sentence, as reports say it
    node: str | None = None  # the artifact's node: its name ("node_Einsum_3")
    op_type: str | None = None  # "Einsum"
    node_inputs: tuple[str, ...] = ()  # dtypes of its inputs ("bfloat16"; "?" unknown)
    node_outputs: tuple[str, ...] = ()
    primitive: str | None = None  # the JAX primitive it converts ("dot_general"), where it is placed
    op: int | None = None  # that op's index in the per-op view (#3)
    source: str | None = None  # the user's line ("model.py:42")
    name_stack: str | None = None  # the module path of that op
    call: str | None = None  # the call the converter converted whole, where it did ("jax.numpy.einsum")
    others: int = 0  # more nodes the checker rejects


@dataclass(frozen=True)
class SampleStats:
    """One path over many input sets: how often it diverges, how far, and which sample is worst."""

    n: int
    diverging: int  # samples where the path ran and some element differs from the baseline
    failing: int  # samples outside tolerance (or failed)
    fraction: float  # diverging / n
    worst_sample: int  # index of the sample shown (leaves, verdict) for this path
    worst_label: str
    ulp_percentiles: dict[str, int]  # max ULP per sample: {"50": .., "90": .., "99": .., "100": ..}
    repeat: int = 1
    nondeterministic: int = 0  # samples whose repeats of this path disagree among themselves
    samples_per_second: float = 0.0
    errored: int = 0  # samples where the path did not run (error, crash, timeout): neither diverging nor agreeing


@dataclass(frozen=True)
class HostCallback:
    """A call in the program that runs Python on the host (``localize.callbacks``): ``pure_callback`` from
    Equinox's ``error_if``, ``debug_print`` from ``jax.debug.print``... A program that holds one cannot be
    serialized (export, SavedModel, TFLite, ONNX, IREE), and the path that needs it says so with these."""

    primitive: str  # "pure_callback", "io_callback", "debug_callback", "debug_print", "check"
    user_source: str | None  # the user's own line that led to it, "model.py:16"
    library_source: str | None  # the library's line that made it, "equinox/_errors.py:111"; None: the user's own
    via: str | None  # the library's line the user's line called, where another ("diffrax/_integrate.py:640")
    library: str | None  # the row of ``localize.callbacks.SWITCHES`` it comes from ("equinox"); None: none known
    origin: str | None  # what in that library makes it ("Equinox's error_if / branched_error_if ...")
    switch: str | None  # the library's switch that takes it out of the program, in words; None: none is known
    instead: str | None = None  # where no switch is known: the change to the model that takes it out
    env: dict[str, str] = field(default_factory=dict)  # the environment setting that does ({"EQX_ON_ERROR": "nan"})


@dataclass(frozen=True)
class PathResult:
    spec: str
    summary: str
    reference: bool  # references (declared, f64) are reported but never gate the verdict
    gated: bool  # does this path decide the exit code?
    status: Literal["ok", "error", "unavailable", "timeout", "crashed"]
    verdict: Verdict
    message: str | None
    seconds: float
    notes: tuple[str, ...] = ()
    leaves: tuple[LeafResult, ...] = ()
    samples: SampleStats | None = None  # many-inputs mode only: aggregates; leaves show the worst sample
    device: str | None = None  # the platform it computed on ("cpu", "tpu", "gpu"); None where it did not run
    # The program's host callbacks, where they are why the path could not run (``HostCallback``).
    callbacks: tuple[HostCallback, ...] = ()
    # The f64 path only: how uncertain the ideal is for constants the program rounded at trace time.
    ideal_uncertainty: IdealUncertainty | None = None
    fault: Fault | None = None  # where it did not run through no fault of its runtime: whose it is

    @property
    def passed(self) -> bool:
        return self.verdict in PASSING

    @property
    def worst(self) -> LeafResult | None:
        """The leaf that differs most (by ULP), for one-line summaries."""
        diffs = [(lf, lf.diff) for lf in self.leaves if lf.diff is not None]
        if not diffs:
            return None
        return max(diffs, key=lambda ld: (not ld[1].within_tolerance, ld[1].nan_mismatch, ld[1].max_ulp))[0]


@dataclass(frozen=True)
class ComparisonResult:
    case: str
    source: str | None
    input_source: str
    inputs: tuple[ArrayInfo, ...]
    outputs: tuple[ArrayInfo, ...]
    baseline: str
    tolerance: Tolerance
    paths: tuple[PathResult, ...]
    environment: dict[str, Any] = field(default_factory=dict)
    explanations: tuple[Any, ...] = ()  # explain.explanation.PathExplanation, one per explained path
    schema_version: int = SCHEMA_VERSION
    samples: int = 1  # input sets compared (many-inputs mode: --samples / --inputs DIR)
    degenerate: tuple[Degenerate, ...] = ()  # outputs that show nothing of the model
    # The answer: one verdict per group of paths with the same values (``explain.verdict``), decided once from
    # every stage's findings; the exit status is theirs alone. Empty only for a result built by hand.
    verdicts: tuple[Answer, ...] = ()
    # Differing paths an interrupted explanation (a signal, a budget) did not reach; the verdicts say which.
    partial: tuple[str, ...] = ()
    # Where every path, the baseline too, is far from the f64 ideal: where the program loses its digits, and the
    # change toward the ideal re-run on every path (``explain.toward``); None where some path is near it.
    lost: Lost | None = None
    # The raw material behind this result, not part of the JSON document: {"case": the Case when
    # it ran in this process (for ``explain()``), "runs": each path's raw outputs, "inputs": the
    # input arrays when asked for (baselines)}.
    _source: Any = field(default=None, compare=False, repr=False)

    @property
    def passed(self) -> bool:
        """True when every gated path agrees with the baseline within tolerance, on outputs that show
        something of the model (not all NaN, constant, or the same whatever the inputs)."""
        if self.verdicts:
            return all(v.passes for v in self.verdicts)
        return all(p.passed or self.rounding_only(p.spec) for p in self.paths if p.gated) and not self.hidden

    def rounding_only(self, spec: str) -> bool:
        """With no tolerance given, a path whose explanation finds it no farther from the baseline than correct
        implementations of the program's ops may be (rounding noise, ``explain.noise``) passes; a tolerance
        given (``--ulp 0`` for bit for bit) is the gate instead."""
        return self.tolerance.exact and any(getattr(e, "path", None) == spec and getattr(e, "rounding", None)
                                            is not None for e in self.explanations)

    @property
    def hidden(self) -> bool:
        """Every output is degenerate: agreeing on them shows nothing."""
        return any(d.hides for d in self.degenerate)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def path(self, spec: str) -> PathResult:
        for p in self.paths:
            if p.spec == spec:
                return p
        raise KeyError(f"no path {spec!r} in this result; paths: {[p.spec for p in self.paths]}")

    # -- rendering ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        head = {"schema_version": SCHEMA_VERSION, "tool": "jaxparity", "tool_version": __version__}
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.startswith("_")}
        return head | _jsonable(body) | {"passed": self.passed}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


# -- checking against a baseline (`jaxparity check`) -------------------------------------------------
@dataclass(frozen=True)
class PathMove:
    """How one path moved since the snapshot."""

    spec: str
    status: str  # "same", "within tolerance", "moved", "now failing", "now running", "still failing"
    leaves: tuple[tuple[str, LeafDiff], ...] = ()
    message: str | None = None


@dataclass(frozen=True)
class CheckResult:
    case: str
    against: str
    created: str
    tolerance: Tolerance
    moves: tuple[PathMove, ...]
    changes: tuple[str, ...]  # what changed in the environment since the snapshot
    notes: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return all(m.status in ("same", "within tolerance", "still failing", "now running") for m in self.moves)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1


def _jsonable(value: Any) -> Any:
    """dataclasses.asdict output -> strict JSON: tuples to lists, non-finite floats to strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
