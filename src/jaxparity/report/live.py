"""What a command shows on stderr while it runs, never silent: each path as it finishes, the comparison table as
soon as every path has run, each stage of the explanation as it starts, and each verdict as soon as it is
decided. On a terminal, a live display (rich) that names the stage, the path and how long it has run, cleared
when the report is printed; in a CI log (no terminal), one line per event. Nothing with ``--quiet``."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

__all__ = ["LiveReport"]


class LiveReport:
    """The command's ``progress`` (a path started or done) and ``stream`` (``comparison.compare_case``)."""

    def __init__(self, console: Console, quiet: bool) -> None:
        self.console, self.quiet = console, quiet
        self.tty = console.is_terminal
        self.before: list[Text] = []  # the lines kept on the display: paths run (above the table), verdicts
        self.after: list[Text] = []  # decided (below it)
        self.table: Any = None
        self.doing = ""
        self.since = time.monotonic()
        self.shown: set[str] = set()  # paths whose verdict was shown
        self.live: Live | None = None
        self.stopped = False
        self.explaining: list[str] = []  # the paths the explanation will go through, in order

    # -- the paths -----------------------------------------------------------------------------------------
    def __call__(self, spec: str, run: Any) -> None:
        """``progress``: (spec, None) as a path starts, (spec, its run) once done."""
        if self.quiet:
            return
        if run is None:
            if self.tty:  # in a log, the line as each path is done is enough
                self._doing(f"running [bold]{spec}[/]" if spec != "explain" else "explaining")
            return
        self.doing = ""  # done: nothing runs until the next one starts
        mark = {"ok": "[green]✓[/]", "unavailable": "[dim]–[/]"}.get(run.status, "[red]✗[/]")
        if spec == "explain" and run.status == "timeout":
            self._line(Text.from_markup(f"[yellow]■[/] explain stopped after {run.seconds:.1f}s: the verdicts so far "
                                        "are reported"))
            return
        extra = f" {run.status}" if run.status != "ok" else ""
        self._line(Text.from_markup(f"{mark} {spec} [dim]{run.seconds:.2f}s{extra}[/]"))

    def log(self, message: str) -> None:
        if not self.quiet:
            self._line(Text(message, style="dim"))

    # -- the answer as it forms ------------------------------------------------------------------------------
    def stream(self, kind: str, what: Any) -> None:
        if self.quiet:
            return
        if kind == "compared":
            from .terminal import _PathsTable

            self.table = _PathsTable(what)
            self.explaining = [p.spec for p in what.paths if p.verdict in ("differs", "within tolerance")
                               and not p.reference]
            if not self.tty:  # in a log, the table once, as soon as it is known
                self.console.print(self.table)
            self._refresh()
        elif kind == "stage":
            path, stage = what
            of = (f" ({self.explaining.index(path) + 1} of {len(self.explaining)})"
                  if path in self.explaining and len(self.explaining) > 1 else "")
            self._doing(f"explaining [bold]{path}[/]{of}: {stage}" if path else f"explaining: {stage}")
        elif kind == "verdict":
            self._verdict(what)

    def _verdict(self, v: Any) -> None:
        from .answer import block, headline_of

        if set(v.paths) <= self.shown:
            return
        self.shown.update(v.paths)
        title = headline_of(v) if v.kind == "divergence" else block(v)[0] if v.kind == "could not run" else None
        if title is None:
            from .answer import one_line

            title = one_line(v)
        self._line(Text(title, style="green" if v.passes else "red"))

    # -- drawing -------------------------------------------------------------------------------------------
    def _doing(self, what: str) -> None:
        self.doing, self.since = what, time.monotonic()
        if not self.tty:
            self.console.print(Text.from_markup(f"[dim]… {what}[/]"), soft_wrap=True)
            return
        self._refresh()

    def _line(self, line: Text) -> None:
        if not self.tty or self.stopped:  # in a log, or once the report is printed: a line of its own
            self.console.print(line, soft_wrap=True)
            return
        (self.before if self.table is None else self.after).append(line)
        self._refresh()

    def _refresh(self) -> None:
        if not self.tty or self.stopped:
            return
        if self.live is None:
            self.live = Live(self, console=self.console, transient=True, refresh_per_second=4,
                             vertical_overflow="visible")
            self.live.start()
        self.live.refresh()

    def __rich__(self) -> Group:
        parts: list[Any] = list(self.before)
        if self.table is not None:
            parts += [Text(""), self.table, Text(""), *self.after]
        if self.doing:
            seconds = time.monotonic() - self.since
            parts.append(Spinner("dots", Text.from_markup(f"{self.doing} [dim]{seconds:.0f}s[/]")))
        return Group(*parts)

    def stop(self) -> None:
        self.stopped = True
        if self.live is not None:
            self.live.stop()
            self.live = None
