"""Terminal report (rich): a table of paths, then one verdict sentence per path."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..result import ComparisonResult, PathResult
from .format import arrays_line, fmt, path_line, summary_line, values_text

__all__ = ["print_result", "render", "render_text"]

_STYLE = {
    "baseline": "bold",
    "identical": "green",
    "equal": "green",
    "within tolerance": "yellow",
    "differs": "bold red",
    "error": "red",
    "crashed": "red",
    "timeout": "red",
    "unavailable": "dim",
}


def _shape(info: Any) -> str:
    return f"{info.dtype}[{','.join(map(str, info.shape))}]"


def _rows(p: PathResult, many_outputs: bool) -> list[list[Any]]:
    verdict = Text(p.verdict.upper() if p.verdict == "differs" else p.verdict, style=_STYLE[p.verdict])
    time = f"{p.seconds:.2f}s" if p.seconds else ""
    if not p.leaves:
        return [[p.spec, verdict, *([""] * (6 if many_outputs else 5)), time]]
    rows = []
    for i, leaf in enumerate(p.leaves):
        d, err = leaf.diff, leaf.error_vs_f64
        ideal_abs = fmt(err.max_abs) if err is not None and p.spec != "f64" else ""
        ideal_ulp = str(err.max_ulp) if err is not None and err.max_ulp is not None and p.spec != "f64" else ""
        row = [
            p.spec if i == 0 else "",
            verdict if i == 0 else "",
            str(d.max_ulp) if d else "",
            fmt(d.max_abs) if d else "",
            f"{d.n_differ}/{d.size}" if d else "",
            ideal_abs,
            ideal_ulp,
            time if i == 0 else "",
        ]
        if many_outputs:
            row.insert(2, leaf.name)
        rows.append(row)
    return rows


class _PathsTable:
    """The per-path table, fitted to the width it is drawn at: in a narrow CI log (80 columns) the
    time and f64 ULP columns go (the progress lines show the times, the f64 line the ULP) before any
    cell breaks inside a word or a number ("DIFFER S", "4.88e-0 7")."""

    def __init__(self, result: ComparisonResult) -> None:
        self.result = result

    def build(self, drop: tuple[str, ...] = ()) -> Table:
        result = self.result
        many = len(result.outputs) > 1
        table = Table(show_edge=False, header_style="bold", pad_edge=False)
        columns = [("path", "left"), ("verdict", "left"), ("max ULP", "right"), ("max abs", "right"),
                   ("differ", "right"), ("f64 err", "right"), ("f64 ULP", "right"), ("time", "right")]
        if many:
            columns.insert(2, ("output", "left"))
        keep = [i for i, (col, _) in enumerate(columns) if col not in drop]
        for i in keep:
            col, justify = columns[i]
            table.add_column(col, justify=justify, no_wrap=col != "path",  # type: ignore[arg-type]
                             overflow="fold" if col == "path" else "ellipsis", max_width=32 if col == "path" else None)
        for p in result.paths:
            for row in _rows(p, many):
                table.add_row(*(row[i] for i in keep))
        return table

    def __rich_console__(self, console: Console, options: Any) -> Any:
        for drop in ((), ("time",), ("time", "f64 ULP")):
            table = self.build(drop)
            natural = console.measure(table, options=options.update_width(10_000)).maximum
            if natural <= options.max_width:
                break
        yield table


def _grid() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", max_width=32, overflow="fold")
    grid.add_column()
    return grid


def render(result: ComparisonResult, verbose: bool = False) -> Group:
    head = Text()
    head.append("jaxparity compare ", style="bold")
    head.append(result.case, style="bold cyan")
    head.append(f"\ninputs   {arrays_line(result.inputs)} ({result.input_source})")
    head.append(f"\noutputs  {', '.join(f'{a.name} {_shape(a)}' for a in result.outputs)}")
    head.append(f"\nbaseline {result.baseline}, tolerance {result.tolerance.describe()}")

    table = _PathsTable(result)
    findings = _grid()
    for p in result.paths:
        line = Text(path_line(p, result.baseline), style=_STYLE[p.verdict] if not p.passed else "")
        for note in p.notes:
            line.append(f"\n{note}", style="dim")
        findings.add_row(p.spec, line)
    parts: list[Any] = [head, Text(""), table, Text(""), findings]
    if any(p.samples for p in result.paths):
        parts += [Text(""), _samples_table(result)]
    values = _values(result) if result.samples == 1 else None  # paths may show different samples
    if values is not None:
        parts += [Text(""), Text("values", style="bold"), values]
    from .explanation import group_explanations, render_explanation

    for e, same in group_explanations(result.explanations):
        parts += [Text(""), render_explanation(e, verbose, same)]
    parts += [Text(""), Text(summary_line(result), style="bold green" if result.passed else "bold red")]
    return Group(*parts)


def _samples_table(result: ComparisonResult) -> Table:
    """Many-inputs mode: per path, how often and how far it diverges over the samples."""
    table = Table(show_edge=False, header_style="bold", pad_edge=False, title=f"over {result.samples} samples",
                  title_justify="left")
    for col in ("path", "diverge", "fail", "ULP p50", "p90", "p99", "max", "worst", "nondet", "samp/s"):
        table.add_column(col, justify="left" if col == "path" else "right")
    for p in result.paths:
        s = p.samples
        if s is None:
            continue
        q = s.ulp_percentiles
        table.add_row(p.spec, f"{s.diverging}/{s.n}", str(s.failing), str(q.get("50", "")),
                      str(q.get("90", "")), str(q.get("99", "")), str(q.get("100", "")),
                      f"#{s.worst_sample}" if p.gated and p.spec != result.baseline else "",
                      f"{s.nondeterministic}/{s.n}" if s.repeat > 1 else "", f"{s.samples_per_second:.1f}")
    return table


def _values(result: ComparisonResult) -> Table | None:
    """For tiny outputs, the values themselves: what the reporter of a bug wants to paste."""
    rows = [(p.spec, lf) for p in result.paths for lf in p.leaves if lf.values is not None]
    if not rows:
        return None
    grid = _grid()
    for spec, lf in rows:
        label = f"{spec} {lf.name}" if len(result.outputs) > 1 else spec
        grid.add_row(label, Text(values_text(lf.values)))  # Text: "[nan]" is not markup  # type: ignore[union-attr]
    return grid


def print_result(result: ComparisonResult, console: Console | None = None, verbose: bool = False) -> None:
    (console or Console()).print(render(result, verbose))


def render_text(result: ComparisonResult, width: int = 120) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"), color_system=None)
    console.print(render(result))
    return console.export_text()
