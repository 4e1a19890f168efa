"""Stage 2, localize: both sides' values of every op, captured along their own paths, and the ops that
depart on their own inputs (``localize.localizer``), loops and branches opened where they diverge."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..localize.localizer import Localization, arg_values, localize
from ..localize.program import FlatProgram
from ..localize.values import OpValues, op_values
from ..paths import Path
from .context import first_line
from .measure import distance

__all__ = ["OpView", "localize_path"]


@dataclass
class OpView:
    """What the per-op values show of one path against its baseline: both sides' values (None where they
    could not be captured), where the path departs, and, once blamed, whether the values are the program's."""

    program: FlatProgram
    flat_args: Sequence[Any]
    base_vals: OpValues | None = None
    path_vals: OpValues | None = None
    localization: Localization | None = None
    moved: int = 0  # output elements that returning every intermediate changed on the path
    # The per-op values are not the program's, and what they show does not reproduce its outputs: causes read
    # no op-level view then (the runtime's own artifact and whole-program re-runs still decide).
    unsound: bool = False
    memo: dict[str, Any] = dataclasses.field(default_factory=dict)  # what the capture says to later stages


def localize_path(program: FlatProgram, flat_args: Sequence[Any], path: Path, baseline: Path,
                  path_out: Sequence[np.ndarray], notes: list[str], keep: dict) -> OpView:
    """Capture both sides' per-op values and localize the path's departures, loops opened. ``keep`` receives
    the program and both sides' values of the case (key ``()``) and of every loop body opened."""
    if path.has("observed"):
        try:
            found = path.captured_values(program)  # type: ignore[attr-defined]
        except Exception as e:  # a bundle of another program: said, explained from the outputs
            notes.append(f"{first_line(e)}; explained by fingerprint only")
            return OpView(program, flat_args)
        if found is not None and found.note:
            notes.append(f"the bundle {path.file}: {found.note}")  # type: ignore[attr-defined]
        path_vals = None if found is None else OpValues(
            path.spec, dict(found.values), list(found.outputs), [f"captured by `jaxparity capture` on {found.device}"],
            arg_values(program, flat_args))
        if path_vals is None:
            notes.append("outputs read from a file have no per-op values: explained by fingerprint only "
                         "(`jaxparity capture` writes a file that has them)")
            return OpView(program, flat_args)
        base_vals = capture(program, baseline, flat_args, notes)
    else:
        # The path's own values first: the baseline's are the same for every path explained, and another worker
        # explaining another path has often kept them in jaxparity's cache meanwhile (read, not captured again).
        own: list[str] = []
        path_vals = capture(program, path, flat_args, own)
        base_vals = capture(program, baseline, flat_args, notes) if path_vals is not None else None
        notes += own
    if base_vals is None or path_vals is None:
        return OpView(program, flat_args)
    localization = localize(program, path_vals, base_vals, flat_args, baseline.spec)
    keep[()] = (program, path_vals, base_vals)
    localization = open_loops(program, localization, path_vals, base_vals, flat_args, path_out, notes, keep)
    return OpView(program, flat_args, base_vals, path_vals, localization, moved=distance(path_vals.outputs, path_out)[0])


def capture(program: FlatProgram, path: Path, flat_args: Sequence[Any], notes: list[str]) -> OpValues | None:
    """Every op's values along ``path``, or None with a note saying why they could not be captured
    (e.g. a runtime with no kernel for an op only the instrumented program has)."""
    try:
        found = op_values(program, path.spec, flat_args)
        if found.reused:
            notes.append(f"jaxparity's cache held the per-op values of {path} (entry {found.reused}: the same "
                         "program, inputs, options and versions): reused")
        return found
    except Exception as e:
        other = (" (the program that returns every intermediate is converted into another model than the one "
                 "served, which runs)" if path.has("other_compiler") else "")
        notes.append(f"per-op values of {path} could not be captured ({type(e).__name__}: {first_line(e)}){other}: "
                     "explained from the outputs only")
        return None


def open_loops(program: FlatProgram, loc: Localization, path_vals: OpValues, base_vals: OpValues,
               flat_args: Sequence[Any], path_out: Sequence[np.ndarray], notes: list[str],
               keep: dict | None = None) -> Localization:
    """Open the loops and branches that diverge on their own (``localize.loops``)."""
    from ..localize.loops.descend import open_loops as descend

    try:
        return descend(program, loc, path_vals, base_vals, case=program, flat_args=flat_args,
                       plain_outputs=path_out, keep=keep)
    except Exception as e:  # the loop op itself stays the finding
        notes.append(f"loops could not be opened ({type(e).__name__}: {first_line(e)})")
        return loc
