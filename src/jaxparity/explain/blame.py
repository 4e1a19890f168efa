"""Stage 3, blame: which of the path's departures carry its output difference (``localize.blame``), and
whether the per-op values are the program's at all. Returning every intermediate can change what a
compiler fuses or a runtime serves; where it changed the path's outputs, the capture is judged by what it
reproduces (triage's output-level facts decide the rest), and said in the notes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..localize.blame import CARRIES, blame_localization
from ..localize.localizer import output_cone
from ..paths import Path
from .localize import OpView
from .measure import distance
from .triage import moved_where_differing, unstable, within_own_noise

__all__ = ["BLAMED", "PARTLY", "blame_path"]

BLAMED = 0.9  # share of the output difference the divergences injected together must reproduce to judge by them
# Of a capture that moved the outputs, the share its divergences must reproduce to be judged by them at all
# (as far as they go, where the outputs are within the model's own rounding noise): what one divergence must
# carry to count as carrying any of it (``localize.blame.CARRIES``); below it they say nothing.
PARTLY = CARRIES


def blame_path(view: OpView, fn: Callable[..., Any], args: tuple, path: Path, baseline: Path,
               path_out: Sequence[np.ndarray], base_out: Sequence[np.ndarray], notes: list[str]) -> OpView:
    """``view`` with its divergences blamed and its capture judged."""
    if view.path_vals is None or view.base_vals is None or view.localization is None:
        return view
    program, flat_args, moved = view.program, view.flat_args, view.moved
    localization = blame_localization(program, view.localization, view.path_vals, view.base_vals, flat_args,
                                      path_out, view.base_vals.outputs)
    unsound = False
    memo: dict[str, Any] = {}
    if moved:
        together = localization.blame.together if localization.blame is not None else None
        seen = f"returning every intermediate changed {moved} output element{'s' if moved > 1 else ''} of {path}"
        if not localization.local and path.has("other_compiler"):
            notes.append(f"{seen} (the model it serves computes them with other kernels than the instrumented "
                         "one): its per-op values show no op departing on its own, so the kernels of its own "
                         "artifact decide")
        elif not localization.local:
            notes.append(f"{seen} (the compiler fused differently): per-op values are evidence, cross-checked "
                         "by the compiler's own HLO")
        elif together is not None and together >= BLAMED:
            notes.append(f"{seen}, yet the divergences seen in its per-op values reproduce {together:.0%} of "
                         "its own output difference: judged by them")
        elif (count := unstable(fn, args, path, path_out, view.path_vals.outputs)) is not None:
            notes.append(f"{seen}, but only where two plain runs of {path} disagree with each other too "
                         f"({count} output element{'s' if count > 1 else ''}: {path}'s result there is not "
                         "determined by its inputs, e.g. a read of memory it does not own): judged by them")
        elif (already := moved_where_differing(path_out, view.path_vals.outputs, base_out)) is not None and \
                (together or 0) >= PARTLY:
            notes.append(f"{seen}, only where its outputs already differ from {baseline} ({already} output "
                         f"element{'s' if already > 1 else ''}: their values depend on how the program is compiled, "
                         f"e.g. a read out of bounds); the divergences seen in its per-op values reproduce "
                         f"{together:.0%} of its output difference: judged by them")
        elif (within := within_own_noise(path_out, base_out, program, flat_args, fn, args)) and (together or 0) >= PARTLY:
            notes.append(f"{seen}; the divergences seen in its per-op values reproduce {together:.0%} of its "
                         "own output difference, and its outputs are within twice the model's own rounding noise: "
                         "judged by them as far as they go")
        elif within:
            unsound = True
            memo["outputs within noise"] = (
                f"{seen}, and the divergences seen in its per-op values reproduce {together or 0:.0%} of its "
                "output difference: they are not the program it runs, so no op says which")
            notes.append(f"{seen}: its per-op values are not those of the program it runs (the divergences seen "
                         f"in them reproduce {together or 0:.0%} of its output difference): no op-level "
                         "conclusion is drawn from them; its outputs are within twice the model's own rounding "
                         "noise, judged at the outputs")
        else:
            unsound = True
            notes.append(f"{seen}: its per-op values are not those of the program it runs, the divergences seen "
                         f"in them reproduce {together or 0:.0%} of its output difference, and its outputs are "
                         "beyond the model's own rounding noise: no op-level conclusion is drawn from them")
    if moved and (unsound or not localization.local):
        differing = [i for i, (a, b) in enumerate(zip(path_out, base_out)) if distance([a], [b])[0]]
        localization = dataclasses.replace(localization, perturbed=True, cone=output_cone(program, differing))
    notes.extend(localization.notes)
    return dataclasses.replace(view, localization=localization, unsound=unsound, memo=memo)
