"""Terminal rendering of a baseline check: which paths moved, by how much, and what changed."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..result import CheckResult
from .format import fmt

_STYLE = {"same": "green", "within tolerance": "yellow", "moved": "bold red", "now failing": "bold red",
          "now running": "green", "still failing": "dim"}


def render_check(r: CheckResult) -> Group:
    head = Text.assemble(("jaxparity check ", "bold"), (r.case, "bold cyan"),
                         f" against {r.against} (snapshot {r.created}), tolerance {r.tolerance.describe()}")
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    for col in ("path", "now", "output", "max ULP", "max abs", "differ"):
        table.add_column(col, justify="right" if col in ("max ULP", "max abs", "differ") else "left")
    for m in r.moves:
        status = Text(m.status, style=_STYLE.get(m.status, ""))
        if not m.leaves:
            table.add_row(m.spec, status, m.message or "", "", "", "")
        for i, (name, d) in enumerate(m.leaves):
            table.add_row(m.spec if i == 0 else "", status if i == 0 else "", name, str(d.max_ulp), fmt(d.max_abs),
                          f"{d.n_differ}/{d.size}")
    parts: list[RenderableType] = [head, Text(""), table, Text("")]
    for note in r.notes:
        parts.append(Text(note, style="yellow" if "differ" in note else "dim"))
    if r.changes:
        parts.append(Text("changed since the snapshot:\n  " + "\n  ".join(r.changes)))
    else:
        parts.append(Text("nothing changed in the environment since the snapshot", style="dim"))
    moved = [m.spec for m in r.moves if m.status not in ("same", "within tolerance", "still failing", "now running")]
    parts.append(Text(f"{len(moved)} of {len(r.moves)} paths moved beyond tolerance: {', '.join(moved)}" if moved
                      else f"no path moved beyond tolerance ({len(r.moves)} checked)",
                      style="bold red" if moved else "bold green"))
    return Group(*parts)


def print_check(r: CheckResult, console: Console | None = None) -> None:
    (console or Console()).print(render_check(r))
