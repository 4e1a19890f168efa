"""Terminal rendering of explanations: where, how, why, and the verified fix, per diverging path."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .format import HUGE_ULP, HUGE_ULP_NOTE, NAN_ULP, advice, explaining_cause, fmt, readable, ulp_text

__all__ = ["fit_columns", "group_explanations", "iteration_growth", "layer_growth", "local_distance",
           "render_brief", "render_explanation", "stacked"]

_STATUS = {"confirmed": "bold green", "partly": "yellow", "noise": "cyan", "refuted": "dim", "not run": "dim"}


def layer_growth(loc: Any, depth: int = 2) -> list[tuple[str, int, float, int]]:
    """Per layer (name stack cut to ``depth`` levels), in program order: (layer, first op, max abs, max ULP)."""
    rows: dict[str, list[Any]] = {}
    for d in loc.drift:
        layer = "/".join(d.name_stack.split("/")[:depth]) or "(top level)"
        row = rows.setdefault(layer, [layer, d.index, 0.0, 0])
        row[2], row[3] = max(row[2], d.max_abs), max(row[3], d.max_ulp)
    return [tuple(r) for r in rows.values()]  # type: ignore[misc]


def iteration_growth(d: Any) -> tuple[Any, tuple[int, ...]] | tuple[()]:
    """(outermost loop frame, max ULP of the carry entering each of its iterations) for a local
    divergence inside a loop: how the difference grows iteration by iteration (layer by layer of an
    nn.scan stack); () when there is none to show."""
    frames = [f for f in d.within if f.carry_ulp]
    return (frames[0], frames[0].carry_ulp) if frames else ()


def _where(op: Any) -> str:
    src = op.user_source or op.source or "?"
    if op.source and op.source != op.user_source:
        src += f" (via {op.source})"
    return src


def fit_columns(table: Table, console: Any, max_width: int) -> bool:
    """Give each column of ``table`` a width of at least its longest word (its longest cell where it
    does not wrap) and share the rest of ``max_width`` in proportion to what each column still wants.
    False, with the widths left free, where even the longest words do not fit side by side: rich's own
    sharing would then break a word or a number ("bui / ltin", "(case.py:16 / )")."""
    wide = console.options.update_width(10_000)
    columns = table.columns
    lo, hi = [], []
    for column in columns:
        column.width = None
        header = Measurement.get(console, wide, Text(str(column.header or ""))).maximum  # headers stay whole
        cells = [c if isinstance(c, Text) else Text(str(c)) for c in column._cells]
        sizes = [Measurement.get(console, wide, c) for c in cells]
        least, most = max([header] + [m.minimum for m in sizes]), max([header] + [m.maximum for m in sizes])
        lo.append(max(most if column.no_wrap else least, 1))
        hi.append(max(most, 1))
    for column, w in zip(columns, lo):
        column.width = w
    extra = console.measure(table, options=wide).maximum - sum(lo)  # padding and rules between columns
    spare = max_width - extra - sum(lo)
    if spare < 0:
        for column in columns:
            column.width = None
        return False
    widths = list(lo)
    while spare > 0:
        need = [h - w for w, h in zip(widths, hi)]
        total = sum(need)
        if total == 0:
            break
        give = [n * spare // total for n in need] if total > spare else need
        if not any(give):  # the last few columns: one more to the ones that want most
            give = [0] * len(need)
            give[need.index(max(need))] = 1
        widths = [w + g for w, g in zip(widths, give)]
        spare -= sum(give)
    for column, w in zip(columns, widths):
        column.width = w
    return True


def stacked(table: Table) -> Any:
    """The rows of ``table`` as lines ("header: value · ..."), under its title: where the table does not
    fit, no cell is broken inside a word or a number."""
    columns = table.columns
    if table.title:
        yield Text(str(table.title), style="italic")
    for row in zip(*(c._cells for c in columns)):
        line = Text()
        for col, cell in zip(columns, row):
            value = cell if isinstance(cell, Text) else Text(str(cell))
            if not value.plain.strip():
                continue
            if len(line):
                line.append(" · ")
            if col.header and str(col.header).strip():
                line.append(f"{col.header}: ", style="dim")
            line.append(" ".join(value.plain.split("\n")) if "\n" in value.plain else value)
        yield line


class _Fit:
    """A table where its columns fit side by side with no word broken (``fit_columns``), else the same
    rows stacked as lines ("header: value · ..."): in a narrow CI log (80 columns) no cell is broken
    inside a word or a number."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def __rich_console__(self, console: Any, options: Any) -> Any:
        if fit_columns(self.table, console, options.max_width):
            yield self.table
        else:
            yield from stacked(self.table)


def local_distance(d: Any) -> str:
    """A local divergence's largest distance, in its units: '10 ULP' for floats, '7' for integers (an
    absolute difference), 'NaN' where the only differences are a NaN against a number."""
    if d.max_ulp == 0 and d.n_differ:
        return "NaN"  # ULP distances leave NaN mismatches out: nothing else differs
    if d.max_ulp == NAN_ULP:
        return "NaN"
    outputs = [o.split("[", 1)[0] for o in d.op.outputs]
    floats = [o for o in outputs if o.startswith(("float", "bfloat", "complex"))]
    return f"{d.max_ulp} ULP" if floats and len(floats) == len(outputs) else str(d.max_ulp)


def _divergence_key(e: Any) -> tuple | None:
    """What makes two paths' divergences the same: baseline, first local op (loop frames, op, line), the
    confirmed causes and which side is wrong (a path that is right where the baseline is wrong is not
    the same as one wrong the same way). None when there is no first op to compare (explained alone)."""
    loc = e.localization
    if loc is None or loc.lead is None:
        return None
    first = loc.lead
    causes = tuple(sorted(c.cause for c in e.causes if c.status in ("confirmed", "partly", "noise")))
    ev = first.elements
    wrong = ev.wrong_side() if ev is not None else None
    flushes = tuple(sorted(ev.flushes)) if ev is not None else ()
    return (e.baseline, first.where(), first.op.user_source, first.op.source, causes, wrong, flushes)


def group_explanations(explanations: Any) -> list[tuple[Any, list[Any]]]:
    """Explanations grouped by distinct divergence, in order: (the one shown in full, the other paths
    with the same first op and causes). jit, export and savedmodel often share one."""
    groups: list[tuple[Any, list[Any]]] = []
    keys: list[tuple | None] = []
    for e in explanations:
        key = _divergence_key(e)
        host = next((k for k, (g, _) in enumerate(groups) if g.path == getattr(e, "same_values", None)), None)
        adopted = any(c.experiment == f"{e.same_values}'s explanation" for c in e.causes) if host is not None else False
        if host is not None and (adopted or key is None or key == keys[host]):
            groups[host][1].append(e)  # the same values bit for bit, explained alike: one explanation
        elif key is not None and key in keys:
            groups[keys.index(key)][1].append(e)
        else:
            groups.append((e, []))
            keys.append(key)
    return groups


def render_brief(e: Any, same: Any = (), result: Any = None) -> Group:
    """The short explanation (``report.brief``): triage, the divergence that carries the error, who is
    right, the cause, each fix as its re-run showed it; ``same``: paths explained alike, named in the title."""
    from .brief import group_sizes, rerun_words, brief, model_change

    who = ", ".join([e.path, *(o.path for o in same)])
    p = next((x for x in result.paths if x.spec == e.path), None) if result is not None else None
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")  # a word wider than the column (a path) breaks, never cut with …
    sizes = None
    if same and result is not None:
        grouped = [x for x in result.paths if x.spec in {e.path, *(o.path for o in same)}]
        sizes = group_sizes(grouped, e.baseline)
    for label, text in brief(e, p):
        grid.add_row(label, Text(text))
        if label == "triage" and sizes:
            grid.add_row("", Text(sizes))
    for o in same:
        for fix in o.fixes:
            if fix.verified:  # as the shown path's: only fixes that restore parity
                what = model_change(fix, o.path)
                head = (f"✓ {what}" if what and f" on {o.path}" in what else f"{o.path}: ✓ {what}" if what else
                        f"{o.path}: ✓ {fix.kind} {fix.spec or fix.description}")
                grid.add_row("fix", Text(f"{head}: {rerun_words(fix, o.path, o.baseline)}"))
    for note in e.notes:
        if note.startswith(("explaining failed", "per-op values of", "explained on")):
            grid.add_row("note", Text(note, style="dim"))
    parts: list[Any] = [Text(f"why {who} {'differ' if same else 'differs'} from {e.baseline}", style="bold underline"),
                        grid]
    if e.remainder is not None:
        parts += [Text(f"what remains with {e.applied} applied", style="bold"),
                  render_brief(e.remainder, result=None)]
    return Group(*parts)


def render_explanation(e: Any, verbose: bool = False, same: Any = (), result: Any = None,
                       all_causes: bool = False) -> Group:
    """One explanation: short by default (``render_brief``); in full with ``verbose`` (every op that
    departs, the drift, compiler evidence, candidate semantics, each cause tested). ``same``: other paths
    with the same divergence, named in the title, their own fixes listed at the end."""
    if not verbose:
        return render_brief(e, same, result)
    from .brief import cost_words

    who = ", ".join([e.path, *(o.path for o in same)])
    verb = "differ" if same else "differs"
    parts: list[Any] = [render_brief(e, same, result)]
    del who, verb
    if same:
        parts.append(Text(f"{', '.join(o.path for o in same)}: the same first op and the same causes as {e.path}; "
                          "explained once (the JSON has each path in full)", style="italic"))
    parts.append(Text(""))
    loc = e.localization
    if loc is not None and loc.perturbed and loc.cone:
        t = Table(title="ops computed together where the difference arises (per-op values hide it)",
                  title_justify="left", show_edge=False, header_style="bold", pad_edge=False)
        for col in ("#", "op", "module", "line"):
            t.add_column(col, overflow="fold")
        for o in loc.cone:
            t.add_row(Text(str(o.index)), Text(f"{o.primitive} {','.join(o.inputs)}->{','.join(o.outputs)}"),
                      Text(o.name_stack), Text(_where(o)))
        parts.append(_Fit(t))
    if loc is not None and loc.blame is not None and loc.blame.carriers:
        b = loc.blame
        t = Table(title=f"what carries the output difference (each divergence's own error injected into a replay by "
                  f"{b.method}; all together: {b.together:.0%})", title_justify="left", show_edge=False,
                  header_style="bold", pad_edge=False)
        needed = blame_needed_shown(b)
        cols = ("#", "op", "line", "alone") + (("needed",) if needed else ()) + (("measured on",) if b.screened else ())
        for col in cols:
            t.add_column(col, overflow="fold", justify="right" if col in ("#", "alone", "needed") else "left")
        for c in b.carriers:
            d = loc.local[c.divergence]
            t.add_row(Text(str(d.op.index)), Text(f"{d.op.primitive}"), Text(_where(d.op)), Text(f"{c.alone:.0%}"),
                      *((Text(f"{c.needed:.0%}"),) if needed else ()),
                      *((Text("screen" if c.screened else "replay"),) if b.screened else ()))
        parts.append(_Fit(t))
        parts.append(Text(blame_legend(b), style="italic"))
    if loc is not None:
        real = [d for d in loc.local if not d.within_noise_bound]
        shown = real[:5] or list(loc.local[:5])
        if shown:
            opened = " and the loop bodies opened" if any(d.within for d in loc.local) else ""
            left = len(real or loc.local) - len(shown)
            t = Table(title=f"first ops that diverge on their own ({len(loc.local)} among {loc.ops} ops{opened}; "
                      f"{sum(d.within_noise_bound for d in loc.local)} are reduction noise"
                      + (f"; the first {len(shown)} shown, {left} more in --json" if left else "") + ")",
                      title_justify="left", show_edge=False, header_style="bold", pad_edge=False)
            loops = any(d.within for d in shown)
            for col in ("#",) + (("in loop",) if loops else ()) + ("op", "module", "line", "max diff", "differ",
                                                                     "declared kept by"):
                t.add_column(col, overflow="fold", no_wrap=col in ("#", "max diff", "differ"),
                             justify="right" if col in ("#", "max diff", "differ") else "left")
            for d in shown:
                t.add_row(Text(str(d.op.index)), *((Text(": ".join(f.describe() for f in d.within)),) if loops else ()),
                          Text(f"{d.op.primitive} {','.join(d.op.inputs)}->{','.join(d.op.outputs)}"),
                          Text(d.op.name_stack or ""), Text(_where(d.op)), Text(local_distance(d)),
                          Text(f"{d.n_differ}/{d.size}"), Text(d.kept_by(e.path, e.baseline)))
            parts.append(_Fit(t))
            for d in shown:
                if d.detail:
                    parts.append(Text(f"#{d.op.index}: {d.detail}", style="italic"))
                variant = d is loc.lead and getattr(explaining_cause(e.causes, d), "cause", "") == "semantic-variant"
                said = d.elements_said(e.path, e.baseline, variant)
                if said is not None:
                    parts.append(Text(f"#{d.op.index}: {readable(said)}", style="italic"))
                for m in d.semantics:
                    if m.reproduces_path:
                        parts.append(Text(f"#{d.op.index}: {m.description} reproduces {e.path} bit for bit "
                                          "on the op's own captured inputs", style="italic"))
            growth_rows = iteration_growth(shown[0])
            if growth_rows:
                frame, ulps = growth_rows
                parts.append(Text(f"carry entering each iteration of {frame.describe().rsplit(',', 1)[0]}, max ULP from "
                                  f"{e.baseline}'s: {', '.join(map(str, ulps[:64]))}"
                                  + (" ..." if len(ulps) > 64 else "")))
        growth = layer_growth(loc)
        if len(growth) > 1:
            g = Table(title="how the difference grows, layer by layer", title_justify="left", show_edge=False,
                      header_style="bold", pad_edge=False)
            for col in ("layer", "from op", "max abs", "max ULP"):
                g.add_column(col, justify="left" if col == "layer" else "right")
            for layer, first, mx, ulp in growth:
                g.add_row(Text(layer), str(first), fmt(mx), ulp_text(ulp))
            parts.append(_Fit(g))
            if any(ulp >= HUGE_ULP for *_, ulp in growth):
                parts.append(Text(HUGE_ULP_NOTE, style="dim"))
    ev = e.evidence
    if ev is not None and ev.widened:
        lines = Text(f"compiler evidence ({ev.path}): {len(ev.widened)} of {ev.declared_narrow_ops} declared "
                     "narrow results kept wider in the optimized HLO\n", style="bold")
        for w in ev.widened[:5]:
            by = f", rounding removed by pass {w.removed_by_pass}" if w.removed_by_pass else ""
            lines.append(f"  {w.primitive} declared {w.declared_dtype}, computed {w.computed_dtype} at "
                         f"{w.source or '?'}{by}\n    {w.hlo_line}\n")
        parts.append(lines)
    fp = e.fingerprint
    if fp is not None and fp.matches:
        f = Table(title="which semantics reproduce these outputs", title_justify="left", show_edge=False,
                  header_style="bold", pad_edge=False)
        for col in ("candidate", "exact", "max ULP", "differ", "what it means"):
            f.add_column(col)
        for m in fp.matches:
            # no max ULP where an element is a NaN against a number
            f.add_row(Text(m.candidate), Text("yes", style="bold green") if m.exact else Text(""),
                      Text("NaN" if m.max_ulp is None else str(m.max_ulp)), Text(str(m.n_differ)),
                      Text(m.description))
        parts.append(_Fit(f))
    c = Table(title="causes, each tested", title_justify="left", show_edge=False, header_style="bold",
              pad_edge=False)
    for col in ("cause", "result", "experiment", "evidence"):
        c.add_column(col, overflow="fold")
    for v in e.causes:
        if v.status == "not run" and not all_causes:
            continue
        c.add_row(Text(v.title), Text(v.status, style=_STATUS.get(v.status, "")), Text(readable(v.experiment)),
                  Text(readable(v.evidence)))
    not_run = sum(v.status == "not run" for v in e.causes)
    if e.causes:  # none when explaining the path failed: the summary says why
        parts.append(_Fit(c))
    if not_run and not all_causes:
        parts.append(Text(f"{not_run} other known causes not tested: they cannot apply here or are not needed "
                          "(JSON lists why)", style="dim"))
    for fix in e.fixes:
        mark = _fix_mark(fix)
        cost = f"\n  {cost}" if (cost := cost_words(fix)) else ""
        parts.append(Text.assemble("fix (", fix.kind, "): ", mark, f"  {fix.spec or ''}\n  {fix.description}\n  "
                                   f"{readable(fix.evidence)}{cost}"))
    for line in advice(e):  # the fix or workaround of the cause that explains it, where no re-run shows it
        head, _, rest = line.partition(": ")
        parts.append(Text.assemble((f"{head}: ", "bold"), rest))
    if getattr(e, "searched", ()):
        s = Table(title=f"the fix search: {len(e.searched)} change{'s' if len(e.searched) != 1 else ''} tried that "
                  "did not restore parity, and why", title_justify="left", show_edge=False, header_style="bold",
                  pad_edge=False)
        for col in ("change", "why not"):
            s.add_column(col, overflow="fold")
        for fix in e.searched:
            s.add_row(Text(readable(fix.description)), Text(readable(fix.evidence)))
        parts.append(_Fit(s))
    for o in same:
        for fix in o.fixes:
            mark = _fix_mark(fix)
            parts.append(Text.assemble(f"{o.path}: fix (", fix.kind, "): ", mark, f"  {fix.spec or ''}"))
    for note in e.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    if e.remainder is not None:  # a partial fix applied: what remains, explained the same way
        parts += [Text(""), Text(f"what remains with {e.applied} applied", style="bold"),
                  render_explanation(e.remainder, verbose, all_causes=all_causes)]
    return Group(*parts)


def _fix_mark(fix: Any) -> Text:
    """As the short explanation marks a fix (``brief``): ✓ restores parity, ◐ narrows, ✗ neither."""
    from .brief import narrows

    if fix.verified:
        return Text("✓ verified", style="green")
    if narrows(fix):
        return Text("◐ narrows, not parity", style="yellow")
    return Text("✗ not verified", style="red")


def blame_needed_shown(b: Any) -> bool:
    """Whether the blame table shows its "needed" column: only where leaving some divergence out of all of
    them together loses a share worth a percent (else the column would read 0% throughout)."""
    return any(round(c.needed, 2) > 0 for c in b.carriers)


def blame_legend(b: Any) -> str:
    """What the blame table's columns mean, said under it (the terminal and the HTML report alike)."""
    said = ("alone: the share of the output difference reproduced when only that divergence's own error is "
            "injected (shares overlap: several may each reproduce most of it)")
    if blame_needed_shown(b):
        return said + ("; needed: the share lost when it is left out of all of them injected together (0%: the "
                       "others carry the difference without it)")
    return said + ("; leaving any one out of all of them injected together loses under 1% of it (each one's "
                   "difference is carried by the others too)")
