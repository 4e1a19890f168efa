"""The last stage: every stage's findings reconciled into exactly one verdict per group of paths with the same
values (``jaxparity.verdict``), decided here once; the renderers only render them.

Paths are grouped by their outputs: those that did not run by the fault that stopped them, those that agree
with the baseline into one *identical* verdict, the others by their values bit for bit (paths with the same
values are one finding, whichever of them was explained). A group that differs is *noise* where the rounding
judge (``explain.noise``) found every difference within what correct implementations of the program's ops may
differ by and no member found a departure from the program; else a *divergence*
(``explain.verdict.divergence``). Where two members' explanations say otherwise, the evidence decides, not the
order: a confirmed departure outweighs a noise judgement, a mechanism outweighs a catch-all.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from typing import Any

from ...verdict import Verdict, violations
from ..pairs import counterpart
from .divergence import divergence, size_words

__all__ = ["STRICT", "decide", "same_values", "with_verdicts"]

# Set by the test suite: a report whose verdicts break an invariant (``verdict.violations``) or carry a stage
# error (a stage or an experiment that failed, said in the text) is an error.
STRICT = "JAXPARITY_STRICT_VERDICTS"


# A stage error that is the runtime's own (XLA refusing an option, a re-run that crashed): said in the text, as
# every stage error is, but no failure of jaxparity's for the suite's gate.
_RUNTIMES = re.compile(r"\b(XlaRuntimeError|RuntimeError|SIGSEGV|SIGABRT|SIGBUS|crashed|killed by signal)\b")


def with_verdicts(result: Any, partial: Sequence[str] = ()) -> Any:
    """``result`` with its verdicts decided (``decide``); ``partial``: differing paths left unexplained (an
    interrupted explanation, a budget)."""
    return dataclasses.replace(result, verdicts=decide(result, partial))


def decide(result: Any, partial: Sequence[str] = ()) -> tuple[Verdict, ...]:
    """One verdict per group of compared paths (``compared``), in the order of the comparison."""
    explained = {e.path: e for e in result.explanations}
    verdicts: list[Verdict] = []
    placed: set[str] = set()
    members = compared(result)
    for p in members:
        if p.spec in placed:
            continue
        if p.status != "ok" or p.verdict in ("error", "crashed", "timeout", "unavailable"):
            group = [q for q in members if q.spec not in placed and _stopped_alike(q, p)]
            verdicts.append(_could_not_run(group, result))
        elif p.verdict in ("identical", "equal"):
            group = [q for q in members if q.verdict in ("identical", "equal") and q.status == "ok"]
            verdicts.append(_identical(group, result))
        else:
            against = counterpart(result, p.spec)  # like against like (explain.pairs)
            group = [q for q in members if q.spec not in placed and q.status == "ok" and
                     q.verdict in ("differs", "within tolerance") and same_values(result, p.spec, q.spec)
                     and counterpart(result, q.spec) == against]
            verdicts.append(_differing(group, result, explained, partial) if against == result.baseline else
                            _against(group, result, against, explained, partial))
        placed.update(q.spec for q in group)
    out = tuple(verdicts)
    broken = violations(out, [p.spec for p in members], all(v.passes for v in out))
    if broken and os.environ.get(STRICT):
        raise AssertionError(f"{result.case}: the verdicts break an invariant: {'; '.join(broken)}")
    failed = [s for v in out for s in v.stage_errors if not _RUNTIMES.search(s)]
    if failed and os.environ.get(STRICT):
        raise AssertionError(f"{result.case}: a stage failed: {'; '.join(failed)}")
    if broken and out:  # never silently: said in the report (a defect of jaxparity's, to report)
        said = f"jaxparity's verdicts break an invariant (please report it): {'; '.join(broken)}"
        out = (dataclasses.replace(out[0], stage_errors=out[0].stage_errors + (said,)),) + out[1:]
    return out


def compared(result: Any) -> list[Any]:
    """The paths that get a verdict: every path but the references and the baseline (the baseline too where it
    did not run: then nothing was compared); where the baseline failed, only it."""
    base = next((p for p in result.paths if p.spec == result.baseline), None)
    if base is not None and base.status != "ok":
        return [base]
    return [p for p in result.paths if not p.reference and p.spec != result.baseline]


def same_values(result: Any, a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` gave the same outputs bit for bit."""
    if a == b:
        return True
    runs = (result._source or {}).get("runs") or {}
    ra, rb = runs.get(a), runs.get(b)
    if ra is not None and rb is not None and ra.outputs and rb.outputs:
        return len(ra.outputs) == len(rb.outputs) and all(
            x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
            for (_, x), (_, y) in zip(ra.outputs, rb.outputs))
    # a result read back without its runs: the explanations say which paths share their values
    return any(getattr(e, "path", None) in (a, b) and getattr(e, "same_values", None) in (a, b)
               for e in result.explanations)


def _stopped_alike(q: Any, p: Any) -> bool:
    """Two paths that did not run, for the same reason: the same converted model's fault, or the same words
    with each path's own name taken out (onnx and onnx-ref cannot convert the same op)."""
    if q.status == "ok" and q.verdict not in ("error", "crashed", "timeout", "unavailable"):
        return False
    if q.spec == p.spec:
        return True
    if q.fault is not None or p.fault is not None:
        return q.fault is not None and p.fault is not None and (q.fault.converter, q.fault.node, q.fault.what) == (
            p.fault.converter, p.fault.node, p.fault.what)
    if q.status != p.status:
        return False
    mine, theirs = _reason(q), _reason(p)
    return mine == theirs or re.sub(rf"(?<![\w-]){re.escape(q.spec)}(?![\w-])", "\0", mine) == \
        re.sub(rf"(?<![\w-]){re.escape(p.spec)}(?![\w-])", "\0", theirs)


def _reason(p: Any) -> str:
    return p.fault.text if p.fault is not None else (p.message or p.status).strip()


_CONVERTER = re.compile(r"cannot convert|could not convert|failed to legalize|converter|jax2onnx|jax2tf|cannot be "
                        r"converted", re.I)
_COMPILER = re.compile(r"could not compile|failed to compile|compilation failed", re.I)
_PROGRAM = re.compile(r"PRNG key|host callback", re.I)  # what the program holds that no artifact can
_LINE = re.compile(r"\bat ([\w./-]+\.py:\d+)|(?:^|\s)([\w./-]+\.py:\d+):\d+: error", re.M)  # "at f.py:4"; MLIR's


def _could_not_run(group: list[Any], result: Any) -> Verdict:
    """Whose fault: the converter (its own checker rejects its model, or it cannot convert an op), the program
    (host callbacks no artifact can hold; the function fails), the environment (the runtime is not installed),
    the runtime (it crashed, hung or refused a model it was given)."""
    p = group[0]
    reason, advice = _reason(p), None
    whole = reason
    notes: tuple[str, ...] = ()
    if p.fault is not None:  # the converter's own checker: the node, the op it converts; what to do, apart
        f = p.fault
        node = f" node {f.node} ({f.op_type}, {', '.join(f.node_inputs)})" if f.node else ""
        what = f"; it converts {f'#{f.op} ' if f.op is not None else ''}{f.primitive}" if f.primitive else ""
        call = f" ({f.call})" if f.call and f.primitive and f.primitive not in f.call else ""
        advice = f.text.rpartition(": ")[2]
        reason = f"{f.converter} wrote a model its own checker rejects:{node}{what}{call}"
        notes = (f.text,)
    elif p.callbacks:
        from ...report.callbacks import callbacks_line

        reason = callbacks_line(p.callbacks, p.message, brief=True)
        notes = (callbacks_line(p.callbacks, p.message),)
    else:  # the runtime's or converter's own words: the first line, whole in --verbose and the JSON
        lines = reason.strip().splitlines() or [p.status]
        first = lines[0] if not lines[0].rstrip().endswith(":") or len(lines) == 1 else " ".join(lines[:2])
        if len(first) > 160 or first != reason.strip():
            notes = (reason,)
            reason = first if len(first) <= 160 else first[:first.rfind(" ", 0, 160)] + " …"
    if p.fault is not None:
        fault: str = p.fault.layer
    elif p.callbacks:
        fault = "program"
    elif p.status == "unavailable":
        fault = "environment"
    elif p.spec == result.baseline or _PROGRAM.search(reason):
        fault = "program"
    elif _COMPILER.search(reason):  # IREE's compiler refusing an op (its own words say "failed to legalize" too)
        fault = "compiler"
    elif _CONVERTER.search(reason):
        fault = "converter"
    elif _raised_in(reason, result.source):
        fault = "program"  # the function itself raised (a line of the case file in its words)
    else:
        fault = "runtime"
    line = (_fault_line(p.fault) if p.fault is not None and p.fault.source else
            next((c.user_source for c in p.callbacks if c.user_source), None) or
            _named_line(whole))
    notes = ((f"at {line}",) if line else ()) + notes
    return Verdict("could not run", tuple(q.spec for q in group), result.baseline, passes=not any(q.gated for q in group),
                   reason=reason, fault=fault, advice=advice or None, notes=notes)


_OP_AT = re.compile(r"#(\d+) ([\w-]+) at ([\w./-]+\.py:\d+)(?:, in ([^\s,;]+))?")


def _fault_line(f: Any) -> str:
    """A converter's fault at the user's line, with the op it converts and how it came ("model.py:7 #19
    dot_general in transpose(jvp())")."""
    op = f" #{f.op} {f.primitive}" if f.op is not None and f.primitive else ""
    return f"{f.source}{op}" + (f" in {f.name_stack}" if op and f.name_stack else "")


def _named_line(words: str) -> str | None:
    """The user's line a runtime's or converter's words name, with the op where a hint names it ("model.py:4 #17
    scatter-add in transpose(jvp(loss))": the op in your code) first, else a line its own message carries
    (MLIR's "model.py:4:11: error")."""
    if (op := _OP_AT.search(words)) is not None:
        stack = op[4] or ""
        while stack.count(")") > stack.count("("):  # the hint's own closing parenthesis
            stack = stack[:-1]
        return f"{op[3]} #{op[1]} {op[2]}" + (f" in {stack}" if stack else "")
    found = [m for m in _LINE.finditer(words)]
    said = next((m.group(1) for m in found if m.group(1)), None)
    return said or next((m.group(2) for m in found if m.group(2)), None)


def _raised_in(reason: str, source: str | None) -> bool:
    """The words name a line of the case's own file: the function raised there, not the runtime."""
    import os

    return bool(source) and re.search(rf"\b{re.escape(os.path.basename(source or ''))}:\d+", reason) is not None


def _identical(group: list[Any], result: Any) -> Verdict:
    rules = sorted({lf.rule for q in group for lf in q.leaves if lf.rule})
    equal = any(q.verdict == "equal" for q in group)
    judgement = ("the same values as the math defines them (" + "; ".join(rules) + ")" if rules else
                 "the same values; bit patterns differ only in ±0 or NaN payloads" if equal else "bit for bit")
    return Verdict("identical", tuple(q.spec for q in group), result.baseline, passes=not result.hidden,
                   judgement=judgement)


def _differing(group: list[Any], result: Any, explained: dict[str, Any], partial: Sequence[str]) -> Verdict:
    """A group with the same values that differ from the baseline: noise, or a divergence."""
    found = [explained[q.spec] for q in group if q.spec in explained]
    paths = tuple(q.spec for q in group)
    gate = all(q.passed for q in group)  # within a tolerance the user gave
    p = group[0]
    if found and any(getattr(e, "rounding", None) is not None for e in found) and not any(_departs(e) for e in found):
        r = next(e.rounding for e in found if e.rounding is not None)
        passes = (gate or result.tolerance.exact) and not result.hidden
        count, distance, scale = size_words(p, result)
        return Verdict("noise", paths, result.baseline, passes=passes, size=f"{count}, {distance}", scale=scale,
                       outputs=_differing_outputs(p),
                       judgement=f"at most {r.share:.0%} of what correct implementations of its ops may differ by"
                       + _neither(p, result.baseline)
                       + ("" if passes or result.hidden else f"; the tolerance given ({result.tolerance.describe()}) "
                          "asks for closer"))
    return divergence(group, found, result, gate and not result.hidden,
                      explained=bool(found) and not any(s in partial for s in paths))


def _against(group: list[Any], result: Any, twin: str, explained: dict[str, Any], partial: Sequence[str]) -> Verdict:
    """A group explained against its counterpart (``explain.pairs``: the same mode on the baseline's device), not
    the baseline: measured against it, judged as any group is; identical where it gave the counterpart's values."""
    rediffed = [_rediffed(result, q, twin) for q in group]
    if any(r is None for r in rediffed):  # a result read back without its runs: against the baseline, as the table
        return _differing(group, result, explained, partial)
    mine = dataclasses.replace(result, baseline=twin, paths=tuple(
        next((r for r in rediffed if r is not None and r.spec == q.spec), q) for q in result.paths))
    if all(lf.diff is None or lf.diff.bitwise_equal for r in rediffed if r is not None for lf in r.leaves):
        return dataclasses.replace(_identical(rediffed, mine), judgement=f"bit for bit (computed as {twin} computes, "
                                   f"on another device: {result.baseline}'s difference is {twin}'s, not the device's)")
    return _differing([r for r in rediffed if r is not None], mine, explained, partial)


def _rediffed(result: Any, p: Any, twin: str) -> Any:
    """``p`` (a PathResult) measured against ``twin`` instead of the baseline, from the runs; None without them."""
    from ...metrics import closer_to_ideal, diff_leaf

    runs = (result._source or {}).get("runs") or {}
    mine, theirs = runs.get(p.spec), runs.get(twin)
    other = next((q for q in result.paths if q.spec == twin), None)
    if mine is None or theirs is None or other is None or not mine.outputs or not theirs.outputs:
        return None
    got, base = dict(mine.outputs), dict(theirs.outputs)
    their_leaves = {lf.name: lf for lf in other.leaves}
    leaves = []
    for lf in p.leaves:
        if lf.name not in got or lf.name not in base:
            return None
        twin_err = their_leaves[lf.name].error_vs_f64 if lf.name in their_leaves else None
        closer = closer_to_ideal(lf.error_vs_f64, twin_err) if lf.error_vs_f64 and twin_err else None
        leaves.append(dataclasses.replace(lf, diff=diff_leaf(got[lf.name], base[lf.name], result.tolerance),
                                          baseline_error_vs_f64=twin_err, closer_to_f64=closer))
    differs = not all(lf.diff.bitwise_equal for lf in leaves if lf.diff is not None)
    return dataclasses.replace(p, leaves=tuple(leaves), verdict="differs" if differs else "identical")


_LOST = 0.01  # an output off the f64 ideal by this share of its scale on both sides: neither is near it


def _neither(p: Any, baseline: str) -> str:
    """Where both sides are far from the f64 ideal (an ill-conditioned program: a one-pass variance of large
    values), the noise judgement says so: correct implementations may differ that much because none is near it."""
    for lf in p.leaves:
        mine, theirs = lf.error_vs_f64, lf.baseline_error_vs_f64
        if mine is None or theirs is None or not mine.ideal_scale:
            continue
        if min(mine.max_abs, theirs.max_abs) >= _LOST * mine.ideal_scale:
            return (f"; neither is near the f64 ideal ({lf.name}: max abs error {theirs.max_abs:.2g} on {baseline}, "
                    f"{mine.max_abs:.2g} on {p.spec}, where it reaches {mine.ideal_scale:.2g}): the program loses its "
                    "digits there on any implementation")
    return ""


def _departs(e: Any) -> bool:
    """An explanation that found the path departing from the program: a confirmed cause that is no rounding
    (``noise._departs``: what keeps a path out of the noise judgement)."""
    from ..noise import _departs as departs

    return any(departs(c) for c in e.causes)


def _differing_outputs(p: Any) -> tuple[str, ...]:
    return tuple(lf.name for lf in p.leaves if lf.diff is not None and not lf.diff.bitwise_equal and lf.diff.n_differ)
