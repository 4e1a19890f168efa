"""Terminal report (rich): a table of paths, then one verdict sentence per path."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..metrics import dtype_class
from ..result import ComparisonResult, PathResult
from .callbacks import callbacks_line
from .explanation import fit_columns, stacked
from .format import NAN_ULP, arrays_line, devices_line, fmt, module_lines, path_line, summary_line, values_text

__all__ = ["TrimmedLines", "print_result", "render", "render_text", "stderr_console", "stdout_console"]

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


def _distance_cells(d: Any) -> tuple[str, str]:
    """(max ULP, max abs) of a leaf's difference: integers by their exact absolute difference (no ULP),
    'NaN' where an element is a NaN against a number (it has no distance, and is the worst)."""
    if d is None:
        return "", ""
    if d.nan_mismatch:
        return "NaN", "NaN"
    if dtype_class(d.dtype) in ("int", "uint", "bool"):
        return "", str(d.max_ulp)
    return str(d.max_ulp), fmt(d.max_abs)


def _rows(p: PathResult, many_outputs: bool, label: Any = None) -> list[list[Any]]:
    if p.reference and p.status == "ok":  # a reference is where the numbers should be: never a failure
        verdict = Text(p.verdict, style="dim")
    else:
        verdict = Text(p.verdict.upper() if p.verdict == "differs" else p.verdict, style=_STYLE[p.verdict])
    time = f"{p.seconds:.2f}s" if p.seconds else ""
    label = Text(p.spec) if label is None else label
    if not p.leaves:
        return [[label, verdict, *([""] * (6 if many_outputs else 5)), time]]
    rows = []
    for i, leaf in enumerate(p.leaves):
        d, err = leaf.diff, leaf.error_vs_f64
        ideal_abs = ideal_ulp = ""
        if err is not None and p.spec != "f64":
            exact = err.max_ulp is None and float(err.max_abs).is_integer()  # integers: their exact difference
            ideal_abs = str(int(err.max_abs)) if exact else fmt(err.max_abs)
            ideal_ulp = "" if err.max_ulp is None else "NaN" if err.max_ulp >= NAN_ULP else str(err.max_ulp)
            ideal_abs = "NaN" if err.max_abs == float("inf") and err.max_ulp and err.max_ulp >= NAN_ULP else ideal_abs
        ulp, abs_ = _distance_cells(d)
        row = [
            label if i == 0 else "",
            verdict if i == 0 else "",
            ulp,
            abs_,
            f"{d.n_differ}/{d.size}" if d else "",
            ideal_abs,
            ideal_ulp,
            time if i == 0 else "",
        ]
        if many_outputs:
            row.insert(2, leaf.name)
        rows.append(row)
    return rows


def _spec_lines(spec: str, width: int) -> Text:
    """A path spec broken after its ':' and ',' (never inside a name) into lines of at most ``width``."""
    lines: list[str] = []
    for piece in re.split(r"(?<=[:,])", spec):
        if lines and len(lines[-1]) + len(piece) <= width:
            lines[-1] += piece
        else:
            lines.append(piece)
    return Text("\n".join(lines))


class _PathsTable:
    """The per-path table, fitted to the width it is drawn at: in a narrow CI log (80 columns) the
    time, f64 ULP and f64 err columns go (the progress lines show the times, the f64 line the ULP),
    then long path specs break after their ':' and ',', before any cell breaks inside a word or a
    number ("DIFFER S", "4.88e-0 7", "tflite:kernels=bui / ltin"); where nothing fits, one line per row.
    The time column only with ``times`` (--verbose): the report is otherwise the same text on an idle
    machine and a loaded one (the progress lines on stderr and --json have the times)."""

    def __init__(self, result: ComparisonResult, times: bool = False) -> None:
        self.result = result
        self.times = times

    def build(self, drop: tuple[str, ...] = (), split: int = 0) -> Table:
        """The table without the ``drop`` columns; specs broken into lines of ``split`` characters (0: whole)."""
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
            table.add_column(col, justify=justify, no_wrap=col != "path")  # type: ignore[arg-type]
        for p in result.paths:
            label = _spec_lines(p.spec, split) if split else Text(p.spec)
            for row in _rows(p, many, label):
                table.add_row(*(row[i] for i in keep))
        return table

    def __rich_console__(self, console: Console, options: Any) -> Any:
        drops: tuple[tuple[str, ...], ...] = ((), ("time",), ("time", "f64 ULP"), ("time", "f64 ULP", "f64 err"))
        if not self.times:
            drops = drops[1:]
        for split in (0, 24, 12):
            for drop in drops:
                table = self.build(drop, split)
                if fit_columns(table, console, options.max_width):
                    yield table
                    if said := self._left(drop):
                        yield _left_out(said)
                    return
        yield from stacked(self.build(drops[-1]))
        yield _left_out(self._left(drops[-1]))

    def _left(self, drop: tuple[str, ...]) -> tuple[str, ...]:
        """The columns left out for the width (the time column is not one where it is --verbose's)."""
        return drop if self.times else tuple(c for c in drop if c != "time")


def _left_out(columns: Sequence[str]) -> Text:
    """The note under a table narrowed to fit: which columns it left out, and where they are."""
    return Text(f"({', '.join(columns)} left out at this width: wider, or --json, shows "
                f"{'it' if len(columns) == 1 else 'them'})", style="dim")


_LABEL = 32  # the widest label column of a grid, unless one part of a path spec is wider (up to 40)


def _grid(labels: Sequence[str] = ()) -> Table:
    """Label and text; the labels (path specs) break after ':' and ',' (``_spec_lines``), so the label
    column is as wide as their longest part, at least 32 and at most 40 characters."""
    parts = [len(piece) for label in labels for piece in re.split(r"(?<=[:,])|\s+", label)]
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", max_width=min(max([_LABEL, *parts]), 40), overflow="fold")
    grid.add_column(overflow="fold")  # a word wider than the column (a path) breaks, never cut with …
    return grid


def render(result: ComparisonResult, verbose: bool = False, all_causes: bool = False) -> Group:
    """The whole report, the answer first: the headline (``answer.headline``), the table of paths, then one
    block per divergence or path that could not run and a line per group within rounding noise or identical.
    ``verbose`` adds the provenance (inputs, artifacts, serving processes), each path's own line, the values,
    and every explanation in full (``all_causes``: also the causes not tested)."""
    parts: list[Any] = [_title(result), *_headline(result)]
    facts = _facts(result, verbose)
    if facts is not None:
        parts.append(facts)
    parts += [Text(""), _PathsTable(result, times=verbose)]
    if verbose:
        parts += [Text(""), _findings(result)]
    if any(p.samples for p in result.paths):
        parts += [Text(""), _SamplesTable(result)]
    values = _values(result) if result.samples == 1 and verbose else None
    if values is not None:
        parts += [Text(""), Text("values", style="bold"), values]
    parts += _verdicts(result, verbose)
    if verbose:
        from .explanation import group_explanations, render_explanation

        for e, same in group_explanations(result.explanations):
            parts += [Text(""), render_explanation(e, True, same, result, all_causes)]
    return Group(*parts)


def _title(result: ComparisonResult) -> Text:
    head = Text()
    head.append("jaxparity explain " if result.explanations else "jaxparity compare ", style="bold")
    head.append(result.case, style="bold cyan")
    devices = {p.device for p in result.paths if p.device}
    head.append(f" against {result.baseline} ({result.tolerance.describe()})"
                + (f", on {', '.join(sorted(d for d in devices if d))}" if len(devices) == 1 else ""), style="dim")
    return head


def _headline(result: ComparisonResult) -> list[Any]:
    from .answer import headline

    if result.verdicts:
        lines = headline(result)
    else:  # a result built by hand, without verdicts
        lines = [summary_line(result)]
    if result.partial:
        lines.append(f"■ partial: the explanation was stopped before it reached {', '.join(result.partial)}")
    grid = Table.grid(padding=(0, 1))  # a sentence that wraps keeps to its column, under the first line's text
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for line in lines:
        head, _, rest = line.partition(" ")
        style = {"✓": "bold green", "✗": "bold red", "■": "bold yellow", "!": "bold yellow", "–": "dim"}.get(head)
        if style is None:
            head, rest, style = "", line, "bold"
        grid.add_row(Text(head, style=style), Text(rest, style=style))
    return [grid]


def _facts(result: ComparisonResult, verbose: bool) -> Table | None:
    """Inputs, outputs, baseline and devices (``verbose``); by default only what must not be missed (outputs that
    show nothing of the model, devices that differ by path)."""
    facts = Table.grid(padding=(0, 1))  # a fact that wraps keeps to its column, under the first line's text
    facts.add_column(no_wrap=True, min_width=8)
    facts.add_column(overflow="fold")
    if verbose:
        inputs = Text(f"{arrays_line(result.inputs)} ({result.input_source})")
        if arrays_line(result.inputs) != arrays_line(result.inputs, len(result.inputs)):
            for module in module_lines(result.inputs):  # what the line above counted, one module a line
                inputs.append(f"\n{module}", style="dim")
        facts.add_row("inputs", inputs)
        facts.add_row("outputs", ", ".join(f"{a.name} {_shape(a)}" for a in result.outputs))
        facts.add_row("baseline", f"{result.baseline}, tolerance {result.tolerance.describe()}")
    devices = devices_line(result)
    if devices is not None and (verbose or len({p.device for p in result.paths if p.device}) > 1):
        facts.add_row("devices", devices)
    for d in result.degenerate:
        facts.add_row(Text("warning", style="bold yellow"),
                      Text(f"{d.text}: paths agree on it without computing the model", style="bold yellow"))
    return facts if facts.row_count else None


def _findings(result: ComparisonResult) -> Table:
    """Each path's own line (what it differs by, the tolerance that would pass it, its artifact and runtime)."""
    findings = _grid([p.spec for p in result.paths])
    said: dict[str, str] = {}  # a finding already said, by the path that said it
    named: dict[tuple, str] = {}  # host callbacks already listed, by the path that listed them
    for p in result.paths:
        text = path_line(p, result.baseline)
        key = text.replace(f"{p.spec}'s ", "\0's ")  # the same finding, whichever path it names ("against jit's 0.09")
        if p.callbacks and p.status == "error":
            if (first := named.setdefault(tuple(map(repr, p.callbacks)), p.spec)) != p.spec:
                text = f"{p.verdict}: {callbacks_line(p.callbacks, p.message, same_as=first)}"
        elif key in said and p.leaves and ": " in text and _same_outputs(result, p.spec, said[key]):
            text = f"{text.split(': ', 1)[0]}: ... (same numbers as {said[key]})"  # said once
        elif key in said and p.fault is not None:  # the same converted model: its fault said once
            text = f"{p.verdict}: the {p.fault.layer}'s fault, as for {said[key]} (the same {p.fault.converter} model)"
        else:
            said.setdefault(key, p.spec)
        line = Text(text, style=_STYLE[p.verdict] if not p.passed and not p.reference else "")
        for note in p.notes:
            line.append(f"\n{note}", style="dim")
        findings.add_row(_spec_lines(p.spec, _LABEL), line)  # a long spec breaks after ':' and ',', not inside a name
    return findings


def _verdicts(result: ComparisonResult, verbose: bool) -> list[Any]:
    """A block per divergence and path that could not run, then a line per group within noise or identical."""
    from .answer import block, one_line

    parts: list[Any] = []
    for v in result.verdicts:
        if v.kind in ("divergence", "could not run"):
            title, lines = block(v, verbose)
            if not verbose and (said := _values_line(result, v)) is not None:
                lines.insert(next((i for i, (label, _) in enumerate(lines) if label not in ("-->", "|")), len(lines)),
                             ("values", said))
            grid = Table.grid(padding=(0, 1))
            grid.add_column(style="bold", no_wrap=True, justify="right")
            grid.add_column(overflow="fold")  # a word wider than the column (a path) breaks, never cut with …
            for label, text in lines:
                grid.add_row(label, Text(text))
            parts += [Text(""), Text(title, style="bold red" if not v.passes else "bold yellow"), grid]
    calm = [v for v in result.verdicts if v.kind in ("noise", "identical")]
    if calm and (verbose or any(v.stage_errors for v in calm)):  # the headline names them; --verbose says each
        # group's judgement
        parts += [Text("")] + [Text(one_line(v), style="green" if v.passes else "red") for v in calm]
    return parts


def _same_outputs(result: ComparisonResult, a: str, b: str) -> bool:
    """Paths ``a`` and ``b`` gave the same outputs bit for bit (known only where the result holds its runs)."""
    runs = (result._source or {}).get("runs") or {}
    ra, rb = runs.get(a), runs.get(b)
    if ra is None or rb is None or not ra.outputs or not rb.outputs or len(ra.outputs) != len(rb.outputs):
        return False
    return all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
               for (_, x), (_, y) in zip(ra.outputs, rb.outputs))


class _SamplesTable:
    """Many-inputs mode: per path, how often and how far it diverges over the samples, fitted to the width it
    is drawn at as the path table is (columns left out are said, never a header cut to "diver…")."""

    def __init__(self, result: ComparisonResult) -> None:
        self.result = result

    def __rich_console__(self, console: Console, options: Any) -> Any:
        repeat = any(p.samples is not None and p.samples.repeat > 1 for p in self.result.paths)
        base = () if repeat else ("nondet",)  # nothing to show without --repeat
        for drop in ((), ("samp/s",), ("samp/s", "p99"), ("samp/s", "p99", "p90")):
            table = _samples_table(self.result, base + drop)
            if fit_columns(table, console, options.max_width):
                yield table
                if drop:
                    yield _left_out(drop)
                return
        yield from stacked(_samples_table(self.result, base + ("samp/s", "p99", "p90")))


def _samples_table(result: ComparisonResult, drop: Sequence[str] = ()) -> Table:
    """Many-inputs mode: per path, how often and how far it diverges over the samples."""
    table = Table(show_edge=False, header_style="bold", pad_edge=False, title=f"over {result.samples} samples",
                  title_justify="left", caption="diverge: samples that differ from the baseline at all; fail: "
                  "samples outside the tolerance (or where the path did not run)", caption_justify="left")
    columns = ("path", "diverge", "fail", "ULP p50", "p90", "p99", "max", "worst", "nondet", "samp/s")
    keep = [i for i, col in enumerate(columns) if col not in drop]
    for i in keep:
        table.add_column(columns[i], justify="left" if columns[i] == "path" else "right",
                         no_wrap=columns[i] != "path")
    add = table.add_row
    table.add_row = lambda *cells: add(*(cells[i] for i in keep))  # type: ignore[method-assign]
    for p in result.paths:
        s = p.samples
        if s is None:
            continue
        q = s.ulp_percentiles
        judged = p.gated and not p.reference and p.spec != result.baseline  # a reference never fails
        if s.errored == s.n:  # it never ran: no divergence, no ULP to show
            table.add_row(p.spec, Text("error", style=_STYLE["error"]), str(s.n) if judged else "", "", "", "", "",
                          "", "", "")
            continue
        diverge = f"{s.diverging}/{s.n}" + (f" ({s.errored} error{'s' if s.errored > 1 else ''})" if s.errored else "")
        table.add_row(p.spec, diverge, str(s.failing) if judged else "", str(q.get("50", "")),
                      str(q.get("90", "")), str(q.get("99", "")), str(q.get("100", "")),
                      f"#{s.worst_sample}" if judged else "",
                      f"{s.nondeterministic}/{s.n}" if s.repeat > 1 else "", f"{s.samples_per_second:.1f}")
    return table


def _values_line(result: ComparisonResult, v: Any) -> str | None:
    """For a tiny output (what a bug report quotes), the values of the baseline, the verdict's first path and the f64
    ideal on one line; None for larger or many outputs."""
    if v.kind != "divergence" or len(result.outputs) != 1:
        return None
    shown = [result.baseline, v.paths[0], "f64"]
    values = {p.spec: p.leaves[0].values for p in result.paths if p.spec in shown and p.leaves}
    known = {spec: x for spec, x in values.items() if x is not None}
    if not known or len(known) < len(values) or any(len(x) > 4 for x in known.values()):
        return None
    return ", ".join(f"{spec} {values_text(known[spec])}" for spec in shown if spec in known)


def _values(result: ComparisonResult) -> Table | None:
    """For tiny outputs, the values themselves: what the reporter of a bug wants to paste."""
    rows = [(p.spec, lf.name, lf.values) for p in result.paths for lf in p.leaves if lf.values is not None]
    if not rows:
        return None
    labels = [f"{spec} {name}" if len(result.outputs) > 1 else spec for spec, name, _ in rows]
    grid = _grid(labels)
    for label, (_, _, values) in zip(labels, rows):
        grid.add_row(_spec_lines(label, _LABEL), Text(values_text(values)))  # Text: "[nan]" is not markup
    return grid


def print_result(result: ComparisonResult, console: Console | None = None, verbose: bool = False,
                 all_causes: bool = False) -> None:
    (console or Console()).print(render(result, verbose, all_causes))


def render_text(result: ComparisonResult, width: int = 120, verbose: bool = False) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"), color_system=None)
    console.print(render(result, verbose))
    return console.export_text()


class TrimmedLines:
    """A text stream without the spaces rich pads a table's last cell with at the end of each line: a report
    piped to a file, a CI log or a diff carries none. Everything else is the stream's own (``isatty``,
    ``fileno``, ``encoding``: rich still sees whether it writes to a terminal)."""

    def __init__(self, stream: Any) -> None:
        self._stream, self._spaces = stream, ""

    def write(self, text: str) -> int:
        out = []
        for k, part in enumerate(text.split("\n")):
            if k:
                out.append("\n")
                self._spaces = ""  # the spaces held before a line's end are dropped
            kept = part.rstrip(" ")
            if kept:
                out.append(self._spaces + kept)
                self._spaces = part[len(kept):]
            else:
                self._spaces += part
        self._stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def stderr_console() -> Console:
    """The console a command tells its progress on (standard error; lines without trailing spaces)."""
    import sys

    return Console(file=TrimmedLines(sys.stderr), highlight=False)  # type: ignore[arg-type]


def stdout_console() -> Console:
    """The console a command prints its report on (standard output, lines without trailing spaces)."""
    import sys

    return Console(file=TrimmedLines(sys.stdout), highlight=False)  # type: ignore[arg-type]
