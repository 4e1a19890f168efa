"""A divergence's verdict: the call and line that carry the output difference, the mechanism in one sentence,
the layer at fault, which side is right, the trigger, and the fixes as their re-runs showed them, reconciled
from the explanations of every path with the same values."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ...report.format import explaining_cause, fmt, readable, required_tolerance, short_title
from ...verdict import Carrier, Verdict
from .carriers import by_dispatch, carrier_at, ops_words, region, with_share
from .remedies import remedies

__all__ = ["carrier_at", "divergence", "size_words"]

# The layer a cause puts the fault in where its experiment does not say (``CauseVerdict.layer``).
_LAYER = {"excess-precision": "compiler", "narrow-rounding-skipped": "compiler", "algebraic-rewrite": "compiler",
          "fma-contraction": "compiler", "fast-math": "compiler", "fast-min-max": "compiler",
          "identity-rewrite": "compiler", "ieee-fold": "converter", "converter-decomposition": "converter",
          "stored-constant": "converter", "kernel-attribute": "converter", "device-arithmetic": "device",
          "matmul-precision": "device", "denormal-flush": "device", "math-library": "kernel",
          "narrow-accumulation": "kernel", "fused-kernel": "kernel", "kernel-accuracy": "kernel", "parameter-ignored": "converter", "ill-conditioned": "program",
          "amplification": "program", "rng-config": "program", "wrong-code": "compiler"}
# Causes whose experiment names the mechanism more closely than the table's title ("a kernel accurate in absolute
# terms only"): the headline says its words.
_TITLED = ("kernel-accuracy", "parameter-ignored")
# Catch-alls: they say that the path computes otherwise, not how.
_CATCH_ALL = ("unknown", "other-lowering", "path-option")


def size_words(p: Any, result: Any, amplified: bool = False) -> tuple[str, str, str]:
    """How far the path is from the baseline: (how many elements differ, by how much, against the model's own
    rounding noise: the baseline's distance from the f64 ideal, where that is known)."""
    leaves = [lf for lf in p.leaves if lf.diff is not None and not lf.diff.bitwise_equal and lf.diff.n_differ]
    if not leaves:
        return "", "", ""
    lf = max(leaves, key=lambda x: (x.diff.nan_mismatch, x.diff.max_abs if math.isfinite(x.diff.max_abs) else 1e308))
    d = lf.diff
    name = f"{lf.name}: " if len(result.outputs) > 1 else ""
    count = f"{name}{d.n_differ} of {d.size} elements"
    if d.nan_mismatch and d.nan_mismatch == d.n_differ:
        return count, "each a NaN or inf against a number", ""
    kind = "" if lf.dtype.startswith(("int", "uint", "bool")) else f"{d.max_ulp:,} ULP, "
    distance = f"up to {kind}max abs {fmt(d.max_abs)}" + (f", {d.nan_mismatch} NaN against a number"
                                                           if d.nan_mismatch else "")
    floor = lf.baseline_error_vs_f64.max_abs if lf.baseline_error_vs_f64 is not None else None
    scale = ""
    if floor is not None and math.isfinite(d.max_abs) and not lf.ideal_decides_otherwise:
        scale = (f"{d.max_abs / floor:.2g}× the model's own rounding noise" if floor > 0 else
                 f"{result.baseline} is exact here")
        if amplified and floor > 0:  # the program makes its own rounding large: said, as the cause says why
            from ...report.brief import _digits_lost

            scale += _digits_lost(lf, floor, result.baseline)
    return count, distance, scale


def divergence(group: Sequence[Any], found: Sequence[Any], result: Any, passes: bool, explained: bool) -> Verdict:
    """The verdict of ``group`` (``PathResult``s with the same values) from its members' explanations ``found``."""
    paths = tuple(q.spec for q in group)
    p = group[0]
    worst = p.worst
    loc0 = next((e.localization for e in found if e.localization is not None), None)
    count, distance, scale = size_words(p, result, loc0 is not None and loc0.blame is not None and
                                        loc0.blame.amplifier is not None)
    base = dict(kind="divergence", paths=paths, baseline=result.baseline, passes=passes, size=f"{count}, {distance}",
                scale=scale,
                tolerance=required_tolerance(worst, result.baseline) if worst is not None else None,
                outputs=tuple(lf.name for lf in p.leaves if lf.diff is not None and lf.diff.n_differ))
    if not found or not explained:
        why = ("not explained: the explanation was stopped before it reached " + ", ".join(paths) if found or
               result.explanations else "explain it (`jaxparity explain`, `.explain()`) for the op, the cause and the fix")
        right, words = _right(None, p, p.spec, result.baseline, paths)
        return Verdict(**base, explained=False, advice=why, right=right, right_words=words)  # type: ignore[arg-type]
    e = min(found, key=_strength)
    errors = _stage_errors(found)
    if not e.causes:  # explaining it failed: the comparison stands
        right, words = _right(None, p, p.spec, result.baseline, paths)
        return Verdict(**base, stage_errors=errors or (e.summary,), right=right, right_words=words,  # type: ignore[arg-type]
                       advice="the explanation failed (said above); the comparison stands")
    loc = e.localization
    unseen = loc is not None and loc.perturbed and bool(loc.local)
    lead = loc.lead if loc is not None and not unseen else None
    main = _main(e, lead)
    carriers = _carriers(loc, result) if loc is not None and not unseen else (by_dispatch(e, loc) or region(loc))
    fixes = remedies(found, paths, result.baseline, loc)
    right, right_words = _right(lead, p, e.path, result.baseline, paths)
    trigger = lead.elements.trigger.words() if lead is not None and lead.elements is not None and \
        lead.elements.trigger is not None else None
    mechanism, cause, layer = _mechanism(main, e, lead, unseen)
    if main is not None and cause == main.cause and main.trigger:  # measured over the op's domain: its words
        trigger = main.trigger
    title = (main.title.split(" (", 1)[0] if main is not None and (cause in _TITLED or _retitled(main)) else
             _name(cause) if cause is not None else None)
    holds = any(f.holds for f in fixes)
    also = _also(main, e)
    if title and also:  # the headline names both mechanisms
        title += " and " + " and ".join(n.removeprefix("also ").split(" (", 1)[0] for n in also)
    return Verdict(
        **base,  # type: ignore[arg-type]
        carriers=carriers, mechanism=mechanism, title=title, cause=cause, layer=layer, right=right, right_words=right_words,
        trigger=trigger, fixes=fixes, tried=None if holds else _tried(e), remains=_remains(e),
        advice=_advice(main, e) if not holds or cause == "wrong-code" else _in_words(main, fixes), stage_errors=errors,
        notes=also + _unreached(p, carriers) + _notes(e, unseen))


_NAMES = {"fma-contraction": "FMA contraction", "ieee-fold": "NaN or inf ignored", "other-lowering":
          "another lowering or kernel", "path-option": "an option of the path", "math-library": "another math library",
          "rng-config": "random number generator configuration", "ill-conditioned": "an ill-conditioned form",
          "semantic-variant": "another semantics of the op", "device-arithmetic": "the device's arithmetic",
          "kernel-accuracy": "the kernel's accuracy"}


def _name(cause: str) -> str:
    """The cause's short name, for a headline: "excess precision", "narrow accumulation", "FMA contraction"."""
    return _NAMES.get(cause, cause.replace("-", " "))


def _strength(e: Any) -> tuple:
    """Which member's explanation speaks for the group: one that explained at all, with a mechanism rather than
    a catch-all, with an op-level view, a departure from the program over a noise judgement."""
    main = _main(e, e.localization.lead if e.localization is not None else None)
    return (not e.causes, main is None, main is not None and main.cause in _CATCH_ALL, e.localization is None)


def _main(e: Any, lead: Any) -> Any:
    """The cause that explains the divergence, of those that say the path departs: a cause judged as noise is
    no mechanism of a divergence (the noise judge did not pass it)."""
    return explaining_cause([c for c in e.causes if c.status != "noise"], lead)


def _mechanism(main: Any, e: Any, lead: Any, unseen: bool) -> tuple[str, str | None, str | None]:
    """(one sentence, the cause's id, the layer at fault)."""
    if main is None or main.cause == "unknown":
        tested = sum(c.status != "not run" for c in e.causes)
        where = ("no op-level view (returning every intermediate changes its outputs)" if unseen else
                 f"it departs first at #{lead.op.index} {lead.op.primitive}" if lead is not None else
                 "no op-level view")
        return (f"not established: {where}; none of the {tested} mechanisms tested reproduces it "
                "(--verbose lists each)", None, None)
    from ...report.format import is_rerun

    # the carrier's line is said on its own line: "(model.py:24)" after an op is left out here
    evidence = re.sub(r" \([\w./-]+\.py:\d+\)", "", _first_clause(readable(main.evidence)))
    partly = " (it explains part of the difference)" if main.status == "partly" else ""
    layer = main.layer or _LAYER.get(main.cause)
    if is_rerun(main) and not _retitled(main):  # decided by re-running the whole program: what the re-run did
        spec = main.experiment.removeprefix("re-ran ").removeprefix("ran ").split(" ", 1)[0]
        held = any(f.verified and f.spec == spec for f in e.fixes) or (main.proof is not None and main.proof.verified)
        outcome = ("restores parity" if held else "narrows the difference" if main.status == "partly" else
                   "moves the outputs")
        return f"{main.title}: re-running {spec} {outcome}{partly}", main.cause, layer
    name = main.title.split(" (", 1)[0] if _retitled(main) else _name(main.cause)
    return f"{name}: {evidence}{partly}", main.cause, layer


def _retitled(main: Any) -> bool:
    """A catch-all cause the fix search placed (``search.placed``: "a call the converter lowers whole, otherwise"):
    its own title says the mechanism, not the catch-all's."""
    from ..causes import CAUSES

    table = next((c.title for c in CAUSES if c.id == main.cause), None)
    return main.cause in _CATCH_ALL and table is not None and main.title != table


def _first_clause(text: str, limit: int = 320) -> str:
    """The evidence's first statement: up to its first '; ' outside brackets, asides of over 60 characters
    in brackets left out (``--verbose`` and the JSON keep the whole)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            if depth == 0:
                start = i
            depth += 1
        elif ch in ")]" and depth:
            depth -= 1
            if depth == 0 and i - start > 60:
                out.append((start, i + 1))
        elif depth == 0 and text.startswith("; ", i):
            text = text[:i]
            break
    for a, b in reversed(out):
        if b <= len(text):
            text = text[:a].rstrip() + text[b:]
    if len(text) > limit:
        text = text[:text.rfind(" ", 0, limit)] + " …"
    return text


def _carriers(loc: Any, result: Any) -> tuple[Carrier, ...]:
    """The ops that carry the output difference, each with the outputs it carries; where none carries it
    alone, the amplifier that makes many small differences large, or the first op that departs."""
    b = loc.blame
    many = len(result.outputs) > 1
    out: list[Carrier] = []
    if b is not None and b.carriers:
        every = {name for name, _ in b.outputs}
        for c in b.carriers[:3]:
            d = loc.local[c.divergence]
            mine = tuple(name for name, v in c.outputs if v >= 0.05)
            alone = c.alone >= c.needed
            share = (f"carries {_pct(c.alone)} of the difference" if alone else
                     f"is needed for {_pct(c.needed)} of the difference, with others")
            if c.divergence in b.acting_together:
                others = ops_words([loc.local[k].op for k in b.acting_together if k != c.divergence])
                share = (f"matters only together with {others}: alone it carries almost none of the "
                         f"difference, left out it loses {_pct(c.needed)}" if others else
                         f"carries almost none of it alone, yet leaving it out loses {_pct(c.needed)}: it acts "
                         "with the others")
            if many and mine and set(mine) != every:
                share = "carries " + ", ".join(f"{_pct(v)} of {name}'s difference" for name, v in c.outputs[:2]
                                              if v >= 0.05)
            if d.within and alone:  # a loop is injected whole: its share, and each iteration's
                from ...report.brief import _by_iteration

                share = f"carries {_pct(c.alone)} of the difference with its loop" + _by_iteration(c, d.within[0])
            out.append(carrier_at(d.op, share, mine if mine != tuple(every) else (), d.within))
        if b.overlapping >= 2 and len(out) > 1 and not many:
            out = out[:1]  # shares that overlap: any one of them sets off much the same difference
            out[0] = with_share(out[0], out[0].share + f" (and {b.overlapping - 1} others overlap with it: any one "
                                 "sets off much the same difference)")
    elif b is not None and b.amplifier is not None:
        a = b.amplifier
        op = next((o for o in loc.program if o.index == a.index), None)
        share = (f"amplifies {len(loc.local)} small departures (together {_pct(b.together)} of the difference): "
                 f"relative differences of {a.before:.2g} become {a.after:.2g}")
        if op is not None:
            out.append(carrier_at(op, share))
    elif loc.lead is not None:
        d = loc.lead
        out.append(carrier_at(d.op, "is the first op that departs on its own (its share was not measured)", (), d.within))
    else:
        out += region(loc)
    return tuple(out)


def _pct(x: float) -> str:
    return f"{x:.0%}" if x < 0.995 else "100%" if x >= 0.9995 else f"{x:.1%}"


def _right(lead: Any, p: Any, path: str, baseline: str, paths: Sequence[str]) -> tuple[str | None, str | None]:
    """Which side is right: on the carrying op's own inputs (each side against the correctly rounded result),
    else by the outputs' distance from the f64 ideal."""
    ev = lead.elements if lead is not None else None
    wrong = ev.wrong_side() if ev is not None else None
    if ev is not None and ev.sum_bound_ratio is not None and not ev.composite:  # a sum: by its error bound, not ULP
        mine, theirs = ev.sum_bound_ratio
        wrong = None if mine <= 1 and theirs <= 1 else "both" if mine > 1 and theirs > 1 else \
            "path" if mine > 1 else "baseline"
    who = ", ".join(paths)
    if wrong is not None and ev is not None:
        if ev.sum_bound_ratio is not None:  # a sum: against the error bound of one summation order
            mine, theirs = ev.sum_bound_ratio
            on = (f"on the op's own inputs, {baseline} is {_bound(theirs)} the error bound of this sum, "
                  f"{path} {_bound(mine)}")
        else:
            on = (f"on the op's own inputs, {baseline} is {_ulps(ev.baseline_ulp)} from the correctly rounded result, "
                  f"{path} {_ulps(ev.path_ulp)}")
        if wrong == "path":
            return baseline, on
        if wrong == "baseline":
            return who, on
        return "neither", on
    side = _closer(p, baseline)
    if side is None:
        return None, None
    return side, "nearer the f64 ideal at the outputs (not judged on any op)"


def _bound(r: float) -> str:
    """'within' or '145× beyond' (of a sum's error bound)."""
    return "within" if r <= 1 else f"{r:,.0f}× beyond" if r >= 10 else f"{r:.2g}× beyond"


def _ulps(n: int) -> str:
    """'3 ULP', or 'a NaN against a number' for the distance experiments give a NaN against a number."""
    from ...report.format import NAN_ULP

    return "a NaN against a number" if n >= NAN_ULP else f"{n:,} ULP"


def _closer(p: Any, baseline: str) -> str | None:
    worst = p.worst
    if worst is None or worst.ideal_uncertain_by is not None:
        return None
    return {"path": p.spec, "baseline": baseline}.get(worst.closer_to_f64 or "")


def _remains(e: Any) -> str | None:
    """Where the closest fix only narrows the difference: what remains with it applied, and its mechanism (the
    remainder's explanation, ``pipeline._remainder``), down the chain."""
    said, r = [], e
    while r.remainder is not None:
        applied, r = r.applied, r.remainder
        if not r.causes:
            said.append(f"with {applied}: what remains could not be explained")
            break
        lead = r.localization.lead if r.localization is not None and not r.localization.perturbed else None
        mechanism, _, layer = _mechanism(_main(r, lead), r, lead, lead is None)
        where = f" at {lead.op.user_source or lead.op.source}" if lead is not None else ""
        said.append(f"with {applied}: {mechanism}{where}")
    return "; then ".join(said) or None


def _tried(e: Any) -> str | None:
    from ...report.brief import searched_line

    return searched_line(e.searched) if e.searched else None


def _in_words(main: Any, fixes: Sequence[Any]) -> str | None:
    """Beside a verified option or flag, the change the cause itself calls for, in words, where it was found on the
    op's own values ("write the identity in the model" beside the flag that turns the rewrite off); None where a
    change of the model was verified (it is the fix shown) or the cause was decided by a whole-program re-run."""
    from ...report.format import is_rerun

    if main is None or not main.fix or main.fix.startswith(("nothing", "report")) or is_rerun(main):
        return None
    if any(f.kind in ("model change", "runtime option") and f.holds for f in fixes):
        return None
    options = {o.strip() for f in fixes if f.holds for o in f.change.split(",")}
    if any(o and o in main.fix[:60] for o in options):
        return None  # the cause's own words lead with the option a fix line shows verified
    return readable(main.fix)


def _advice(main: Any, e: Any) -> str | None:
    """What to do where no fix holds: the explaining cause's own advice (report it, a workaround), never "nothing is
    wrong" nor a tolerance for noise (this is a divergence: the noise judge did not pass it); where no cause
    explains it, nothing beyond the tolerance that would pass."""
    from ...report.format import fix_label

    if main is None or not main.fix or main.fix.startswith("nothing") or main.status == "noise":
        return None
    # a fix of the cause's own was re-run: its line says how it went; only what to do beside it is advice
    return readable(main.fix) if fix_label(main) in ("what to do", "workaround") else None


_FAILED = ("explaining failed", "the fix search stopped", "whether the difference is only rounding could not be judged",
           "per-op values of", "blame could not be measured", "loops could not be opened")


def _stage_errors(found: Sequence[Any]) -> tuple[str, ...]:
    """Stages that failed or experiments that could not run, as the text says them (never silently)."""
    out: list[str] = []
    for e in found:
        loc = e.localization
        for n in (*e.notes, *(loc.notes if loc is not None else ())):
            if n.startswith(_FAILED) and n not in out and not _limit(n):
                out.append(n)
        for c in e.causes:
            if c.status == "not run" and c.evidence.startswith("the re-run failed"):
                said = f"the {short_title(c.title)} experiment could not run: {c.evidence.removeprefix('the re-run failed ')}"
                if said not in out:
                    out.append(said)
    return tuple(out)


def _limit(note: str) -> bool:
    """A stage that could not run for a limit of the runtime it asked (a converter that cannot convert the program
    that returns every intermediate: ``PathError``; a runtime that refuses that other model, as IREE's 32
    bindings a dispatch), not a failure of jaxparity's: said as a note, not an error."""
    return note.startswith("per-op values of") and ("(PathError:" in note or "converted into another model" in note)


# Notes a verdict's block says: the input set where it is not the case's own; a file of outputs without per-op
# values (and that `jaxparity capture` writes one with them); a bundle captured under another JAX.
_SAID = ("explained on ", "outputs read from a file have no per-op values", "the bundle ")


def _also(main: Any, e: Any) -> tuple[str, ...]:
    """A second mechanism in the same difference, on elements of its own (``Cause.beside``): eager's flush of a
    subnormal row beside a 1-ULP rsqrt, an ill-conditioned form amplifying two summation orders of an offset row
    beside that flush. Said where it is confirmed and puts the difference in another layer than the cause that
    leads."""
    from ...verdict import LAYER_WORDS
    from ..causes import CAUSES

    if main is None or main.cause in _CATCH_ALL:
        return ()
    beside = {c.id for c in CAUSES if c.beside}
    lead = main.layer or _LAYER.get(main.cause)
    said = []
    for c in e.causes:
        layer = c.layer or _LAYER.get(c.cause)
        if c.status in ("confirmed", "partly") and c is not main and c.cause in beside and layer != lead:
            evidence = re.sub(r" \([\w./-]+\.py:\d+\)", "", _first_clause(readable(c.evidence)))
            part = " (its part of the difference)" if c.status == "partly" else ""
            said.append(f"also {_name(c.cause)} ({LAYER_WORDS.get(layer or '', layer)}): {evidence}{part}")
    return tuple(said)


def _unreached(p: Any, carriers: Sequence[Carrier]) -> tuple[str, ...]:
    """'also differs: out/1 ...' for each differing output that no carrier named reaches (each carrier says the
    outputs it carries; none says all): the verdict explains the others, and says so rather than say nothing."""
    named = [c.outputs for c in carriers]
    if not named or any(not outs for outs in named):
        return ()
    reached = {o for outs in named for o in outs}
    said = []
    for lf in p.leaves:
        d = lf.diff
        if d is None or not d.n_differ or d.bitwise_equal or lf.name in reached:
            continue
        said.append(f"{lf.name}: {d.n_differ} of {d.size} elements, max abs {fmt(d.max_abs)}")
    if not said:
        return ()
    return (f"also differs, not explained above (no carrier named reaches it): {'; '.join(said)}",)


def _notes(e: Any, unseen: bool) -> tuple[str, ...]:
    """What the input set was where it is not the case's own (said in the block), then what --verbose adds: the
    whole summary of the explanation that speaks for the group."""
    said = tuple(n for n in e.notes if n.startswith(_SAID) or _limit(n))
    return said + ((e.summary,) if e.summary else ())
