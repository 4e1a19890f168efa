"""A hunt as people read it: the terminal report (80 columns), its progress lines, and an HTML page with the
search's progress plotted. Each renders a ``HuntResult`` and nothing else."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

from .result import Finding, HuntResult

__all__ = ["progress_line", "render_html", "render_text", "write_html"]

SHOWN = 5  # kinds of divergence in the terminal report (the JSON and HTML hold every one)


def _wrap(label: str, text: str, width: int, indent: int = 9) -> list[str]:
    """``label`` then ``text`` wrapped at ``width``, continued under the text; words are never broken, but a
    word wider than the column (a file's whole path) breaks after a '/' (or, with none, at the column)."""
    return [f"{label:<{indent}}{ln}" if i == 0 else " " * indent + ln
            for i, ln in enumerate(_lines(text, width - indent))]


def _lines(text: str, width: int) -> list[str]:
    out = []
    for line in textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]:
        while len(line) > width:
            cut = line.rfind("/", 0, width) + 1 or width
            out.append(line[:cut])
            line = line[cut:]
        out.append(line)
    return out


def _size(value: float) -> str:
    if math.isinf(value):
        return "NaN/inf"
    return "0" if value == 0 else f"{value:.2g}"


def progress_line(state: Any, budget: int) -> str:
    """One line per round: evaluations, the worst difference so far and its kind, the sites reached."""
    n, severity, kind, seconds = state.progress[-1]
    best = state.best.divergence if state.best is not None else None
    worst = "nothing differs yet" if best is None or best.kind == "none" else (
        f"worst: {kind} ({_size(severity)} of its scale)" if not math.isinf(severity) else f"worst: {kind}")
    reached = len(state.first_reach)
    return f"{n:>6,}/{budget:,}  {worst}  {reached} at hazard  {seconds:.1f} s"


def _finding_lines(i: int, f: Finding, r: HuntResult, width: int) -> list[str]:
    lines = _wrap(f"{i}.", f"{f.kind}{'' if f.breaks else ' (within the tolerance)'}: {f.describe()}", width, 4)
    where = f" of island {f.island + 1}" if r.islands > 1 else ""
    body = [("found", f"at evaluation {f.evaluation}{where}: {f.origin}")]
    if f.reached:
        body.append(("at", "; ".join(f.reached)))
    if f.inputs_file:
        body.append(("input", f.inputs_file))
        body.append(("explain", f"jaxparity explain {r.case_spec or r.case} --paths {r.baseline},{r.path} "
                                f"--inputs {f.inputs_file}"))
    if f.lead or f.cause:  # the explain command's own words
        body.append(("where", f.lead or ""))
        body.append(("why", f.cause or ""))
        if f.fix:
            body.append(("fix", f"✓ {f.fix} (verified by its re-run)"))
    elif f.explanation:
        body.append(("why", f.explanation))
    for label, text in body:
        lines += _wrap(f"    {label}", text, width, 13)
    return lines


def render_text(r: HuntResult, width: int = 80, verbose: bool = False) -> str:
    """The report: what was searched, the worst input of each kind, the regions reached, the summary."""
    out = [f"jaxparity hunt {r.case}: {r.path} against {r.baseline}"]
    for k, line in enumerate(r.domain):
        out += _wrap("domain" if k == 0 else "", line, width)
    out += _wrap("", f"({r.domain_source})", width)
    stop = f"budget {r.budget:,}" + (f", time {r.time_limit:g} s" if r.time_limit else "")
    islands = f", {r.islands} islands" if r.islands > 1 else ""
    out += _wrap("search", f"{r.evaluations:,} evaluations ({stop}, seed {r.seed}{islands}) in {r.seconds:.1f} s; "
                 f"tolerance {r.tolerance}", width)
    out.append("")
    if not r.findings:
        out += _wrap("found", f"nothing: {r.path} and {r.baseline} agree bit for bit on every input evaluated", width)
    else:
        kinds = len(r.findings)
        out.append(f"found {kinds} kind{'s' if kinds > 1 else ''} of divergence, worst first"
                   + (f" ({SHOWN} shown; --json has all)" if kinds > SHOWN and not verbose else ""))
        for i, f in enumerate(r.findings if verbose else r.findings[:SHOWN], 1):
            out += _finding_lines(i, f, r, width)
    out.append("")
    out += _regions(r, width)
    for note in r.notes:
        out += _wrap("note", note, width)
    out.append("")
    out += _lines(r.summary(), width)
    return "\n".join(out)


ROWS = 12  # sites in the terminal's regions table (the JSON and HTML hold every one)


def _regions(r: HuntResult, width: int) -> list[str]:
    """Which hazard sites the search brought to their hazard, and how often the paths then parted beyond
    rounding: the sites reached first, those where the paths parted most first of all."""
    if not r.sites:
        return _wrap("regions", "no op of the program has a hazard the hunt aims at (thresholds, ties, overflow, "
                     "subnormals, large arguments, cancellation) on the varied inputs: the search was guided by "
                     "the divergence alone", width)
    reached = sorted((s for s in r.sites if s.reached), key=lambda s: (-s.diverged, -s.reached))
    unreached = [s for s in r.sites if not s.reached]
    out = _lines(f"regions reached: {len(reached)} of {len(r.sites)} hazard sites (reached: inputs at the hazard; "
                 "parted: of those, inputs on which the paths part beyond rounding)", width)
    shown = reached[:ROWS] or r.sites[:min(ROWS, 4)]
    rows = [(s.describe(), s.hazard, f"{s.reached:,}", f"{s.diverged:,}" if s.reached else "-",
             str(s.first) if s.first else "-") for s in shown]
    head = ("site", "hazard", "reached", "parted", "first")
    sizes = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    if sum(sizes) + 2 * len(sizes) > width:  # the site column gives way, never a word inside a cell
        sizes[0] = max(12, width - sum(sizes[1:]) - 2 * len(sizes))
    fmt = lambda row: "  ".join(  # noqa: E731
        c.rjust(sizes[i]) if i >= 2 else c.ljust(sizes[i]) for i, c in enumerate(row))
    out.append(fmt(head).rstrip())
    for row in rows:
        if len(row[0]) > sizes[0]:  # the site on a line of its own, the numbers under it
            out.append(row[0])
            row = ("",) + row[1:]
        out.append(fmt(row).rstrip())
    more = len(reached) - len(shown) if reached else 0
    if more > 0:
        out += _wrap("", f"{more} more site{'s' if more > 1 else ''} reached (--json and --html list every one)",
                     width, 0)
    if unreached:
        kinds: dict[str, int] = {}
        for s in unreached:
            kinds[s.hazard] = kinds.get(s.hazard, 0) + 1
        by = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
        many = len(unreached) > 1
        out += _wrap("", f"{len(unreached)} site{'s' if many else ''} never at {'their' if many else 'its'} hazard "
                     f"in this domain ({by})", width, 0)
    return out


# -- HTML -------------------------------------------------------------------------------------------

def _progress_svg(r: HuntResult) -> str:
    """The worst difference so far (log scale; NaN/inf on top) against evaluations."""
    from html import escape

    points = [(n, s) for n, s, _, _ in r.progress]
    if not points:
        return ""
    w, h, pad = 640, 260, 48
    finite = [s for _, s in points if s > 0 and math.isfinite(s)]
    lo = math.floor(math.log10(min(finite))) if finite else -8
    hi = max(math.ceil(math.log10(max(finite))) if finite else 0, lo + 1)
    top = hi + 1  # NaN/inf row
    n_max = max(n for n, _ in points) or 1

    def x(n: float) -> float:
        return pad + (w - 2 * pad) * n / n_max

    def y(s: float) -> float:
        v = top if math.isinf(s) else (math.log10(s) if s > 0 else lo)
        return h - pad - (h - 2 * pad) * (v - lo) / (top - lo)

    path = " ".join(f"{x(n):.1f},{y(s):.1f}" for n, s in points)
    ticks = "".join(f'<line x1="{pad}" x2="{w - pad}" y1="{y(10.0 ** k):.1f}" y2="{y(10.0 ** k):.1f}" '
                    f'stroke="#eee"/><text x="{pad - 6}" y="{y(10.0 ** k) + 4:.1f}" font-size="11" '
                    f'text-anchor="end">1e{k}</text>' for k in range(lo, hi + 1))
    first = (f'<line x1="{x(r.first_found):.1f}" x2="{x(r.first_found):.1f}" y1="{pad}" y2="{h - pad}" '
             f'stroke="#cf222e" stroke-dasharray="4 3"/><text x="{x(r.first_found) + 4:.1f}" y="{pad + 12}" '
             f'font-size="11" fill="#cf222e">first break</text>' if r.first_found else "")
    return (f'<figure id="progress"><svg width="{w}" height="{h}" role="img" aria-label="worst difference against '
            f'evaluations">{ticks}<text x="{pad - 6}" y="{y(float("inf")) + 4:.1f}" font-size="11" '
            f'text-anchor="end">NaN/inf</text><line x1="{pad}" x2="{w - pad}" y1="{h - pad}" y2="{h - pad}" '
            f'stroke="#888"/><text x="{w - pad}" y="{h - pad + 28}" font-size="11" text-anchor="end">'
            f'evaluations ({n_max:,})</text>{first}<polyline class="progress-line" points="{path}" fill="none" '
            f'stroke="#0072b2" stroke-width="2"/></svg><figcaption>{escape(_CAPTION)}</figcaption></figure>')


_CAPTION = "the worst difference found so far, against the output's scale (log), by evaluations"


def render_html(r: HuntResult) -> str:
    from html import escape

    from ..report.html import _CSS

    e = lambda x: escape(str(x))  # noqa: E731
    banner = ("pass", "no input breaks the tolerance") if r.passed else ("fail", "an input breaks the tolerance")
    findings = "".join(
        f'<div class="fix {"unverified" if f.breaks else "verified"}" id="finding-{i}"><b>{i}. {e(f.kind)}</b>: '
        f'{e(f.describe())}<br><span class="note">found at evaluation {f.evaluation}: {e(f.origin)}'
        + (f"; at {e('; '.join(f.reached))}" if f.reached else "") + "</span>"
        + (f"<br>input <code>{e(f.inputs_file)}</code>" if f.inputs_file else "")
        + (f"<pre>{e(f.explanation)}</pre>" if f.explanation else "") + "</div>"
        for i, f in enumerate(r.findings, 1))
    sites = "".join(f"<tr><td>{e(s.describe())}</td><td>{e(s.hazard)}</td><td>{e(s.what)}</td>"
                    f'<td class="num">{s.reached:,}</td><td class="num">{s.diverged:,}</td>'
                    f'<td class="num">{s.first or "-"}</td></tr>' for s in r.sites)
    notes = "".join(f'<p class="note">{e(n)}</p>' for n in r.notes)
    return (f"<!doctype html><html><head><meta charset=utf-8><title>jaxparity hunt {e(r.case)}</title>"
            f"<style>{_CSS}</style></head><body><h1 id=header>jaxparity hunt {e(r.case)}: {e(r.path)} against "
            f"{e(r.baseline)}</h1><div class='banner {banner[0]}' id=verdict>{e(banner[1])}</div>"
            f"<p id=summary>{e(r.summary())}</p><dl class=meta><dt>domain</dt><dd>{'<br>'.join(map(e, r.domain))}"
            f"<br><span class=note>{e(r.domain_source)}</span></dd><dt>search</dt><dd>{r.evaluations:,} "
            f"evaluations, seed {r.seed}, budget {r.budget:,}, {r.seconds:.1f} s</dd><dt>tolerance</dt>"
            f"<dd>{e(r.tolerance)}</dd></dl><h2>Progress</h2>{_progress_svg(r)}"
            f"<h2>What it found</h2><div id=findings>{findings or '<p>nothing: the paths agree on every input'}"
            f"</div><h2>Regions reached</h2><table id=regions><tr><th>site</th><th>hazard</th><th>what</th>"
            f"<th class=num>reached</th><th class=num>parted</th><th class=num>first</th></tr>{sites}</table>"
            f"{notes}</body></html>")


def write_html(r: HuntResult, path: str | Path) -> None:
    Path(path).write_text(render_html(r), encoding="utf-8")
