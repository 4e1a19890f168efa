"""Self-contained HTML report: one file that works offline (inline CSS, charts as inline SVG, no JS
libraries, nothing fetched from the network).

It renders a ``ComparisonResult`` and nothing else, in the same words as the terminal report
(``report.format``): a header, the paths × outputs matrix, per-op drift along the program, ULP
histograms, each explanation with its evidence, and the values of tiny outputs. Every string that
comes from the user, the program or the compiler is escaped.

Stable hooks for tests and styling: ``id="header"``, ``id="verdict"``, ``id="summary"`` (cells
``class="verdict-<verdict>"``), ``id="findings"``, ``id="drift"`` (one ``<polyline class="drift-line">``
per explained path), ``id="histograms"``, ``id="explain-<path>"``, ``id="local-<path>"``,
``id="hlo-<path>"``, ``id="fingerprint-<path>"``, ``id="causes-<path>"``, ``id="fix-<path>-<n>"``,
``id="advice-<path>-<n>"`` (the fix or workaround no re-run verified), ``id="values"``, ``id="howto"``.
"""

from __future__ import annotations

import math
import re
from html import escape
from pathlib import Path
from typing import Any

from ..metrics import dtype_class
from ..result import ComparisonResult, LeafResult, PathResult
from .explanation import (blame_legend, blame_needed_shown, group_explanations, iteration_growth, layer_growth,
                          local_distance)
from .format import (HUGE_ULP, HUGE_ULP_NOTE, NAN_ULP, advice, devices_line, fmt, leaf_line, module_lines, path_line, producer, readable, summary_line,
                     ulp_text, values_text)

__all__ = ["render_html_report", "write_html"]

# One colour per explained path in the drift chart (colour-blind-friendly Okabe-Ito order).
_LINE_COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")

_CSS = """
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#fff;--soft:#f6f8fa;
--ok:#1a7f37;--okbg:#dafbe1;--warn:#9a6700;--warnbg:#fff8c5;--bad:#cf222e;--badbg:#ffebe9;--grey:#6e7781}
*{box-sizing:border-box}
body{font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;color:var(--fg);
background:var(--bg);margin:0;padding:24px 32px 48px;max-width:1200px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:20px 0 6px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:8px 10px;white-space:pre-wrap;
overflow-wrap:anywhere;margin:4px 0 10px}
table{border-collapse:collapse;margin:6px 0 12px}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.wrap{overflow-wrap:anywhere;max-width:420px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}
dl.meta dt{font-weight:600;color:var(--muted)}dl.meta dd{margin:0;overflow-wrap:anywhere}
dl.brief{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:8px 0}
dl.brief dt{font-weight:600}dl.brief dd{margin:0;overflow-wrap:anywhere}
.banner{padding:8px 12px;border-radius:6px;font-weight:600;margin:12px 0}
.banner.pass{background:var(--okbg);color:var(--ok)}.banner.fail{background:var(--badbg);color:var(--bad)}
.verdict-baseline{background:var(--soft);font-weight:600}
.verdict-identical,.verdict-equal{background:var(--okbg);color:var(--ok)}
.verdict-within-tolerance{background:var(--warnbg);color:var(--warn)}
.verdict-differs,.verdict-error,.verdict-crashed,.verdict-timeout{background:var(--badbg);color:var(--bad);font-weight:600}
.verdict-unavailable{background:var(--soft);color:var(--grey)}
.matrix td.cell{text-align:right;min-width:90px;font-variant-numeric:tabular-nums}
.matrix td.cell small{display:block;font-weight:400;color:var(--muted)}
.finding{margin:2px 0}.note{color:var(--muted);font-size:13px}
[class^=status-]{white-space:nowrap}
.status-confirmed{color:var(--ok);font-weight:600}.status-partly{color:var(--warn);font-weight:600}
.status-noise{color:#0969da}.status-refuted,.status-not-run{color:var(--grey)}
.fix{border:1px solid var(--line);border-radius:6px;padding:8px 12px;margin:8px 0}
.fix.verified{border-left:4px solid var(--ok)}.fix.unverified{border-left:4px solid var(--bad)}
.fix.advice{border-left:4px solid var(--warn)}
.mark-ok{color:var(--ok);font-weight:600}.mark-partial{color:#a60;font-weight:bold}.mark-bad{color:var(--bad);font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:16px}
figure{margin:0}figcaption{font-size:13px;color:var(--muted)}
svg text{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif}
.legend span{display:inline-block;margin-right:16px}.legend i{display:inline-block;width:18px;height:3px;
vertical-align:middle;margin-right:4px}
.howto{background:var(--soft);border-radius:6px;padding:8px 12px;color:var(--muted)}
details>summary{cursor:pointer;color:#0969da}
.explain-summary{font-size:14.5px;max-width:1000px}
"""


def _e(x: Any) -> str:
    return escape("" if x is None else str(x), quote=True)


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")
    return s or "x"


def _shape(info: Any) -> str:
    return f"{info.dtype}[{','.join(map(str, info.shape))}]"


def _verdict_class(verdict: str) -> str:
    return "verdict-" + _slug(verdict)


# -- header and summary -------------------------------------------------------------------------
def _header(r: ComparisonResult) -> str:
    inputs = [f"{a.name} {_shape(a)}" for a in r.inputs]
    if len(inputs) > 6:  # one line per module: a model's layers, not its hundreds of leaves
        inputs_html = (f"<details><summary>{len(inputs)} inputs ({_e(r.input_source)})</summary>"
                       + "<br>".join(f"<code>{_e(i)}</code>" for i in module_lines(r.inputs)) + "</details>")
    else:
        inputs_html = ", ".join(f"<code>{_e(i)}</code>" for i in inputs) + f" ({_e(r.input_source)})"
    outputs = ", ".join(f"<code>{_e(f'{a.name} {_shape(a)}')}</code>" for a in r.outputs)
    env = r.environment or {}
    env_bits = []
    for key in ("python", "platform", "machine"):
        if env.get(key):
            env_bits.append(f"{key} {env[key]}")
    if env.get("devices"):
        env_bits.append("devices " + ", ".join(map(str, env["devices"])))
    if env.get("cpu_features"):
        env_bits.append("cpu " + ", ".join(map(str, env["cpu_features"])))
    packages = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items())
    rows = [
        ("source", f"<code>{_e(r.source)}</code>" if r.source else "—"),
        ("inputs", inputs_html or "—"),
        ("outputs", outputs or "—"),
        ("baseline", f"<code>{_e(r.baseline)}</code>"),
        ("tolerance", _e(r.tolerance.describe())),
        *((("devices", _e(devices)),) if (devices := devices_line(r)) is not None else ()),
        *((("warning", "<br>".join(_e(f"{d.text}: paths agree on it without computing the model")
                                   for d in r.degenerate)),) if r.degenerate else ()),
        ("environment", _e("; ".join(env_bits)) or "—"),
        ("packages", _e(packages) or "—"),
    ]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    banner = "pass" if r.passed else "fail"
    return (f'<header id="header"><h1>jaxparity: <code id="case">{_e(r.case)}</code></h1>'
            f'<dl class="meta">{dl}</dl>'
            f'<div id="verdict" class="banner {banner}">{_e(summary_line(r))}</div></header>')


def _cell(p: PathResult, leaf: LeafResult | None) -> str:
    if leaf is None:
        text = p.verdict
        return f'<td class="cell {_verdict_class(p.verdict)}" title="{_e(p.message or "")}">{_e(text)}</td>'
    d = leaf.diff
    if d is None:  # the baseline itself
        return f'<td class="cell {_verdict_class(p.verdict)}">baseline</td>'
    if d.bitwise_equal:
        verdict, main = "identical", "0 ULP"
    elif d.n_differ == 0:
        verdict, main = "equal", "0 ULP"
    else:
        verdict = "within tolerance" if d.within_tolerance else "differs"
        main = f"{d.max_ulp} ULP"
    sub = f"{d.n_differ}/{d.size} differ · abs {fmt(d.max_abs)}"
    if d.nan_mismatch:  # no distance: a NaN against a number is the worst there is
        main, sub = "NaN", f"{d.n_differ}/{d.size} differ · {d.nan_mismatch} NaN against a number"
    elif d.n_differ and dtype_class(d.dtype) in ("int", "uint", "bool"):  # integers: their absolute difference
        main, sub = f"by {d.max_ulp}", f"{d.n_differ}/{d.size} differ"
    title = leaf_line(leaf, "")
    return (f'<td class="cell {_verdict_class(verdict)}" title="{_e(title)}" data-max-ulp="{d.max_ulp}">'
            f'<span class="ulp">{_e(main)}</span><small>{_e(sub)}</small></td>')


def _summary(r: ComparisonResult) -> str:
    outs = [a.name for a in r.outputs] or ["(outputs)"]
    head = "".join(f"<th class='num'>{_e(o)}</th>" for o in outs)
    rows = []
    for p in r.paths:
        by_name = {lf.name: lf for lf in p.leaves}
        if p.leaves:
            cells = "".join(_cell(p, by_name.get(o)) for o in outs)
        else:
            cells = _cell(p, None) + "<td></td>" * (len(outs) - 1)
        err = p.worst.error_vs_f64 if p.worst is not None else (p.leaves[0].error_vs_f64 if p.leaves else None)
        ideal = "" if err is None or p.spec == "f64" else (
            f"{fmt(err.max_abs)}" + (" (a NaN where the ideal is a number, or the reverse)"
                                     if err.max_ulp is not None and err.max_ulp >= NAN_ULP else
                                     f" ({err.max_ulp} ULP)" if err.max_ulp is not None else ""))
        role = " <small class='note'>(reference)</small>" if p.reference else ""
        time = f"{p.seconds:.2f}s" if p.seconds else ""
        rows.append(f'<tr id="row-{_slug(p.spec)}"><th><code>{_e(p.spec)}</code>{role}</th>'
                    f'<td class="{"note" if p.reference else _verdict_class(p.verdict)}">{_e(p.verdict)}</td>{cells}'
                    f'<td class="num">{_e(ideal)}</td><td class="num">{time}</td></tr>')
    table = (f'<table class="matrix"><thead><tr><th>path</th><th>verdict</th>{head}'
             f'<th class="num">error vs f64</th><th class="num">time</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    findings = "".join(
        f'<div class="finding"><code>{_e(p.spec)}</code>: {_e(path_line(p, r.baseline))}'
        + "".join(f'<div class="note">{_e(n)}</div>' for n in p.notes) + "</div>"
        for p in r.paths)
    return (f'<section id="summary"><h2>Paths × outputs</h2>'
            f'<p class="note">Each cell: the largest distance from <code>{_e(r.baseline)}</code> in ULP (units in the '
            f'last place of the output dtype), then how many elements differ and the largest absolute difference.</p>'
            f'{table}</section><section id="findings"><h2>Findings</h2>{findings}</section>')


# -- charts --------------------------------------------------------------------------------------
def _plotted(loc: Any) -> list[Any]:
    """The drift points worth drawing: every op up to the first difference, then only the ops a
    difference can reach through the program's operands (not, e.g., a parameter's cast that no
    difference feeds, which would draw the line down to zero between every layer)."""
    if not loc.program:
        return sorted(loc.drift, key=lambda d: d.index)
    moved = {d.index for d in loc.drift if d.max_abs != 0}
    reached: set[int] = set()
    for op in loc.program:
        if op.index in moved or any((src := producer(o)) is not None and src[0] in reached for o in op.operands):
            reached.add(op.index)
    first = min(reached, default=math.inf)
    return sorted((d for d in loc.drift if d.index < first or d.index in reached), key=lambda d: d.index)


def _same_curves(series: list[tuple[str, Any]]) -> list[tuple[list[str], Any]]:
    """Paths whose drift and local divergences are identical share one line (else one hides another)."""
    groups: list[tuple[list[str], Any, tuple]] = []
    for path, loc in series:
        key = (tuple((d.index, d.max_abs) for d in loc.drift),
               tuple((ld.top_index, ld.where(), ld.max_ulp, ld.within_noise_bound) for ld in loc.local), loc.baseline)
        for names, _, k in groups:
            if k == key:
                names.append(path)
                break
        else:
            groups.append(([path], loc, key))
    return [(names, loc) for names, loc, _ in groups]


def _drift_chart(explanations: list[Any]) -> str:
    series = [(e.path, e.localization) for e in explanations
              if e.localization is not None and e.localization.drift]
    if not series:
        return ""
    W, H, L, R, T, B = 1000, 340, 64, 16, 24, 44
    pw, ph = W - L - R, H - T - B
    n_ops = max(max(d.index for d in loc.drift) for _, loc in series) + 1
    positive = [d.max_abs for _, loc in series for d in loc.drift if d.max_abs > 0 and math.isfinite(d.max_abs)]
    positive += [ld.max_abs for _, loc in series for ld in loc.local if ld.max_abs > 0 and math.isfinite(ld.max_abs)]
    if positive:
        lo = math.floor(math.log10(min(positive)))
        hi = math.ceil(math.log10(max(positive)))
    else:
        lo, hi = -8, 0
    if hi <= lo:
        hi = lo + 1
    floor = lo - 1  # zero (no difference) is drawn on this line, below every real value
    dec = hi - floor

    def x(i: float) -> float:
        return L + (i / max(n_ops - 1, 1)) * pw

    def y(v: float) -> float:
        lv = floor if v <= 0 or not math.isfinite(v) else max(math.log10(v), floor)
        return T + ph - (lv - floor) / dec * ph

    parts = [f'<svg id="drift-svg" viewBox="0 0 {W} {H}" width="100%" '
             f'style="max-width:{W}px" role="img" aria-label="per-op error along the program, log scale">',
             f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="#fff" stroke="#d0d7de"/>']
    # layer bands from the first series (name stacks cut to two levels)
    growth = layer_growth(series[0][1])
    if len(growth) > 1:
        for k, (layer, first, _mx, _ulp) in enumerate(growth):
            nxt = growth[k + 1][1] if k + 1 < len(growth) else n_ops
            if k % 2:
                parts.append(f'<rect x="{x(first):.1f}" y="{T}" width="{max(x(nxt) - x(first), 0):.1f}" '
                             f'height="{ph}" fill="#f6f8fa"/>')
            label = layer.split("/")[-1]
            parts.append(f'<text x="{x(first) + 4:.1f}" y="{T + 12}" font-size="10" fill="#656d76">'
                         f'{_e(label)}</text>')
    for k in range(floor, hi + 1):
        yy = T + ph - (k - floor) / dec * ph
        parts.append(f'<line x1="{L}" x2="{L + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eaeef2"/>')
        label = "0" if k == floor else f"1e{k}"
        parts.append(f'<text x="{L - 6}" y="{yy + 4:.1f}" font-size="11" text-anchor="end" fill="#656d76">{label}</text>')
    step = max(1, round(n_ops / 10 / 10) * 10) if n_ops > 20 else max(1, n_ops // 5 or 1)
    for i in range(0, n_ops, step):
        parts.append(f'<text x="{x(i):.1f}" y="{T + ph + 16}" font-size="11" text-anchor="middle" fill="#656d76">{i}</text>')
    parts.append(f'<text x="{L + pw / 2}" y="{H - 6}" font-size="12" text-anchor="middle" fill="#1f2328">'
                 'op index in the program (program order)</text>')
    parts.append(f'<text x="14" y="{T + ph / 2}" font-size="12" text-anchor="middle" fill="#1f2328" '
                 f'transform="rotate(-90 14 {T + ph / 2})">max abs difference (log)</text>')
    legend = []
    for s, (names, loc) in enumerate(_same_curves(series)):
        colour = _LINE_COLOURS[s % len(_LINE_COLOURS)]
        path = " = ".join(names)
        pts = " ".join(f"{x(d.index):.1f},{y(d.max_abs):.1f}" for d in _plotted(loc))
        parts.append(f'<polyline class="drift-line" data-path="{_e(path)}" fill="none" stroke="{colour}" '
                     f'stroke-width="1.6" stroke-linejoin="round" points="{pts}"><title>{_e(path)}</title></polyline>')
        drift_at = {d.index: d.max_abs for d in loc.drift}
        for ld in loc.local:
            v = drift_at.get(ld.top_index, ld.max_abs)
            hollow = ld.within_noise_bound
            parts.append(
                f'<circle class="local-mark" cx="{x(ld.top_index):.1f}" cy="{y(v):.1f}" r="{4 if hollow else 5}" '
                f'fill="{"#fff" if hollow else colour}" stroke="{colour}" stroke-width="1.5">'
                f'<title>{_e(path)} {_e(ld.where())}: diverges on its own, {ld.max_ulp} ULP'
                f'{" (within reduction noise)" if hollow else ""} — {_e(ld.op.user_source or ld.op.source or "")}'
                f'</title></circle>')
        same = " (identical curves)" if len(names) > 1 else ""
        legend.append(f'<span><i style="background:{colour}"></i>{" = ".join(f"<code>{_e(n)}</code>" for n in names)}'
                      f' vs <code>{_e(loc.baseline)}</code>{same}</span>')
    parts.append("</svg>")
    return (f'<section id="drift"><h2>How the difference grows along the program</h2>'
            f'<p class="note">For each op with a float result (x: position in the program), the largest absolute '
            f'difference between the path and the baseline at that op (y: log scale; the bottom line is no '
            f'difference). After the first difference, only ops a difference can reach are drawn (a cast of a parameter '
            f'that no difference feeds is left out). Filled dots: ops that diverge on their own; hollow dots: '
            f'ones within the error bound of a reduction. Shaded bands: layers.</p>'
            f'<div class="legend">{"".join(legend)}</div><figure>{"".join(parts)}</figure></section>')


def _histogram(p: PathResult, leaf: LeafResult, baseline: str) -> str:
    d = leaf.diff
    assert d is not None
    buckets = d.ulp_histogram
    W, H, L, B, T = 300, 160, 36, 40, 30
    bw = min((W - L - 8) / max(len(buckets), 1), 40.0)
    top = max(c for _, c in buckets) or 1
    parts = [f'<svg class="histogram" viewBox="0 0 {W} {H}" width="{W}" '
             f'height="{H}" role="img" aria-label="ULP histogram of {_e(p.spec)} {_e(leaf.name)}">',
             f'<line x1="{L}" x2="{W - 4}" y1="{H - B}" y2="{H - B}" stroke="#8c959f"/>']
    ph = H - B - T
    for k, (bucket, count) in enumerate(buckets):
        h = count / top * ph
        bx = L + k * bw + 2
        colour = "#1a7f37" if str(bucket) == "0" else "#cf222e"
        parts.append(f'<rect class="bar" x="{bx:.1f}" y="{H - B - h:.1f}" width="{max(bw - 4, 1):.1f}" '
                     f'height="{h:.1f}" fill="{colour}"><title>{_e(bucket)} ULP: {count} elements</title></rect>')
        parts.append(f'<text x="{bx + (bw - 4) / 2:.1f}" y="{H - B - h - 3:.1f}" font-size="10" '
                     f'text-anchor="middle">{count}</text>')
        parts.append(f'<text x="{bx + (bw - 4) / 2:.1f}" y="{H - B + 12}" font-size="9" text-anchor="end" '
                     f'transform="rotate(-30 {bx + (bw - 4) / 2:.1f} {H - B + 12})" fill="#656d76">{_e(bucket)}</text>')
    parts.append('<text x="4" y="11" font-size="10" fill="#656d76">elements</text></svg>')
    label = f"{p.spec} {leaf.name}" if leaf.name else p.spec
    return (f'<figure id="hist-{_slug(p.spec)}-{_slug(leaf.name)}">{"".join(parts)}'
            f'<figcaption><code>{_e(label)}</code>: ULP from <code>{_e(baseline)}</code> per element '
            f'(max {d.max_ulp})</figcaption></figure>')


def _histograms(r: ComparisonResult) -> str:
    figs = [_histogram(p, lf, r.baseline) for p in r.paths for lf in p.leaves
            if lf.diff is not None and lf.diff.ulp_histogram]
    if not figs:
        return ""
    return (f'<section id="histograms"><h2>ULP histograms</h2><p class="note">How many elements of each output '
            f'lie how many ULP from <code>{_e(r.baseline)}</code> (buckets by powers of two; green: equal).</p>'
            f'<div class="charts">{"".join(figs)}</div></section>')


# -- explanations --------------------------------------------------------------------------------
def _where(op: Any) -> str:
    src = op.user_source or op.source or "?"
    if op.source and op.source != op.user_source:
        src += f" (via {op.source})"
    return src


def _op(op: Any) -> str:
    return f"{op.primitive} {','.join(op.inputs)} → {','.join(op.outputs)}"


def _table(tid: str, caption: str, cols: list[str], rows: list[list[str]],
           num: frozenset[int] | set[int] = frozenset()) -> str:
    head = "".join(f"<th{' class=num' if k in num else ''}>{_e(c)}</th>" for k, c in enumerate(cols))
    body = "".join("<tr>" + "".join(f"<td class='{'num' if k in num else 'wrap'}'>{c}</td>" for k, c in enumerate(row))
                   + "</tr>" for row in rows)
    idattr = f' id="{tid}"' if tid else ""
    return f'<h3>{_e(caption)}</h3><table{idattr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _fix_mark(fix: Any) -> str:
    """As the terminal marks a fix: ✓ restores parity, ◐ narrows, ✗ neither."""
    from .format import narrows

    if fix.verified:
        return "<span class='mark-ok'>✓ verified</span>"
    if narrows(fix):
        return "<span class='mark-partial'>◐ narrows, not parity</span>"
    return "<span class='mark-bad'>✗ not verified</span>"


def _explanation_group(e: Any, same: list[Any], result: Any = None) -> str:
    """One explanation in full, then a short section per path with the same divergence (its own
    anchor and fixes, a link to the full one)."""
    out = [_explanation(e, result)]
    for o in same:
        fixes = "".join(f"<li>{_e(f.kind)}: {_fix_mark(f)} "
                        f"<code>{_e(f.spec or '')}</code></li>" for f in o.fixes)
        out.append(f'<section class="explanation" id="explain-{_slug(o.path)}"><h2>Why <code>{_e(o.path)}</code> '
                   f'differs from <code>{_e(o.baseline)}</code></h2><p class="explain-summary">The same first op and '
                   f'causes as <a href="#explain-{_slug(e.path)}"><code>{_e(e.path)}</code></a>: explained there. '
                   f'{_e(o.summary)}</p>' + (f"<ul>{fixes}</ul>" if fixes else "") + "</section>")
    return "".join(out)


def _explanation(e: Any, result: Any = None) -> str:
    html = _explanation_one(e, result)
    if e.remainder is not None:  # a partial fix applied: what remains, explained the same way
        html += _explanation(e.remainder)
    return html


def brief_html(e: Any, result: Any = None) -> str:
    """The short explanation (``report.brief``) as a definition list: the same lines as the terminal."""
    from .brief import brief

    p = next((x for x in result.paths if x.spec == e.path), None) if result is not None else None
    rows = "".join(f"<dt>{_e(label)}</dt><dd>{_e(text)}</dd>" for label, text in brief(e, p))
    return f'<dl class="brief">{rows}</dl>'


def _blame_table(e: Any, sid: str) -> str:
    b = e.localization.blame if e.localization is not None else None
    if b is None or not b.carriers:
        return ""
    rows = []
    needed = blame_needed_shown(b)
    for c in b.carriers:
        d = e.localization.local[c.divergence]
        rows.append([str(d.op.index), f"<code>{_e(_op(d.op))}</code>", f"<code>{_e(_where(d.op))}</code>",
                     f"{c.alone:.0%}"] + ([f"{c.needed:.0%}"] if needed else [])
                    + (["screen" if c.screened else "replay"] if b.screened else []))
    screen = (f"; {b.screened} measured on the compiled screen, within {b.screen_gap:.1%} of the replay where both ran"
              if b.screened else "")
    return _table(f"blame-{sid}", f"what carries the output difference (replayed with {b.method}; all together: "
                  f"{b.together:.0%}; {len(b.noise)} divergences carry none{screen})",
                  ["#", "op", "line", "alone"] + (["needed"] if needed else []) + (["measured on"] if b.screened else []),
                  rows, {0, 3, 4} if needed else {0, 3}) + f'<p class="note">{_e(blame_legend(b))}</p>'


def _explanation_one(e: Any, result: Any = None) -> str:
    from .brief import cost_words

    sid = _slug(e.path)
    out = [f'<section class="explanation" id="explain-{sid}"><h2>Why <code>{_e(e.path)}</code> differs from '
           f'<code>{_e(e.baseline)}</code></h2>{brief_html(e, result)}<p class="explain-summary">{_e(e.summary)}</p>',
           _blame_table(e, sid)]
    loc = e.localization
    if loc is not None and loc.perturbed and loc.cone:
        rows = [[str(o.index), f"<code>{_e(_op(o))}</code>", _e(o.name_stack), f"<code>{_e(_where(o))}</code>"]
                for o in loc.cone]
        out.append(_table(f"cone-{sid}", "ops computed together where the difference arises (per-op values hide it)",
                          ["#", "op", "module", "line"], rows, {0}))
    if loc is not None:
        shown = [d for d in loc.local if not d.within_noise_bound] or list(loc.local)  # a report to attach: all
        if shown:
            noise = sum(d.within_noise_bound for d in loc.local)
            loops = any(d.within for d in shown)
            rows = [[str(d.op.index)] + ([_e(": ".join(f.describe() for f in d.within))] if loops else []) +
                    [f"<code>{_e(_op(d.op))}</code>", _e(d.op.name_stack or ""),
                     f"<code>{_e(_where(d.op))}</code>", _e(local_distance(d)), f"{d.n_differ}/{d.size}",
                     _e(d.kept_by(e.path, e.baseline))] for d in shown]
            cols = ["#"] + (["in loop"] if loops else []) + ["op", "module", "line", "max diff", "differ",
                                                              "declared kept by"]
            opened = " and the loop bodies opened" if any(d.within for d in loc.local) else ""
            out.append(_table(f"local-{sid}", f"first ops that diverge on their own ({len(loc.local)} among {loc.ops} "
                              f"ops{opened}; {noise} are reduction noise)", cols, rows,
                              {0, 4 + loops, 5 + loops}))
            details = [f"<li><b>#{d.op.index}</b>: {_e(d.detail)}</li>" for d in shown if d.detail]
            details += [f"<li><b>#{d.op.index}</b>: {_e(readable(said))}</li>"
                        for d in shown if (said := d.elements_said(e.path, e.baseline)) is not None]
            details += [f"<li><b>#{d.op.index}</b>: {_e(m.description)} "
                        f"{'reproduces the path bit for bit' if m.reproduces_path else f'is {m.max_ulp_to_path} ULP from the path'}"
                        f"</li>" for d in shown for m in d.semantics if m.reproduces_path]
            growth_rows = iteration_growth(shown[0]) if shown[0].within else ()
            if growth_rows:
                frame, ulps = growth_rows
                details.append(f"<li>carry entering each iteration of {_e(frame.describe().rsplit(',', 1)[0])}, max ULP "
                               f"from the baseline's: {_e(', '.join(map(str, ulps)))}</li>")
            if details:
                out.append(f"<ul class='details'>{''.join(details)}</ul>")
        growth = layer_growth(loc)
        if len(growth) > 1:
            rows = [[_e(layer), str(first), fmt(mx), ulp_text(ulp)] for layer, first, mx, ulp in growth]
            out.append(_table(f"growth-{sid}", "how the difference grows, layer by layer",
                              ["layer", "from op", "max abs", "max ULP"], rows, {1, 2, 3}))
            if any(ulp >= HUGE_ULP for *_, ulp in growth):
                out.append(f'<p class="note">{_e(HUGE_ULP_NOTE)}</p>')
        for note in loc.notes:
            out.append(f'<p class="note">{_e(note)}</p>')
    ev = e.evidence
    if ev is not None and ev.widened:
        items = []
        for w in ev.widened:
            by = f", rounding removed by pass <code>{_e(w.removed_by_pass)}</code>" if w.removed_by_pass else ""
            items.append(f"<li><code>{_e(w.primitive)}</code> declared {_e(w.declared_dtype)}, computed "
                         f"{_e(w.computed_dtype)} at <code>{_e(w.source or '?')}</code>{by}"
                         f"<pre class='hlo'>{_e(w.hlo_line)}</pre></li>")
        out.append(f'<div id="hlo-{sid}"><h3>compiler evidence ({_e(ev.path)}): {len(ev.widened)} of '
                   f'{ev.declared_narrow_ops} declared narrow results kept wider in the optimized HLO</h3>'
                   f'<ul>{"".join(items)}</ul></div>')
    fp = e.fingerprint
    if fp is not None and fp.matches:
        rows = [[f"<code>{_e(m.candidate)}</code>", "<span class='mark-ok'>yes</span>" if m.exact else "",
                 "NaN" if m.max_ulp is None else str(m.max_ulp), str(m.n_differ), _e(m.description)]
                for m in fp.matches]
        out.append(_table(f"fingerprint-{sid}", "which semantics reproduce these outputs",
                          ["candidate", "exact", "max ULP", "differ", "what it means"], rows, {2, 3}))
    tested = [v for v in e.causes if v.status != "not run"]
    untested = [v for v in e.causes if v.status == "not run"]

    def cause_row(v: Any) -> list[str]:
        return [_e(v.title), f"<span class='status-{_slug(v.status)}'>{_e(v.status)}</span>",
                _e(readable(v.experiment)), _e(readable(v.evidence))]

    if e.causes:  # none when explaining the path failed: the summary says why
        out.append(_table(f"causes-{sid}", "causes, each tested", ["cause", "result", "experiment", "evidence"],
                          [cause_row(v) for v in tested]))
    if untested:
        out.append(f"<details><summary>{len(untested)} other known causes not tested: they cannot apply here or "
                   f"are not needed</summary>" + _table("", "not tested", ["cause", "result", "why not", "evidence"],
                                                        [cause_row(v) for v in untested]) + "</details>")
    for k, fix in enumerate(e.fixes):
        mark = _fix_mark(fix)
        out.append(f'<div class="fix {"verified" if fix.verified else "unverified"}" id="fix-{sid}-{k}">'
                   f'<b>fix ({_e(fix.kind)})</b>: {mark} <code>{_e(fix.spec or "")}</code>'
                   f'<div>{_e(fix.description)}</div><div class="note">{_e(readable(fix.evidence))}</div>'
                   + (f'<div class="note">{_e(cost)}</div>' if (cost := cost_words(fix)) else "") + '</div>')
    for k, line in enumerate(advice(e)):  # the fix or workaround of the cause that explains it, with no re-run
        head, _, rest = line.partition(": ")
        out.append(f'<div class="fix advice" id="advice-{sid}-{k}"><b>{_e(head)}</b>: {_e(rest)}</div>')
    for note in e.notes:
        out.append(f'<p class="note">note: {_e(note)}</p>')
    out.append("</section>")
    return "".join(out)


def _values(r: ComparisonResult) -> str:
    rows = [(p.spec, lf.name, lf.values) for p in r.paths for lf in p.leaves if lf.values is not None]
    if not rows:
        return ""
    body = "".join(
        f"<tr><th><code>{_e(f'{spec} {name}' if len(r.outputs) > 1 else spec)}</code></th>"
        f"<td class='mono'>{_e(values_text(values))}</td></tr>"
        for spec, name, values in rows)
    return f'<section id="values"><h2>Values</h2><table>{body}</table></section>'


_HOWTO = ("How to read this: each path runs the same function a different way (eager, jit, an exporter or a "
          "server); the matrix says how far each output is from the baseline in ULP, the drift chart shows at "
          "which op the paths part and how the difference grows, and each explanation names the cause it "
          "confirmed by re-running, with the fix that restored parity (✓ verified) and the evidence.")


def verdicts_html(result: ComparisonResult) -> str:
    """The verdicts (``report.answer``): a block per divergence and per path that could not run, as the terminal
    says them, then a line per group within rounding noise or identical."""
    from .answer import block, one_line

    out = []
    for v in result.verdicts:
        if v.kind in ("divergence", "could not run"):
            title, lines = block(v, verbose=True)
            rows = "".join(f"<dt>{_e(label)}</dt><dd>{_e(text)}</dd>" for label, text in lines)
            out.append(f'<section class="verdict {"pass" if v.passes else "fail"}"><h3>{_e(title)}</h3>'
                       f'<dl class="brief">{rows}</dl></section>')
    calm = [v for v in result.verdicts if v.kind in ("noise", "identical")]
    if calm:
        out.append("<ul class=\"calm\">" + "".join(f"<li>{_e(one_line(v))}</li>" for v in calm) + "</ul>")
    return f'<section id="verdicts">{"".join(out)}</section>' if out else ""


def render_html_report(result: ComparisonResult) -> str:
    """The whole report as one self-contained HTML document (no network, no scripts): the answer first (the
    verdicts), then the matrix, the drift chart, the histograms, each explanation in full, the values."""
    body = [
        _header(result),
        verdicts_html(result),
        f'<p id="howto" class="howto">{_e(_HOWTO)}</p>',
        _summary(result),
        _drift_chart(list(result.explanations)),
        _histograms(result),
        *(_explanation_group(e, same, result) for e, same in group_explanations(result.explanations)),
        _values(result),
        f'<footer class="note" style="margin-top:32px">jaxparity report, schema v{result.schema_version}</footer>',
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>jaxparity: {_e(result.case)}</title><style>{_CSS}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")


def write_html(result: ComparisonResult, path: str | Path) -> None:
    """Write ``render_html_report(result)`` to ``path`` (UTF-8)."""
    Path(path).write_text(render_html_report(result), encoding="utf-8")
