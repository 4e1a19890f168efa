"""The answer as every reporter says it, rendered from the verdicts alone (``jaxparity.verdict``): the headline
first (what differs, where, why, the fix), then one block per divergence or path that could not run, and one
line per group within rounding noise or identical. Nothing here decides anything: it only says the verdicts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..verdict import LAYER_WORDS, Lost, Remedy, Verdict

__all__ = ["block", "fix_line", "headline", "headline_of", "mark", "one_line", "text_lines"]

_LAYERS = LAYER_WORDS
_FAULT = {"converter": "the converter's fault", "runtime": "the runtime's fault", "program": "the program's fault",
          "compiler": "the compiler's fault",
          "environment": "its runtime is not installed here", "kernel": "the runtime's kernel's fault"}
_OUTCOME = {"parity": "parity", "noise": "within rounding noise", "toward f64": "toward the f64 ideal, which neither "
            "side was near", "narrows": "narrows, not parity",
            "no closer": "no closer", "no change": "no change", "failed": "the re-run failed"}


def mark(v: Verdict) -> str:
    """✓ passes, ✗ fails the gate; – a path that could not run and is not gated (a default path whose runtime
    is not installed here: shown, not failed on)."""
    return "✗" if not v.passes else "–" if v.kind == "could not run" else "✓"


def _names(paths: Sequence[str]) -> str:
    return ", ".join(paths)


def _count(n: int, word: str = "path") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def headline(result: Any) -> list[str]:
    """The whole result in a few sentences: each divergence with its line, mechanism and fix; then the paths
    that could not run, and those within rounding noise or identical."""
    verdicts: Sequence[Verdict] = result.verdicts
    n = sum(len(v.paths) for v in verdicts)
    base = result.baseline
    if not verdicts:
        refs = [p.spec for p in result.paths if p.reference]
        said = f" ({', '.join(refs)}: {'references' if len(refs) > 1 else 'a reference'}, shown and never judged)"
        return [f"no path was compared with {base}{said if refs else ''}: name one to compare (jit, export, "
                "savedmodel...)"]
    if len(verdicts) == 1 and verdicts[0].paths == (base,):
        v = verdicts[0]
        ran = [p.spec for p in result.paths if p.spec != base and p.status == "ok" and not p.reference]
        return [f"✗ the baseline {base} could not run ({_FAULT.get(v.fault or '', v.fault)}): "
                f"{_first(v.reason)}; nothing was compared" + (f"; {', '.join(ran)} ran: choose one of them as "
                                                                "--baseline" if ran else "")]
    lines: list[str] = []
    diverging = [v for v in verdicts if v.kind == "divergence"]
    for v in diverging:
        lines.append(headline_of(v, n))
    stopped = [v for v in verdicts if v.kind == "could not run"]
    by_fault: dict[tuple[str | None, bool], list[str]] = {}
    for v in stopped:
        by_fault.setdefault((v.fault, v.passes), []).extend(v.paths)
    for (fault, passes), paths in by_fault.items():
        lines.append(f"{'–' if passes else '✗'} {_names(paths)} could not run: {_FAULT.get(fault or '', fault)}")
    noise = [p for v in verdicts if v.kind == "noise" and v.baseline == base for p in v.paths]
    same = [p for v in verdicts if v.kind == "identical" and v.baseline == base for p in v.paths]
    calm = []
    if same:
        calm.append(f"{_names(same)} identical")
    if noise:
        calm.append(f"{_names(noise)} within rounding noise")
    for v in verdicts:  # measured against their counterpart (the same mode on the baseline's device)
        if v.kind in ("identical", "noise") and v.baseline != base:
            calm.append(f"{_names(v.paths)} {'identical to' if v.kind == 'identical' else 'within rounding noise of'} "
                        f"{v.baseline}")
    if result.hidden:  # every output shows nothing of the model: agreeing on them shows nothing either
        what = "; ".join(d.text for d in result.degenerate)
        agree = [p for v in verdicts if v.kind in ("identical", "noise") for p in v.paths]
        lines.insert(0, f"✗ nothing shown: {what}; " + (f"{_names(agree)} {'agrees' if len(agree) == 1 else 'agree'} "
                                                        f"with {base} on outputs that show nothing of the model"
                                                        if agree else "no path agrees"))
        return lines
    if calm and not diverging and not stopped:
        ok = all(v.passes for v in verdicts)
        hidden = "" if ok else " (on outputs that show nothing of the model)"
        if n == 1:
            v = verdicts[0]
            said = "identical to" if v.kind == "identical" else "within rounding noise of"
            lines.insert(0, f"{'✓' if ok else '✗'} {v.paths[0]} is {said} {v.baseline}{hidden}")
        else:
            every = "both paths" if n == 2 else f"all {_count(n)}"
            lines.insert(0, f"{'✓' if ok else '✗'} {every} agree with {base}: " + "; ".join(calm) + hidden)
    elif calm:
        lines.append("✓ " + "; ".join(calm))
    if result_lost(result) is not None:
        lines += lost_lines(result.lost)
    return lines


def result_lost(result: Any) -> Any:
    return getattr(result, "lost", None)


def lost_lines(lost: Lost) -> list[str]:
    """Where no path is near the f64 ideal (``verdict.Lost``), in one sentence: how far, where the program loses
    its digits, and the change toward the ideal as its re-run on every path showed it."""
    (base, err), others = lost.errors[0], lost.errors[1:]
    worst = max(others, key=lambda pe: pe[1], default=None)
    off = (f"{lost.output} has NaN or inf where it is a number, on every path" if not np.isfinite(err) else
           f"{lost.output} is {err:.3g} from it on {base}") + (
        f" ({worst[1]:.3g} on {worst[0]})" if worst and np.isfinite(err) and f"{worst[1]:.3g}" != f"{err:.3g}" else "")
    line = f"! no path is near the f64 ideal: {off}, where it reaches {lost.scale:.2g}"
    if lost.where is not None:
        c = lost.where
        line += f" — the digits are lost at {c.line or c.module or 'an op'} ({c.op})" + (
            ", where it overflows" if " overflows: " in lost.how else
            f", a {lost.how.split(':', 1)[0].split(',', 1)[0]}" if ": " in (lost.how or "") and not lost.how.startswith("its ") else
            f", where {lost.how}" if lost.how else "")
    if lost.change is not None and lost.verified:
        near = max(e for _, e in lost.after)
        line += f"; fix ✓ {short(lost.change)}: every path then within {near:.2g} of it"
    elif lost.change is not None:
        line += f"; tried {short(lost.change)}: {lost.tried or 'not every path came near it'}"
    elif lost.tried:
        line += f"; no change toward it: {lost.tried}"
    return [line]




def headline_of(v: Verdict, n: int | None = None) -> str:
    """One divergence in a sentence: '✗ 2 of 7 paths diverge from eager: onnx, onnx-ref — <mechanism> at
    model.py:12 (the converter); fix ✓ <change>, parity on onnx, onnx-ref'."""
    within = " (within the tolerance given)" if v.passes else ""
    verb = "diverges" if len(v.paths) == 1 else "diverge"
    if n is None or n == len(v.paths):
        return f"{mark(v)} {_names(v.paths)} {verb} from {v.baseline}{within}" + _why(v)
    return f"{mark(v)} {len(v.paths)} of {_count(n)} {verb} from {v.baseline}{within}: {_names(v.paths)}" + _why(v)


def _why(v: Verdict) -> str:
    """' — <mechanism> at <line> (<layer>); fix ✓ <change> on <paths>' for a divergence."""
    if not v.explained:
        return ""
    c = v.carriers[0] if v.carriers else None
    what = v.title or "mechanism not established"
    # your line where the op has one; else the module it sits in (a library model's), and the library's line
    where = ("" if c is None or (c.line is None and not c.module) else f" at {c.line}" if c.line and (c.user or not c.module)
             else f" in {_module(c.module)}" + (f" ({c.line})" if c.line else "") if c.module else "")
    layer = _LAYERS.get(v.layer, v.layer) if v.layer else None
    said = f" — {what}{where}" + (f" ({layer})" if layer and layer.removeprefix("the ") not in what else "")
    holding = v.holding
    if holding:
        f = holding[0]
        every = set(f.on) >= set(v.paths)
        said += f"; fix {_fix_mark(f)} {short(f.change, 80)}" + ("" if every and f.outcome == "parity" else
                                                      f", {_OUTCOME[f.outcome]} on {_on(f, v)}")
    elif v.fixes or v.tried:
        said += "; no fix restores parity"
    return said


def _module(name: str) -> str:
    """A module path without its top-level class where it is deep ("encoder/block/0/layer/1/layer_norm" of
    "FlaxT5ForConditionalGenerationModule/encoder/..."): the headline names where in the model, not the model."""
    parts = name.split("/")
    return "/".join(parts[1:]) if len(parts) > 3 else name


def _on(f: Remedy, v: Verdict) -> str:
    extra = [p for p in f.on if p not in v.paths]
    mine = [p for p in f.on if p in v.paths]
    return _names(mine + extra)


def _fix_mark(f: Remedy) -> str:
    return "✓" if f.holds else "◐" if f.outcome == "narrows" else "✗"


def fix_line(f: Remedy, v: Verdict, verbose: bool = False) -> str:
    """'✓ xla_allow_excess_precision=false: parity on jit, export, savedmodel'; the change and its re-run's words
    in their first statement unless ``verbose``."""
    where = f" (changes {f.at})" if f.at else ""
    single = f.how and ";" not in f.how and " (" not in f.how  # one way to apply it: said that way
    said = f"{_fix_mark(f)} {f.how if single else f.change if verbose else short(f.change)}{where}: "
    if f.holds:
        said += f"{_OUTCOME[f.outcome]} on {_on(f, v)}"
    else:
        said += (f.words if verbose else short(f.words)) if f.words else _OUTCOME[f.outcome]
    if f.elsewhere:
        said += "; " + ", ".join(f"{_OUTCOME.get(o, o)} on {p}" for p, o in f.elsewhere)
    return said


def _first(text: str | None, limit: int = 240) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[:line.rfind(" ", 0, limit)] + " …"


def one_line(v: Verdict) -> str:
    """A group within rounding noise or identical, in one line."""
    notes = "".join(f"; note: {s}" for s in v.stage_errors)
    if v.kind == "identical":
        return f"{mark(v)} {_names(v.paths)}: identical to {v.baseline} ({v.judgement}){notes}"
    return f"{mark(v)} {_names(v.paths)}: rounding noise, {v.judgement} ({v.size}){notes}"


def block(v: Verdict, verbose: bool = False) -> tuple[str, list[tuple[str, str]]]:
    """(title, (label, text) lines) of a divergence or a path that could not run: rustc's shape, the line first
    (``-->``) with the user's code quoted, then the mechanism, who is at fault and who is right, the trigger,
    and each fix as its re-runs showed it."""
    lines: list[tuple[str, str]]
    if v.kind == "could not run":
        lines = [("why", v.reason or "")]
        if v.advice:
            lines.append(("do", v.advice))
        lines += [("", n) for n in v.notes if not n.startswith("at ")] if verbose else []
        at = next((n[3:] for n in v.notes if n.startswith("at ")), None)
        if at:
            lines.insert(0, ("-->", at))
        return f"{mark(v)} {_names(v.paths)} could not run: {_FAULT.get(v.fault or '', v.fault)}", lines
    size = v.size if verbose else v.size.split(", ", 1)[0] + (" differ" if " elements" in v.size else "")
    title = f"{mark(v)} {_names(v.paths)}: " + ", ".join(x for x in (size, v.scale) if x)
    lines = []
    for k, c in enumerate(v.carriers if verbose else v.carriers[:2]):
        where = " in ".join(x for x in (c.op, c.module) if x)
        loop = f"{c.loop}: " if c.loop else ""
        lines.append(("-->", f"{c.line or 'an unknown line'} {loop}{where}: {c.share.removeprefix('carries ')}"))
        if c.code and (k == 0 or verbose):
            lines.append(("|", c.code))
    if v.mechanism:
        lines.append(("why", v.mechanism))
        # a second mechanism in the same difference (``verdict.divergence._also``)
        lines += [("also", n.removeprefix("also ")) for n in v.notes if n.startswith("also ")
                  and not n.startswith("also differs")]
    fault = []
    if v.layer:
        fault.append(f"{_LAYERS.get(v.layer, v.layer)} is at fault")
    if v.right and (v.right_words or "").startswith("nearer"):  # not judged on an op: only the outputs' distance
        fault.append(f"{v.right} is {v.right_words}")
    elif v.right:
        fault.append(("neither side is right" if v.right == "neither" else f"{v.right} is right")
                     + (f": {v.right_words}" if v.right_words else ""))
    if fault:
        lines.append(("who", "; ".join(fault)))
    if v.trigger:
        lines.append(("when", v.trigger))
    for f in (v.fixes if verbose else v.holding or v.fixes[:1]):
        how = f": {f.how}" if f.how and (";" in f.how or " (" in f.how) and (f.holds or verbose) else ""
        lines.append(("fix", fix_line(f, v, verbose) + how))
    if v.remains:
        lines.append(("then", v.remains))
    if v.tolerance and (verbose or not v.holding):
        said = v.tolerance if verbose else re.sub(r" \([^()]*(\([^()]*\)[^()]*)*\)", "", v.tolerance)
        lines.append(("gate", f"would pass with {said}" if said.startswith("--") else said))
    if v.tried:
        lines.append(("tried", v.tried))
    if v.advice:
        lines.append(("do", v.advice))
    for s in v.stage_errors:
        lines.append(("note", s))
    lines += [("note", n) for n in v.notes if n.startswith(("explained on ", "per-op values of", "the bundle ",
                                                             "outputs read from a file have no per-op values",
                                                             "also differs, not explained above"))]
    return title, lines


def text_lines(result: Any, verbose: bool = False) -> list[str]:
    """The answer as plain lines (a pytest message, a notebook's text): the headline, then each block with its
    labels, then the groups within rounding noise or identical."""
    lines = list(headline(result))
    for v in result.verdicts:
        if v.kind in ("divergence", "could not run"):
            title, body = block(v, verbose)
            lines.append(title)
            lines += [f"  {label} {text}".rstrip() if label else f"      {text}" for label, text in body]
    calm = [v for v in result.verdicts if v.kind in ("noise", "identical")]
    if calm and len(calm) < len(result.verdicts):
        lines += [one_line(v) for v in calm]
    return lines


def short(text: str, limit: int = 160) -> str:
    """A change or a re-run's words in their first statement: up to the first ': ' or '; ' outside brackets,
    asides in brackets left out (``--verbose`` and the JSON keep the whole)."""
    out: list[list[int]] = []
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
            if depth == 1:
                out.append([i, -1])
        elif ch in ")]" and depth:
            depth -= 1
            if depth == 0:
                out[-1][1] = i + 1
        elif depth == 0 and (text.startswith("; ", i) or text.startswith(": ", i)) and i > 20:
            cut = i
            break
    kept = text[:cut]
    for a, b in reversed([(a, b) for a, b in out if 0 <= b <= cut and b - a > 60]):
        kept = kept[:a].rstrip() + kept[b:]
    kept = kept.strip()
    return kept if len(kept) <= limit else kept[:kept.rfind(" ", 0, limit)] + " …"
