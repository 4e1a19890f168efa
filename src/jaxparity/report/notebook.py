"""HTML for notebooks (``_repr_html_``): the same table and sentences as the terminal, escaped."""

from __future__ import annotations

from html import escape

from ..result import ComparisonResult
from .format import fmt, path_line, summary_line

_COLOUR = {"identical": "#1a7f37", "equal": "#1a7f37", "within tolerance": "#9a6700", "differs": "#cf222e",
           "error": "#cf222e", "crashed": "#cf222e", "timeout": "#cf222e", "unavailable": "#6e7781",
           "baseline": "#24292f"}


def render_html(result: ComparisonResult) -> str:
    rows = []
    for p in result.paths:
        worst = p.worst
        d = worst.diff if worst else None
        err = (p.leaves[0].error_vs_f64 if p.leaves else None)
        rows.append(
            "<tr>"
            f"<td><code>{escape(p.spec)}</code></td>"
            + (f"<td style='color:#57606a'>{escape(p.verdict)}</td>" if p.reference else
               f"<td style='color:{_COLOUR[p.verdict]};font-weight:600'>{escape(p.verdict)}</td>")
            + f"<td>{d.max_ulp if d else ''}</td><td>{fmt(d.max_abs) if d else ''}</td>"
            f"<td>{f'{d.n_differ}/{d.size}' if d else ''}</td>"
            f"<td>{fmt(err.max_abs) if err else ''}</td>"
            f"<td style='text-align:left'>{escape(path_line(p, result.baseline))}</td>"
            "</tr>"
        )
    colour = "#1a7f37" if result.passed else "#cf222e"
    from .html import verdicts_html

    explained = verdicts_html(result)
    return (
        f"<div><b>jaxparity</b> <code>{escape(result.case)}</code> — baseline <code>{escape(result.baseline)}</code>, "
        f"tolerance {escape(result.tolerance.describe())}"
        "<table><thead><tr><th>path</th><th>verdict</th><th>max ULP</th><th>max abs</th><th>differ</th>"
        "<th>error vs f64</th><th style='text-align:left'>finding</th></tr></thead><tbody>"
        + "".join(rows)
        + f"</tbody></table>{explained}<p style='color:{colour};font-weight:600'>{escape(summary_line(result))}</p></div>"
    )
