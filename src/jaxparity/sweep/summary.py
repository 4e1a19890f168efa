"""The sweep read back from its store: per case and path, how many cells diverge, the worst ULP, and
the explanations grouped by cause; as a terminal table, JSON and a self-contained HTML page."""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from .store import Store

__all__ = ["Row", "SweepSummary", "case_names", "summarize", "to_html", "to_json"]

_DIVERGING = ("differs",)
_FAILED = ("error", "crashed", "timeout", "unavailable")


@dataclass
class Row:
    case: str
    path: str
    cells: int = 0
    diverging: int = 0
    failed: int = 0
    worst_ulp: int | None = None
    causes: dict[str, int] = field(default_factory=dict)  # cause -> diverging cells it explains
    first_ops: dict[str, int] = field(default_factory=dict)  # "#3 convert (model.py:30)" -> cells
    errors: list[str] = field(default_factory=list)
    reference: bool = False  # a reference path (f64, declared): shown, never counted as diverging
    degenerate: list[str] = field(default_factory=list)  # the baseline's outputs that show nothing (a few)
    degenerate_cells: int = 0  # cells where some output of the baseline shows nothing
    hidden: int = 0  # of those, cells where every output does: agreeing there proves nothing


@dataclass
class SweepSummary:
    name: str
    cells: int
    rows: list[Row]
    shows_nothing: list[str] = field(default_factory=list)  # per case: why its comparisons show nothing

    @property
    def hidden(self) -> bool:
        """Some case's comparisons show nothing of the model: the sweep does not pass, whatever agreed."""
        return bool(self.shows_nothing)

    @property
    def diverging(self) -> int:
        """Diverging cells of the paths that are judged (a reference is where the numbers should be)."""
        return sum(r.diverging for r in self.rows if not r.reference)

    @property
    def failed(self) -> int:
        return sum(r.failed for r in self.rows)

    def causes(self) -> Counter:
        total: Counter = Counter()
        for r in self.rows:
            total.update(r.causes)
        return total


def case_names(cases: Iterable[str]) -> dict[str, str]:
    """Each case (an absolute ``FILE.py[:FACTORY]``) by the shortest tail of its path that no other case
    shares: ``case.py`` alone, ``a/case.py`` and ``b/case.py`` where two files share a name."""
    cases = list(dict.fromkeys(cases))
    parts = {c: c.split("/") for c in cases}

    def tail(c: str, k: int) -> str:
        return "/".join(parts[c][-k:])

    names = {}
    for c in cases:
        k = 1
        while k < len(parts[c]) and any(tail(o, k) == tail(c, k) for o in cases if o != c):
            k += 1
        names[c] = tail(c, k)
    return names


def _cells(n: int) -> str:
    return f"{n} cell" if n == 1 else f"{n} cells"


def _reference(spec: str) -> bool:
    from ..paths import PATHS, parse_spec, without_env

    cls = PATHS.get(parse_spec(without_env(spec))[0])
    return bool(cls is not None and cls.reference)


def _shows_nothing(cells: list[dict[str, Any]]) -> str | None:
    """Why one case's cells show nothing of the model, or None: every cell's outputs degenerate, or the
    baseline's outputs the same bit for bit on every drawn input set (they depend on the weights only)."""
    ran = [r for r in cells if r["status"] == "ok"]
    if ran and all((r["degenerate"] or "").startswith("hides: ") for r in ran):
        return ran[0]["degenerate"].removeprefix("hides: ")
    drawn = {r["sample"]: r["baseline_digest"] for r in ran if r["sample"] >= 0 and r["baseline_digest"]}
    if len(drawn) > 1 and len(set(drawn.values())) == 1:
        return (f"the baseline's outputs are the same on all {len(drawn)} input sets: they do not depend on "
                "the varied inputs")
    return None


def summarize(store: Store, name: str = "sweep") -> SweepSummary:
    rows: dict[tuple[str, str], Row] = {}
    by_case: dict[str, list[dict[str, Any]]] = defaultdict(list)
    cells = list(store.rows())
    short = case_names(r["case"] for r in cells)
    for r in cells:
        by_case[r["case"]].append(r)
        row = rows.setdefault((r["case"], r["path"]), Row(short[r["case"]], r["path"], reference=_reference(r["path"])))
        row.cells += 1
        if r["degenerate"]:
            row.degenerate_cells += 1
            row.hidden += r["degenerate"].startswith("hides: ")
            text = r["degenerate"].removeprefix("hides: ")
            if len(row.degenerate) < 3 and text not in row.degenerate:
                row.degenerate.append(text)
        if r["verdict"] in _DIVERGING:
            row.diverging += 1
            if r["cause"]:
                row.causes[r["cause"]] = row.causes.get(r["cause"], 0) + 1
            if r["op"]:
                where = f"{r['op']} ({r['line']})" if r["line"] else r["op"]
                row.first_ops[where] = row.first_ops.get(where, 0) + 1
        if r["status"] in _FAILED or r["verdict"] in _FAILED:
            row.failed += 1
            if r["error"] and len(row.errors) < 3 and r["error"] not in row.errors:
                row.errors.append(r["error"])
        if r["max_ulp"] is not None and r["verdict"] in _DIVERGING + ("within tolerance",):
            row.worst_ulp = max(row.worst_ulp or 0, int(r["max_ulp"]))
    nothing = [f"{short[case]}: {why}" for case, cells in by_case.items() if (why := _shows_nothing(cells))]
    return SweepSummary(name, sum(r.cells for r in rows.values()), list(rows.values()), nothing)


def to_json(summary: SweepSummary, store: Store) -> str:
    return json.dumps({"sweep": summary.name, "cells": summary.cells, "diverging": summary.diverging,
                       "failed": summary.failed, "shows_nothing": summary.shows_nothing,
                       "rows": [asdict(r) for r in summary.rows],
                       "causes": dict(summary.causes()), "cell_results": list(store.rows())}, indent=1, default=str)


def print_summary(summary: SweepSummary, console: Any) -> None:
    """One line per case and path (lines, not a table: they read the same in a CI log at 80 columns)."""
    console.print(f"sweep {summary.name}: {_cells(summary.cells)}, {summary.diverging} diverge, {summary.failed} "
                  "failed", markup=False, soft_wrap=True)
    for why in summary.shows_nothing:
        console.print(f"  shows nothing: {why}; agreeing on these outputs proves nothing", style="bold red",
                      markup=False, soft_wrap=True)
    for r in summary.rows:
        parts = [_cells(r.cells), f"{r.diverging} differ (a reference: not judged)" if r.reference else
                 f"{r.diverging} diverge"]
        if r.worst_ulp is not None:
            parts.append(f"worst {r.worst_ulp} ULP")
        if r.failed:
            parts.append(f"{r.failed} failed ({'; '.join(r.errors)})")
        if r.degenerate:
            parts.append(f"{r.degenerate_cells} with baseline outputs that show nothing ({'; '.join(r.degenerate)})")
        causes = "; ".join(f"{c} ({n})" for c, n in sorted(r.causes.items(), key=lambda kv: -kv[1]))
        console.print(f"  {r.case} on {r.path}: {', '.join(parts)}" + (f". Causes: {causes}" if causes else ""),
                      markup=False, soft_wrap=True)
    grouped = defaultdict(list)
    for r in summary.rows:
        for op, n in r.first_ops.items():
            grouped[op].append(f"{r.case} on {r.path} ({n})")
    for op, where in grouped.items():
        console.print(f"  first diverging op {op}: {', '.join(where)}", soft_wrap=True, markup=False)


def to_html(summary: SweepSummary) -> str:
    e = html.escape
    rows = "".join(
        f"<tr class='{'bad' if r.diverging else 'ok'}'><td>{e(r.case)}</td><td>{e(r.path)}</td><td>{r.cells}</td>"
        f"<td>{r.diverging}</td><td>{r.failed}</td><td>{'' if r.worst_ulp is None else r.worst_ulp}</td>"
        f"<td>{'<br>'.join(e(f'{c} ({n})') for c, n in r.causes.items())}</td>"
        f"<td>{'<br>'.join(e(f'{o} ({n})') for o, n in r.first_ops.items())}</td></tr>" for r in summary.rows)
    causes = "".join(f"<li>{e(c)}: {_cells(n)}</li>" for c, n in summary.causes().most_common())
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>jaxparity sweep {e(summary.name)}</title>"
            "<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
            "tr.bad td:nth-child(4){color:#b00;font-weight:bold}</style></head><body>"
            f"<h1>sweep {e(summary.name)}</h1><p>{_cells(summary.cells)}; {summary.diverging} diverge from the "
            f"baseline; {summary.failed} failed.</p>"
            + "".join(f"<p style='color:#b00'><b>shows nothing</b>: {e(w)}; agreeing on these outputs proves "
                      "nothing.</p>" for w in summary.shows_nothing)
            + f"<h2>Causes across the matrix</h2><ul>{causes or '<li>none</li>'}"
            "</ul><h2>Cells by case and path</h2><table><tr><th>case</th><th>path</th><th>cells</th><th>diverge</th>"
            f"<th>failed</th><th>worst ULP</th><th>causes</th><th>first diverging op</th></tr>{rows}</table>"
            "</body></html>\n")
