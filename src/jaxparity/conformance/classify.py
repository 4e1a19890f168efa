"""Who is wrong when ``declared`` and ``eager`` disagree: the tool, XLA, or nobody.

``declared`` computes each op exactly (float64) and rounds once to its declared dtype, so for a
one-op harness it must be the correctly rounded value: off by more than 1 ULP is *the tool's
error*; 1 ULP is allowed only where the tool's own float64 value lies across a rounding tie from
the exact one (then the float64 error, not the tool's logic, chose the neighbour; counted and
reported). Eager is then judged against the same reference and JAX's documented tolerance
(``accuracy``): outside it, *XLA's error*; inside, *within documented accuracy*. Decompositions
and unspecified orders first get the chance to agree up to sign, phase, pivot or ties
(``symmetry``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import oracle, reference
from .accuracy import documented_bar, within_bar
from .harness import BASELINE, Audit, HarnessRun, audit, comparable
from .symmetry import SYMMETRIC_GROUPS, agree_up_to_symmetry

__all__ = ["CLASSES", "Outcome", "classify"]

IDENTICAL = "identical"
TOOL = "tool error"
XLA = "XLA error"
WITHIN = "within accuracy"
SYMMETRY = "order/sign not unique"
NO_REFERENCE = "no independent reference"
CLASSES = (IDENTICAL, TOOL, XLA, WITHIN, SYMMETRY, NO_REFERENCE)
AUDITED = ("jit", "export", "declared", "f64")


@dataclass(frozen=True)
class Outcome:
    """Everything the report says about one harness."""

    fullname: str
    group: str
    dtype: str
    primitives: tuple[str, ...]
    seconds: float
    skipped: str | None = None  # eager itself failed (or the harness could not be compared)
    verdicts: dict[str, str] = field(default_factory=dict)  # the tool's, per path
    path_errors: dict[str, str] = field(default_factory=dict)  # spec -> "status: message"
    audits: dict[str, Audit] = field(default_factory=dict)
    declared: str | None = None  # one of CLASSES
    detail: str = ""
    reference: str = ""  # "mpmath" / "float64 XLA (upcast)" / "symmetry" / ""
    eager_ulp: float | None = None  # max over the disagreeing elements, against the reference
    declared_ulp: float | None = None
    bar: str = ""
    near_ties: int = 0  # declared 1 ULP off because its float64 value crossed a tie

    @property
    def false_equal(self) -> list[str]:
        return [s for s, a in self.audits.items() if a.false_equal]

    @property
    def false_differs(self) -> list[str]:
        return [s for s, a in self.audits.items() if a.false_differs]

    @property
    def miscounted(self) -> list[str]:
        return [f"{s} ({'; '.join(a.miscounted)})" for s, a in self.audits.items() if a.miscounted]


def classify(run: HarnessRun, fn: Any) -> Outcome:
    """Audit every path of ``run`` and classify its declared-vs-eager disagreement (if any).
    ``fn`` is the harness function, re-run widened for the float64 reference."""
    base: dict[str, Any] = dict(fullname=run.fullname, group=run.group, dtype=run.dtype,
                                primitives=run.primitives, seconds=run.seconds)
    if not run.eager_ok:
        eager = run.paths.get(BASELINE)
        why = run.error or (f"eager {eager.status}: {eager.message}" if eager else "eager did not run")
        return Outcome(**base, skipped=why[:300])
    if run.error is not None:  # eager runs, jaxparity.compare does not
        return Outcome(**base, declared=TOOL, detail=run.error[:300])
    verdicts = {s: p.verdict for s, p in run.paths.items()}
    errors = {s: f"{p.status}: {(p.message or '')[:200]}" for s, p in run.paths.items() if p.status != "ok"}
    audits = {s: a for s in AUDITED if (a := audit(run, s)) is not None}
    base.update(verdicts=verdicts, path_errors=errors, audits=audits)
    dec = run.paths.get("declared")
    if dec is None or dec.status != "ok":
        return Outcome(**base, declared=TOOL, detail=f"declared {errors.get('declared', 'missing')}")
    pairs, mismatch = comparable(dec, run.paths[BASELINE])
    if pairs is None:
        return Outcome(**base, declared=TOOL, detail=f"structure: {mismatch}")
    if all(oracle.count_differ(d, e) == 0 for d, e in pairs):
        return Outcome(**base, declared=IDENTICAL)
    try:
        judged = _judge(run, fn, pairs)
    except Exception as e:  # noqa: BLE001 - one harness must not stop the corpus; the row says why
        judged = dict(declared=NO_REFERENCE, detail=f"the suite's own classification failed: {e!r:.200}")
    return Outcome(**base, **judged)


def _judge(run: HarnessRun, fn: Any, pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    eager = [e for _, e in pairs]
    declared = [d for d, _ in pairs]
    tol = 10 * max((documented_bar(run.group, e.dtype).tol for e in eager if e.dtype.kind in "fcV"), default=1e-6)
    if run.group.startswith("random_") or run.group == "rng_bit_generator":
        return dict(declared=NO_REFERENCE, detail="random sampling: a widened run draws another sample, and "
                    "mpmath has no rule for the sampler")
    unique = run.group == "svd" and len(pairs) == 1  # singular values alone: sorted, no freedom left
    if run.group in SYMMETRIC_GROUPS and not unique and agree_up_to_symmetry(run.group, eager, declared, run.args, tol):
        return dict(declared=SYMMETRY, reference="symmetry",
                    detail=f"both are one {run.group} result, within {tol:g} of the largest element, "
                    "up to sign/phase/pivot/tie order")
    if len(run.primitives) == 1 and len(pairs) == 1:
        judged = _against_mpmath(run, pairs[0])
        if judged is not None:
            return judged
    return _against_upcast(run, fn, pairs)


def _f64_values(run: HarnessRun, leaf: int) -> np.ndarray | None:
    f64 = run.paths.get("f64")
    if f64 is None or f64.status != "ok" or not f64.outputs:
        return None
    return np.asarray(f64.outputs[leaf][1])


def _declared_verdict(d: np.ndarray, want: np.ndarray, f64: np.ndarray | None) -> tuple[bool, int, float]:
    """(declared acceptable, elements 1 ULP off at a tie, max ULP) for declared values ``d``
    against correctly rounded ``want`` (flat, one dtype), ``f64`` the tool's unrounded values."""
    ulp = oracle.ulp_distance(d, want)  # inf where one side is NaN
    worst = float(np.max(ulp, initial=0.0))
    if worst > 1:
        return False, 0, worst
    one = ulp == 1
    if not one.any():
        return True, 0, worst
    if f64 is None:
        return False, 0, worst
    # Off by one is the float64 value's doing only if declared is exactly that value rounded once.
    rounded = oracle.round_to(f64, d.dtype)
    crossed = oracle.same_values(rounded, d) & one
    return bool(crossed.sum() == one.sum()), int(one.sum()), worst


def _against_mpmath(run: HarnessRun, pair: tuple[np.ndarray, np.ndarray]) -> dict[str, Any] | None:
    d, e = pair
    if not (oracle.is_float(e.dtype) or oracle.is_complex(e.dtype)):
        return None
    prim = run.primitives[0]
    where = np.flatnonzero(~oracle.same_values(d, e).reshape(-1))
    exact = reference.elementwise(prim, run.eqn_params, run.args, e, where)
    if exact is None:
        return None
    judged = ~np.isnan(exact.tie)  # elements with non-finite inputs are not judged
    idx, want = exact.index[judged], exact.rounded[judged]
    df, ef = d.reshape(-1)[idx], e.reshape(-1)[idx]
    f64 = _f64_values(run, 0)
    ok, ties, dec_ulp = _declared_verdict(df, want, None if f64 is None else f64.reshape(-1)[idx])
    eager_ulp = float(np.max(oracle.ulp_distance(ef, want), initial=0.0))
    bar = documented_bar(prim, e.dtype)
    tie_note = f"; {ties} element(s) 1 ULP off where the float64 value crossed a rounding tie" if ties else ""
    common = dict(reference=f"mpmath {reference.DIGITS} digits", eager_ulp=eager_ulp, declared_ulp=dec_ulp,
                  bar=repr(bar), near_ties=ties)
    if not ok:
        return dict(declared=TOOL, detail=f"declared {dec_ulp:g} ULP from the correctly rounded {prim}"
                    f" over {len(idx)} disagreeing elements{tie_note}", **common)
    inside = within_bar(ef, exact.nearest64[judged], bar)
    n_out = int(np.count_nonzero(~inside))
    cls = WITHIN if n_out == 0 else XLA
    return dict(declared=cls, detail=f"{len(idx)} disagreeing elements, eager max {eager_ulp:g} ULP; "
                f"{n_out} outside {bar!r}{tie_note}", **common)


def _against_upcast(run: HarnessRun, fn: Any, pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    eager = [e for _, e in pairs]
    ref = reference.upcast(fn, run.args, eager)
    if ref is None:
        return dict(declared=NO_REFERENCE, detail="no mpmath rule and no widened float64 run of this harness")
    one_op = len(run.primitives) == 1
    worst_e = worst_d = 0.0
    out_of_bar = ties = 0
    bars = {documented_bar(run.group, e.dtype) for e in eager if e.dtype.kind not in "biu"}
    for leaf, ((d, e), r) in enumerate(zip(pairs, ref)):
        bar = documented_bar(run.group, e.dtype)
        want = oracle.round_to(r, e.dtype) if r.dtype != e.dtype else r
        differ = ~oracle.same_values(d, e)
        if not differ.any():
            continue
        if e.dtype.kind in "biu":
            bad_d = ~oracle.same_values(d, want)
            if bad_d.any():
                return dict(declared=TOOL, reference="float64 XLA (upcast)",
                            detail=f"integer output {leaf}: declared differs from the exact result in "
                            f"{int(bad_d.sum())} elements")
            out_of_bar += int(np.count_nonzero(~oracle.same_values(e, want)))
            worst_e = max(worst_e, float(np.max(oracle.ulp_distance(e[differ], want[differ]), initial=0)))
            continue
        f64 = _f64_values(run, leaf)
        ok, n_ties, dulp = _declared_verdict(d[differ], want[differ], None if f64 is None else f64[differ])
        worst_d, ties = max(worst_d, dulp), ties + n_ties
        if not ok and one_op:
            return dict(declared=TOOL, reference="float64 XLA (upcast)", declared_ulp=dulp, eager_ulp=None,
                        detail=f"output {leaf}: declared {dulp:g} ULP from the widened float64 result, rounded")
        if not ok:
            return dict(declared=NO_REFERENCE, reference="float64 XLA (upcast)", declared_ulp=dulp,
                        detail=f"{len(run.primitives)} ops, each rounded by declared: the widened run "
                        f"(rounded once) is no reference for it ({dulp:g} ULP apart)")
        worst_e = max(worst_e, float(np.max(oracle.ulp_distance(e[differ], want[differ]), initial=0)))
        out_of_bar += int(np.count_nonzero(~within_bar(e[differ], r[differ], bar)))
    cls = WITHIN if out_of_bar == 0 else XLA
    tie_note = f"; {ties} element(s) 1 ULP off where the float64 value crossed a rounding tie" if ties else ""
    shown = "; ".join(sorted(map(repr, bars))) or "exact (integers)"
    return dict(declared=cls, reference="float64 XLA (upcast)", eager_ulp=worst_e, declared_ulp=worst_d,
                bar=shown, near_ties=ties,
                detail=f"eager max {worst_e:g} ULP from the widened float64 result; {out_of_bar} element(s) "
                f"outside {shown}{tie_note}")
