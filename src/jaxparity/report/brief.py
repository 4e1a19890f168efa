"""The short explanation of one path, written from the result model: what a reader needs first.

One line each, in this order: the triage (is this within the model's own rounding noise, or a real
divergence and by how much), the divergence that carries the output error (with its share, its op and
the user's line), who is right on that op's own inputs, the cause with its evidence, and each fix as
its re-run showed it (verified, narrows by how much, or not). Everything else (every op that departs,
every cause tested, the drift layer by layer, the candidate semantics) is in ``--verbose``, the JSON
and the HTML report.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ..metrics import LESS_ACCURATE, MATH_LIBRARY_ULP, ROUNDING_SHARE
from .format import advice, explaining_cause, fmt, is_rerun, narrows, readable, short_title

__all__ = ["blame_line", "brief", "cost_words", "fix_lines", "group_sizes", "sentences", "triage"]


def _floor(leaf: Any) -> float | None:
    err = leaf.baseline_error_vs_f64
    return None if err is None else float(err.max_abs)


def triage(p: Any, baseline: str, lead: Any = None, amplified: bool = False, kept: bool = False) -> str | None:
    """One sentence: the path's difference from the baseline against the model's own rounding noise (the
    baseline's distance to the f64 ideal, output by output); None where the path did not run. ``lead``:
    the divergence that carries the difference; where the path departs there from what the program
    declares, a difference of the noise's size is still not called noise. ``amplified``: blame found an op
    that amplifies small differences; where the noise floor is then large against the values, that is said.
    ``kept``: the baseline keeps the declared rounding where the path departs (seen in per-op values that are
    not the program's own: no op is named), so its distance from the ideal is not called an error."""
    leaves = [lf for lf in getattr(p, "leaves", ()) if lf.diff is not None and not lf.diff.bitwise_equal]
    if not leaves:
        return None
    nan = [lf for lf in leaves if lf.diff.nan_mismatch]
    if nan:
        lf = nan[0]
        return (f"a real divergence: {lf.name} has NaN or inf where {baseline} has numbers, or the reverse "
                f"({lf.diff.n_differ} of {lf.diff.size} elements differ)")
    huge = [lf for lf in leaves if not math.isfinite(lf.diff.max_abs)]
    if huge:
        lf = huge[0]
        return (f"a real divergence: {lf.name} has inf where {baseline} has a finite value, or the reverse "
                f"({lf.diff.n_differ} of {lf.diff.size} elements differ)")
    other = [lf for lf in leaves if getattr(lf, "ideal_decides_otherwise", False)]
    if other:
        worst = max(other, key=lambda lf: lf.diff.max_abs)
        return (f"{worst.name} differs from {baseline} by up to {fmt(worst.diff.max_abs)}; no noise floor to judge it "
                "by: the f64 ideal takes other loop or branch decisions than the program (the f64 row says which), "
                f"so {baseline}'s distance from it is not rounding")
    maybe_floors = [(lf, _floor(lf)) for lf in leaves]
    if any(f is None for _, f in maybe_floors):
        worst = max(leaves, key=lambda lf: lf.diff.max_abs)
        return (f"{worst.name} differs from {baseline} by up to {fmt(worst.diff.max_abs)}; no noise floor to judge it "
                "by (run the f64 path for the model's own rounding noise)")
    floors = [(lf, f) for lf, f in maybe_floors if f is not None]  # all of them
    ratio = {id(lf): (lf.diff.max_abs / f if f > 0 else float("inf")) for lf, f in floors}
    lf, floor = max(floors, key=lambda x: ratio[id(x[0])])
    r = ratio[id(lf)]
    measured = (f"{lf.name} differs from {baseline} by up to {fmt(lf.diff.max_abs)}, {baseline} is {fmt(floor)} from "
                "the f64 ideal (max abs; f64 ignores the program's casts)")
    # who departs from the declared rounding at the op below: the path, or a baseline that keeps excess precision
    departs = None if lead is None else (lead.unrounded_by(p.spec, baseline) or
                                         (p.spec if lead.declared_side == "baseline" else None))
    measured += _digits_lost(lf, floor, baseline) if amplified else ""
    scale = lf.baseline_error_vs_f64.ideal_scale if lf.baseline_error_vs_f64 is not None else None
    settled = lf.ideal_moves_by is None or lf.ideal_moves_by < floor / 2  # the ideal moves less than that
    # Where the path departs from the declared rounding at the op below and the baseline keeps it, the baseline's
    # distance from the ideal is the program's own rounding, however far many layers of it carry (a deep bf16
    # network): not an error of the baseline's.
    declared = kept or (departs is not None and departs == p.spec)
    if r < 2 and scale and floor > ROUNDING_SHARE * scale and settled and not declared and not amplified:
        # The baseline's own distance from the ideal is no rounding: a flipped decision, a wrong value. It is no
        # noise floor to judge the path by, whatever the ratio. (Where blame found an op that amplifies small
        # differences, that distance is the program's rounding made large: said as such below.)
        return (f"a real divergence: {baseline} is itself {fmt(floor)} from the f64 ideal where the values reach "
                f"{fmt(scale)}, an error rather than rounding, so it is no noise floor; {measured}")
    mine = lf.error_vs_f64
    if lf.ideal_uncertain_by is not None:
        # The ideal moves with the constants the program rounded at trace time by more than the two sides'
        # errors against it differ: neither side's distance from it is its own error, or a floor.
        measured += (f"; which side is nearer the f64 ideal is not judged: the ideal itself moves by up to "
                     f"{fmt(lf.ideal_uncertain_by)} with the constants the program rounded at trace time")
    elif not settled:
        # The ideal moves by as much as the baseline's distance from it: that distance is no measure of the
        # baseline's own error, nor a multiple of the path's.
        measured += (f"; the f64 ideal itself moves by up to {fmt(lf.ideal_moves_by)} with the constants the "
                     "program rounded at trace time, so neither side's distance from it is taken as its own error")
    elif r < 2 and mine is not None and floor > LESS_ACCURATE * mine.max_abs and not declared and \
            (lf.baseline_error_vs_f64.max_ulp or 0) > MATH_LIBRARY_ULP:
        # The baseline's distance from the ideal is its own error, not rounding the path may share: the path is
        # far nearer the ideal (another device's arithmetic, a less accurate function), so that error is the
        # divergence, not a floor to judge it by.
        times = floor / mine.max_abs if mine.max_abs > 0 else float("inf")
        return (f"a real divergence: {baseline} is {times:,.0f}× farther from the f64 ideal than {p.spec} "
                f"({fmt(floor)} against {fmt(mine.max_abs)}, max abs), so its error is no noise floor; {measured}")
    if 1 < r < 2:
        size = f"about the size of the model's own rounding noise ({r:.2f}×)"
        if departs:
            return f"{size}, but not noise: {departs} departs from the declared rounding at the op below; {measured}"
        return f"{size}: {measured}"
    if r <= 1:
        if departs:
            return (f"not noise, though no larger than the model's own: {departs} departs from the declared "
                    f"rounding at the op below; {measured}")
        return f"within the model's own rounding noise: {measured}"
    if floor == 0:
        return f"a real divergence: {measured}: {baseline} is exact here, so any difference is real"
    return f"a real divergence, {r:.3g}× the model's own rounding noise: {measured}"


def _why_not(evidence: str) -> str:
    """'the re-run failed (crashed: re-running X was killed by SIGSEGV (its process died ...))' -> the crash."""
    text = evidence.removeprefix("the re-run failed (")
    text = text.split(" (its process", 1)[0].split(" (it was stopped", 1)[0]
    return text if len(text) <= 140 else text[:text.rfind(" ", 0, 140)] + " ..."


def group_sizes(paths: Sequence[Any], baseline: str) -> str | None:
    """Where several paths are explained as one (the same first op and causes) but differ from the baseline
    by other amounts: each one's largest difference, so that the triage's numbers (the first path's) are not
    read as all of theirs. None where they differ alike."""
    sizes = []
    for p in paths:
        diffs = [lf.diff for lf in getattr(p, "leaves", ()) if lf.diff is not None]
        if not diffs:
            return None
        sizes.append((p.spec, max(d.max_abs for d in diffs), max(d.max_ulp for d in diffs)))
    if len({(a, u) for _, a, u in sizes}) < 2:
        return None
    return ("each differs from " + baseline + " by its own amount: " +
            ", ".join(f"{spec} up to {fmt(a)} ({u:,} ULP)" for spec, a, u in sizes))


def _digits_lost(leaf: Any, floor: float, baseline: str) -> str:
    """'; that noise is itself large ...' where the baseline's error against f64 is over the square root of
    the output dtype's unit roundoff of the values' size: half the digits or more are rounding error."""
    import ml_dtypes
    import numpy as np

    scale = getattr(leaf.baseline_error_vs_f64, "ideal_scale", None)
    try:
        eps = float(ml_dtypes.finfo(np.dtype(leaf.dtype)).eps)
    except Exception:  # not a float output (complex: its component's digits are not judged here)
        return ""
    if not scale or floor <= math.sqrt(eps) * scale:
        return ""
    return (f"; that noise is itself large: on values up to {fmt(scale)}, half or more of {baseline}'s digits are "
            "rounding error, so the program is ill-conditioned in this precision (see below)")


def _where(d: Any) -> str:
    op = d.op
    loops = "".join(f"{f.describe()}: " for f in d.within)
    stack = f" in {op.name_stack}" if op.name_stack else ""
    return f"{loops}#{op.index} {op.primitive}{stack} ({op.user_source or op.source or 'unknown line'})"


_LAYERS = {"converter": "the conversion", "kernel": "the runtime's kernel", "compiler": "the compiler",
           "device": "the device's arithmetic"}


def span(ops: Sequence[Any], limit: int | None = None) -> str:
    """The user's source that a run of ops covers, smallest first: "the call at model.py:42: convert_element_type,
    mul, reduce_sum", or each line with its ops; where no op has a line of the user's, their library lines."""
    by_line: dict[str, list[str]] = {}
    for op in ops:
        where = op.user_source or op.source or "an unknown line"
        by_line.setdefault(where, [])
        if op.primitive not in by_line[where]:
            by_line[where].append(op.primitive)
    if len(by_line) == 1:
        (where, prims), = by_line.items()
        return f"the call at {where}: {', '.join(prims)}"
    items = list(by_line.items())
    more = f"; and {len(items) - limit} more lines" if limit is not None and len(items) > limit else ""
    return "; ".join(f"{where}: {', '.join(prims)}" for where, prims in items[:limit]) + more


def _pct(x: float) -> str:
    return f"{x:.0%}" if x < 0.995 else "100%" if x >= 0.9995 else f"{x:.1%}"


def blame_line(loc: Any, notes: Sequence[str] = (), tested: bool = False) -> list[str]:
    """Where the output error comes from: the carrier(s) with their share, the divergences that carry
    none, or the amplifier where many small ones carry it only together; the first op departing from
    the baseline where blame was not measured. ``tested``: the amplifier's well-conditioned form was
    re-run (the cause's line says how it went), so it is not proposed here."""
    if loc is None:
        return []
    b = loc.blame
    if b is None:
        d = loc.lead
        if d is None:
            return []
        return [f"first departs on its own at {_where(d)}"]
    size = ", ".join(f"{name}: up to {fmt(v)}" for name, v in b.outputs[:2])
    every = {name for name, _ in b.outputs}
    lines = []
    if b.carriers:
        for c in b.carriers[:2]:
            d = loc.local[c.divergence]
            mine = {name for name, _ in c.outputs}
            if c.alone >= c.needed and mine and mine != every and len(every) > 1:  # some outputs only
                how = "carries " + ", ".join(f"{_pct(v)} of {name}'s difference (up to {fmt(dict(b.outputs)[name])})"
                                            for name, v in c.outputs[:2])
            elif c.alone >= c.needed and d.within:  # a loop is injected whole: its share, not the op's alone
                how = f"is where its loop departs; the loop carries {_pct(c.alone)} of the output difference ({size})"
                how += _by_iteration(c, d.within[0])
            elif c.alone >= c.needed:
                how = f"carries {_pct(c.alone)} of the output difference ({size})"
            else:
                how = f"is needed for {_pct(c.needed)} of the output difference ({size}) together with others"
            lines.append(f"{_where(d)} {how}")
        carried = {name for c in b.carriers for name, _ in c.outputs}
        for name, v in b.outputs:
            if name not in carried and b.carriers and any(c.alone >= c.needed for c in b.carriers):
                lines.append(f"no local divergence found carries {name}'s difference (up to {fmt(v)})" +
                             ("; returning every intermediate changed the outputs, so it may arise only inside "
                              "a fusion" if any("returning every intermediate" in n for n in notes) else ""))
        if b.acting_together:
            ops = ", ".join(f"#{loc.local[k].op.index} {loc.local[k].op.primitive}" for k in b.acting_together)
            lines.append(f"{ops} matter only together: each alone carries almost none of it, leaving one out loses it"
                         if len(b.acting_together) > 1 else
                         f"{ops} carries almost none of it alone, yet leaving it out loses it: it acts with the others")
        if b.overlapping >= 2:
            lines.append(f"{len(b.carriers)} of the {len(loc.local)} divergences each carry 5% or more alone, "
                         f"{b.overlapping} of them half or more: the shares overlap, so no one op is the cause "
                         "(any of them sets off much the same difference; --verbose lists them)")
        elif len(b.carriers) > 2:
            more = len(b.carriers) - 2
            lines.append(f"{more} more divergence{'s carry smaller shares' if more > 1 else ' carries a smaller share'} "
                         "(--verbose)")
        if b.amplifier is not None:
            lines += _amplified(b.amplifier, "a small local error made large", tested)
    elif b.amplifier is not None:
        lines += _amplified(b.amplifier, f"no single divergence carries it: {len(loc.local)} small ones do together "
                            f"({_pct(b.together)}), amplified", tested)
    else:
        lines.append(f"no divergence found carries the output difference: together they reproduce {_pct(b.together)} "
                     "of it")
    if b.noise:
        # each measured alone below ``localize.blame.CARRIES`` (5%): a share that small, not nothing (and not
        # said to be rounding: they may depart as the carriers do)
        lines.append(f"{len(b.noise)} other ops depart on their own, each carrying under 5% of it alone"
                     if len(b.noise) > 1 else "1 other op departs on its own, carrying under 5% of it alone")
    if b.unmeasured:
        lines.append(f"{b.unmeasured} more were not replayed alone ({b.why_unmeasured}; --verbose)")
    return lines


def _by_iteration(c: Any, loop: Any) -> str:
    """'; by iteration: iteration 3 carries 32%, 5: 20% (5 of 8 iterations injected alone, those that add an
    error of their own)': the share of the output difference each iteration's own error carries alone."""
    if not c.iterations_measured:
        return ""
    trips = f" of {loop.trips}" if getattr(loop, "trips", None) else ""
    counted = (f"{c.iterations_measured}{trips} iterations injected alone, those that add an error of their own"
               if c.iterations_measured == c.iterations_with_error else
               f"{c.iterations_measured} of the {c.iterations_with_error} iterations that add an error of their own "
               "injected alone, largest first, within the work budget")
    if not c.iterations:
        return f"; no iteration alone carries 5% of it ({counted})"
    parts = [f"{t}: {_pct(v)}" if k else f"iteration {t} carries {_pct(v)}" for k, (t, v) in enumerate(c.iterations[:3])]
    more = f", {len(c.iterations) - 3} more" if len(c.iterations) > 3 else ""
    return f"; by iteration: {', '.join(parts)}{more} ({counted})"


def _amplified(a: Any, head: str, tested: bool = False) -> list[str]:
    """The amplifier's line (``head`` "by #6 sub ..."), and its well-conditioned form where one is known."""
    cond = f"; its inputs are up to {a.condition:.3g} times its result (cancellation)" if a.condition else ""
    lines = [f"{head} by #{a.index} {a.primitive} ({a.where}), which turns relative differences of {a.before:.2g} "
             f"into {a.after:.2g}{cond}: the program is ill-conditioned there"]
    if a.pattern and not tested:
        lines.append(f"{a.pattern}: {a.remedy} (proposed; not re-run)")
    return lines


# A model change's spec is "PATH [LABEL]"; the label names the transform of jaxparity.fixes it ran.
_MODEL_CHANGES = {"fixed model": "round_like_declared(fn)", "well-conditioned model": "well_conditioned(fn)",
                  "well-conditioned model, every site": "well_conditioned(fn)"}


# Model changes whose fix line says the change in its own words (the fix's description), not by its label.
_IN_WORDS = frozenset({"well-conditioned model", "well-conditioned model, every site", "stored constant",
                       "float32 accumulator", "float32 accumulators"})


def model_change(fix: Any, path: str | None = None) -> str | None:
    """'the model change well_conditioned(fn) on tflite' for a model change that was run; a runtime option's
    own words (the attribute set on the converted model); None otherwise."""
    if fix.kind == "runtime option" and fix.spec:
        return fix.description
    if fix.kind != "model change" or not fix.spec or " [" not in fix.spec:
        return None
    spec, _, label = fix.spec.partition(" [")
    label = label.removesuffix("]")
    if label in _IN_WORDS or label.endswith(" rewritten"):  # the change in words; the re-run says the path
        return fix.description
    return f"the model change {_MODEL_CHANGES.get(label, label)} on {path or spec}"


def _fix_state(fix: Any) -> str:
    """✓ restores parity, ◐ narrows the difference, ✗ does neither (the words after it say which)."""
    return "✓" if fix.verified else "◐" if narrows(fix) else "✗"



def fix_lines(e: Any, main: Any = None) -> list[str]:
    """Each fix as its re-run showed it, one line each: the verified ones, and the explaining cause's
    (``main``) own re-run where it did not verify (a fix is offered only for the cause confirmed)."""
    lines = []
    # The explaining cause's own re-run where it is not among the fixes (a partial one); the fixes carry
    # their cost, so the same re-run is recognised by its spec.
    own = main.proof if main is not None and main.proof is not None and all(
        (f.kind, f.spec) != (main.proof.kind, main.proof.spec) for f in e.fixes) else None
    for f in [*e.fixes, *([own] if own is not None else [])]:
        tried = f.kind == "model change" and (f.spec or "").endswith("[fixed model]")  # round_like_declared, said either way
        if not f.verified and not tried and (main is None or main.proof is None or (f.kind, f.spec) != (
                main.proof.kind, main.proof.spec)):
            continue
        what = model_change(f) or f"{f.kind} {f.spec or f.description}"
        # No run-time cost here: a timing moves with the machine's load, and this text is the same on an idle
        # laptop and a loaded CI runner (--verbose and --json show it: ``cost_words``).
        lines.append(f"{_fix_state(f)} {what}: {readable(rerun_words(f, e.path, e.baseline))}")
    return lines


def cost_words(f: Any) -> str:
    """A verified fix's measured run-time cost, warm (``Fix.cost``); "" where it was not timed."""
    if f.cost is None:
        return ""
    return ("no measurable cost (warm, within the timing's spread)" if f.cost == 0 else
            f"run time {f.cost:+.0%} (warm, timed with and without it)")


_BEFORE = re.compile(r"in (\d+) elements \(max (\d+) ULP\)")
_AFTER = re.compile(r"differs in (\d+) \(max (\d+) ULP\)|still differs from \S+ in (\d+) elements \(max (\d+) ULP")


def rerun_words(f: Any, path: str = "the path", baseline: str = "the baseline") -> str:
    """What the fix's re-run showed, from its numbers: parity, or how many elements and ULP before and after,
    and where the paths stay apart, what it did to each side's error against the f64 ideal."""
    if f.verified:
        within = "within the rewritten program's own rounding noise" in f.evidence or "own rounding noise of" in f.evidence
        return f.evidence if within else "parity restored"
    r = getattr(f, "rerun", None)
    if r is not None:
        (n0, u0, a0), (n1, u1, a1) = r.before, r.after
        verdict = {"narrows": "narrows, not parity", "no change": "no change"}.get(r.outcome, f"no closer to {baseline}")
        ulp = f"max {u0} → {u1} ULP" + (" (across zero: not a measure of the gap)" if r.across_zero else "")
        said = f"{verdict}: {n0} → {n1} elements differ, {ulp}, max abs {fmt(a0)} → {fmt(a1)}"
        if r.ideal is not None and r.outcome != "no change":
            p0, p1, b0, b1 = r.ideal
            theirs = f"{fmt(b0)} → {fmt(b1)}" if b1 != b0 else f"{fmt(b0)}"
            said += f"; max abs error against the f64 ideal: {path} {fmt(p0)} → {fmt(p1)}, {baseline} {theirs}"
            if p1 <= 0.75 * p0 and p1 <= 1.25 * b1:
                how = "more accurate than" if p1 < 0.8 * b1 else "as accurate as"
                said += f" ({path} {how} {baseline} with it: the rest of the difference is other roundings)"
        return said
    before, after = _BEFORE.search(f.evidence), _AFTER.search(f.evidence)
    if before is None or after is None:
        return f.evidence
    n0, u0 = before.groups()
    n1, u1 = (g for g in after.groups() if g is not None)
    verdict = "narrows, not parity" if narrows(f) else "no closer"
    return f"{verdict}: {n0} → {n1} elements differ, max {u0} → {u1} ULP"


def brief(e: Any, p: Any = None) -> list[tuple[str, str]]:
    """(label, text) lines of the short explanation of ``e`` (a ``PathExplanation``); ``p``: its
    ``PathResult`` for the triage."""
    lines: list[tuple[str, str]] = []
    loc = e.localization
    if not e.causes:  # explaining failed: its summary says why
        return [("", e.summary or f"{e.path} could not be explained")]
    amplified = loc is not None and loc.blame is not None and loc.blame.amplifier is not None
    unseen = loc is not None and loc.perturbed and bool(loc.local)  # per-op values not the program's own
    # an op of a perturbed capture says nothing about the program the path runs: the triage names none
    lead = loc.lead if loc is not None and not unseen else None
    # the baseline's own per-op values are its own whatever the path's capture did: where it keeps the declared
    # rounding at the divergence that carries the difference, its distance from the ideal is the program's
    kept = loc is not None and loc.lead is not None and loc.lead.declared_side == "baseline"
    t = triage(p, e.baseline, lead, amplified, kept) if p is not None else None
    if getattr(e, "rounding", None) is not None:
        leaves = [lf.name for lf in getattr(p, "leaves", ())] if p is not None else []
        name = leaves[e.rounding.output] if e.rounding.output < len(leaves) else "out"
        t = e.rounding.words(e.baseline, name)
    if t:
        lines.append(("triage", t))
    if unseen:
        together = loc.blame.together if loc.blame is not None else 0.0
        whole = next((m for n in e.notes if (m := re.search(r"^(\S+) converted \d+ of the \d+ calls it recorded "
                                                              r"whole \(([^)]*)\)", n))), None)
        why = (f": {whole.group(1)} converts {whole.group(2)} whole, and the program that returns every "
               "intermediate is converted primitive by primitive, another graph" if whole else "")
        ops = list(loc.cone) or [d.op for d in loc.local] or list(loc.program)
        at = f"; the ops it covers: {span(ops, limit=3)}" if ops else ""
        lines.append(("where", f"no op-level view: returning every intermediate changes {e.path}'s outputs, and the "
                      f"divergences seen that way reproduce {together:.0%} of its output difference{why}{at}"))
        units = _dispatch_lines(e.dispatches, loc.program) if loc is not None and loc.program else []
        if units:  # the runtime's own units, their stored values captured without changing its outputs
            lines.append(("where", f"per dispatch ({e.path}'s own units, what each stores captured from its own run): "
                          f"{len(units)} store other values than the declared ops give on their inputs; "
                          + "; ".join(units[:3]) + (f"; {len(units) - 3} more in --json" if len(units) > 3 else "")))
    elif loc is not None and loc.perturbed and loc.cone:
        lines.append(("where", f"ops #{loc.cone[0].index}..#{loc.cone[-1].index} ({span(loc.cone)}) show no "
                      f"difference one by one, yet observing them changes {e.path}'s outputs: the difference arises "
                      f"where {e.path} computes them together"))
    tested = any(c.cause == "ill-conditioned" and c.status != "not run" for c in e.causes)
    where = [] if unseen else blame_line(loc, e.notes, tested)
    noise = [x for x in where if x.endswith("(noise)") or " more were not replayed alone" in x]  # what carries none
    lines += [("where", x) for x in where if x not in noise]
    d = loc.lead if loc is not None and not unseen else None
    main = explaining_cause(e.causes, d)
    if d is not None:
        if d.detail and not (main is not None and "never rounded" in main.evidence):  # else the cause says it
            lines.append(("", d.detail))
        lines += [("", x) for x in noise]
        # a known cause of the op computing otherwise (a variant, a reduced matmul precision, NaN ignored) is no wrong code
        other_way = main is not None and main.cause not in ("wrong-code", "unknown", "other-lowering")
        said = d.elements_said(e.path, e.baseline, other_way)
        if said is not None or d.elements is not None:
            said = said or d.elements.describe(e.path, e.baseline, d.within_noise_bound,
                                               d.unrounded_by(e.path, e.baseline), other_way)
            lines.append(("who", readable(said)))
    if main is None or main.cause == "unknown":
        # an experiment that could not run (a compiler that crashes under its flag) is no refutation: said
        failed = [c for c in e.causes if c.status == "not run" and c.evidence.startswith("the re-run failed")]
        untested = "; ".join(f"{short_title(c.title)} could not be tested ({_why_not(c.evidence)})" for c in failed[:2])
        lines.append(("cause", "not established: no known cause's experiment confirmed it (each is listed below)" +
                      (f"; {untested}" if untested else "") +
                      ("; the small local error above is amplified by the program itself" if amplified else "")))
    else:
        state = {"confirmed": "confirmed", "partly": "partly", "noise": "expected rounding noise, not a bug"}[main.status]
        evidence = main.evidence
        if main.proof is not None:  # the re-run is said on the fix's line
            cut = evidence.find("; " + main.proof.evidence[:40])
            evidence = evidence[:cut] if cut > 0 else evidence
        title = re.sub(r" \(e\.g\. .*\)$", "", main.title)
        title = title.removesuffix(" (expected rounding noise)") if main.status == "noise" else title
        at = f"; at fault: {_LAYERS.get(main.layer, main.layer)}" if main.layer else ""
        if getattr(e, "rounding", None) is not None and main.cause in ("other-lowering", "unknown"):
            # within the ops' error bounds (triage): another lowering of the same math, not a fault
            lines.append(("cause", f"{e.path} computes these ops in another order or fusion than {e.baseline}, "
                          "within their error bounds (rounding noise, not a bug)"))
        else:
            lines.append(("cause", f"{title} ({state}{at}): {readable(evidence)}"))
        if main.status == "noise":  # how the sums were ordered otherwise, where a mechanism shows it (a collective)
            lines += [("", f"{short_title(c.title)}: {readable(c.evidence)}") for c in e.causes
                      if c is not main and c.status == "confirmed" and (c.fix or "").startswith("nothing is wrong")]
    if main is not None and main.fix and any(f.verified for f in e.fixes) and not main.fix.startswith("nothing") \
            and not is_rerun(main) and not any(f.kind in ("model change", "runtime option") and f.verified
                                               for f in e.fixes):
        lines.append(("fix", main.fix))  # the cause's own fix, in words; its re-runs below
    if e.same_values:
        lines.append(("same", f"{e.path} gives {e.same_values}'s values bit for bit"))
    for text in fix_lines(e, main):
        lines.append(("fix", text))
    if getattr(e, "searched", ()) and not any(f.verified for f in e.fixes):
        lines.append(("searched", searched_line(e.searched)))
    real = t is not None and t.startswith(("a real divergence", "not noise"))
    exact_side = _exact_side(p, e.path, e.baseline)
    for line in advice(e):  # the fix or workaround of a cause that no re-run above shows
        head, _, rest = line.partition(": ")
        if real and rest.startswith("nothing is wrong") and main is not None and main.status == "noise" \
                and "× the model's own rounding noise" in (t or ""):
            # The carriers are sums within their bounds (the cause says so), yet the outputs are further apart
            # than the baseline's own error: one side's order is the less accurate one here. Both are said.
            rest = (f"summation order, as the cause says, but {e.path}'s sums are less accurate than "
                    f"{e.baseline}'s here (the outputs are further apart than {e.baseline}'s own rounding noise, "
                    "triage above): compare with a tolerance (the smallest passing --ulp / --atol is printed) "
                    "only if that accuracy is acceptable")
        elif real and rest.startswith("nothing is wrong"):
            rest = (f"not rounding noise: {e.path} differs from {e.baseline} beyond the model's own rounding noise "
                    f"(triage above), which {short_title(main.title) if main else 'this cause'} does not account for; "
                    "compare with a tolerance only once the divergence that carries it is understood"
                    + (f" ({exact_side})" if exact_side else ""))
        label, _, which = head.partition(" for ")
        if which and rest.startswith("nothing is wrong") and main is not None and main.status == "noise":
            continue  # the noise's own workaround says it, and the mechanism is said under the cause
        lines.append((label.lower(), f"(for {which}) {rest}" if which else rest))
    if getattr(e, "rounding", None) is not None:  # noise: nothing to report to anyone
        lines = [(k, v) for k, v in lines if not (k == "what to do" and v.startswith("report"))]
    return lines


def searched_line(searched: Sequence[Any]) -> str:
    """The fix search that found nothing, in one line: how many changes, how many of them were re-run."""
    n = len(searched)
    ran = sum(f.ran for f in searched)  # the others were ruled out before any run
    how = ("each re-run; none restored parity" if ran == n else
           "each ruled out without a re-run: none could restore parity" if ran == 0 else
           f"{ran} re-run, none restored parity; {n - ran} ruled out without a re-run")
    return (f"{n} change{'s' if n != 1 else ''} at the carrying op (other formulations, guards, wider dtypes, the "
            f"runtime's settings), {how} (--verbose lists each and why)")


def _exact_side(p: Any, path: str, baseline: str) -> str | None:
    """Where one side's outputs are the f64 ideal's exactly and the other's are not (a threshold one side
    crossed wrongly), which side that is, in words; None otherwise."""
    leaves = [lf for lf in getattr(p, "leaves", ()) if lf.error_vs_f64 is not None and lf.baseline_error_vs_f64 is not None]
    if not leaves:
        return None
    mine = max(lf.error_vs_f64.max_abs for lf in leaves)
    theirs = max(lf.baseline_error_vs_f64.max_abs for lf in leaves)
    if mine == 0 < theirs:
        return f"{path}'s outputs are the f64 ideal's exactly and {baseline}'s are not: {baseline} is the side that is wrong"
    if theirs == 0 < mine:
        return f"{baseline}'s outputs are the f64 ideal's exactly and {path}'s are not: {path} is the side that is wrong"
    return None


def width_of(labels: Sequence[str]) -> int:
    return max((len(x) for x in labels), default=0)


_LEADS = {"cause": "Cause: ", "fix": "Fix: ", "workaround": "Workaround: ", "what to do": "What to do: "}


def sentences(e: Any) -> str:
    """The short explanation as prose (``PathExplanation.summary``: the JSON's and the pytest message's):
    the lines of ``brief`` without the triage, which needs the comparison; what remains after a partial
    fix follows, explained the same way."""
    parts = []
    for label, text in brief(e):
        text = _LEADS.get(label, "") + text
        parts.append(text[:1].upper() + text[1:])
    said = f"{e.path} against {e.baseline}: " + " ".join(p if p.endswith(".") else p + "." for p in parts)
    if e.remainder is not None:
        said += f" What remains with {e.applied} applied: " + e.remainder.summary
    return readable(said)


def _short_form(name: str) -> str:
    if name.startswith("ordered:"):
        return f"its sums added in {name.split(':', 1)[1]}'s own order"
    if name.startswith("blocked:"):
        return f"float32 inside, its contraction accumulated {name.split(':')[1]} terms at a time in its narrow output"
    return {"f32": "float32 inside, its contraction rounded once", "f32-kept": "float32 inside"}.get(name, name)


def _dispatch_lines(findings: Sequence[Any], infos: Sequence[Any], limit: int = 6) -> list[str]:
    """A line per dispatch (``PathExplanation.dispatches``) that stores other values than the program's declared ops give on its inputs, the
    most differing first: "main_dispatch_6 (#16..#26: dot_general, add, tanh; model.py:21): 143 of 256 stored
    elements differ, up to 19 ULP; reproduced by float32 inside, ...". ``infos``: the program's ops (``OpInfo``,
    as ``Localization.program`` holds them)."""
    lines = []
    for f in sorted((f for f in findings if f.differ), key=lambda f: (-f.differ / max(f.size, 1), -f.max_ulp))[:limit]:
        ops = [infos[i] for i in f.ops]
        where = sorted({op.user_source or op.source or "?" for op in ops})
        prims = ", ".join(dict.fromkeys(op.primitive for op in ops))
        how = f"reproduced by {_short_form(f.reproduced_by)}" if f.reproduced_by else "no formulation tried reproduces it"
        lines.append(f"{f.name} (#{f.ops[0]}..#{f.ops[-1]}: {prims}; {', '.join(where[:3])}): {f.differ} of {f.size} "
                     f"stored elements differ, up to {f.max_ulp} ULP; {how}")
    return lines
