"""The fix search's changes at the op a reproducer isolates, for its ``--fixed`` branch.

explain's search (``explain.search``) re-runs changes at the op that carries the difference: other
formulations of its math, the op computed wider, guards. One it verified, or one that narrowed the
difference, keeps how to apply it again (``Fix.recipe``); where that names the op the reproducer isolates,
the same candidate is traced on the op's inputs and written into the script as the primitives it binds,
computed instead of the op under ``--fixed``. Where explain's search found nothing for the op, the same
candidates are tried on the region itself (one or a few ops, so each try is cheap): judged on the op's
inputs as the search judges them, then run along both paths; the first that makes them agree is used. The
script's own run with ``--fixed``, in a fresh process, has the last word on each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ..localize.region import Region, differs, run_region
from .script import function_source
from .source import NotWritable

__all__ = ["MAX_REGION_OPS", "MAX_REGION_TRIES", "Searched", "from_explanation", "on_region"]

MAX_REGION_OPS = 4  # a region this small is searched itself where explain's search found nothing at its op
MAX_REGION_TRIES = 4  # candidates run along both paths on the region


@dataclass(frozen=True)
class Searched:
    """A searched change at the region's target, written as source: ``source`` defines a function of the op's
    inputs computed instead of it under ``--fixed``."""

    source: str
    description: str  # the change at the user's line, in explain's words
    said: str  # where it was found and what that measured, for the report
    # ULP apart that --fixed lets two elements be: explain verified the change as two roundings of the same
    # math (``explain.search.rerun.NEAR_ULP``), not bit for bit
    ulp: int = 0


def _applies(fix: Any) -> bool:
    """A searched change the explanation kept: verified, or narrowing the difference (never one measured as
    no closer)."""
    return bool(fix.recipe) and (fix.verified or (fix.rerun is not None and fix.rerun.outcome == "narrows"))


def from_explanation(expl: Any, region: Region, within: tuple) -> Iterator[Searched]:
    """The changes explain's search kept at the region's target op, as the script computes them."""
    from ..explain.search.candidates import candidates
    from ..explain.search.rerun import NEAR_ULP

    if within:
        return  # a recipe names ops of the case's program, not of a loop body
    op = region.program.ops[region.target]
    for fix in (*expl.fixes, *expl.searched):
        recipe = fix.recipe
        if not _applies(fix) or region.target not in recipe["ops"] or recipe.get("candidate") is None:
            continue
        cand = next((c for c in candidates(op, recipe.get("trigger")) if c.name == recipe["candidate"]), None)
        if cand is None:
            continue  # the recipe is for another op at this index (the region's program is not the case's)
        source = _source(region, cand)
        if source is None:
            continue
        rounding = fix.verified and fix.rerun is not None and fix.rerun.outcome == "narrows"
        said = (f"explain's fix search verified it on the whole case ({fix.evidence})" if fix.verified else
                f"on the whole case explain's fix search found that it narrows the difference without restoring "
                f"parity ({fix.evidence}): a fix for this op, not for the model")
        yield Searched(source, fix.description, said, NEAR_ULP if rounding else 0)


def on_region(expl: Any, region: Region, base: list[np.ndarray], path_out: list[np.ndarray], baseline: str,
              path: str, trigger: str | None, log: Callable[[str], None] = lambda _: None) -> Searched | None:
    """The first candidate change at the region's target that makes ``baseline`` and ``path`` agree when
    each runs the region with it; None where the region is not small or none does."""
    from ..explain.search import candidates, judge_on_inputs

    if len(region.ops) > MAX_REGION_OPS:
        return None
    op = region.program.ops[region.target]
    ins = _target_inputs(region)
    position = next((k for k, (b, p) in enumerate(zip(base, path_out)) if differs([b], [p])), 0)
    tries = 0
    for cand in candidates(op, trigger):
        if judge_on_inputs(cand, op, ins, position, path_out[position], base[position]) is not None:
            continue
        if tries >= MAX_REGION_TRIES:
            break
        tries += 1
        log(f"trying {cand.name} on the region")
        try:
            agree = not differs(run_region(baseline, region, cand.instead), run_region(path, region, cand.instead))
        except Exception:  # noqa: BLE001 - a candidate a runtime refuses is no fix
            continue
        if not agree:
            continue
        source = _source(region, cand)
        if source is None:
            continue
        line = op.info.user_source or op.info.source or "the op"
        description = f"{cand.code} (at {line})"
        return Searched(source, description, _said_of_case(expl, op.info.index, cand.name))
    return None


def _said_of_case(expl: Any, index: int, name: str) -> str:
    """Where the region's search found the change, and what explain measured for the same change on the whole
    case where its search tried it."""
    said = ("explain's fix search kept no change at this op on the whole case; the same search, run on this "
            "reproducer, found this one")
    tried = next((f for f in expl.searched if f.recipe and index in f.recipe["ops"]
                  and f.recipe.get("candidate") == name), None)
    if tried is not None:
        said += (f" (on the whole case: {tried.evidence.removeprefix(name + ': ')}): a fix for this op, not for "
                 "the model")
    return said


def _target_inputs(region: Region) -> list[np.ndarray]:
    """The values that enter the region's target when JAX runs the region on its inputs."""
    from ..explain.mechanism.captured import bound

    seen: list[list[np.ndarray]] = []

    def capture(op: Any, ins: list[Any]) -> list[Any]:
        seen.append([np.asarray(x, dtype=v.aval.dtype) for x, v in zip(ins, op.eqn.invars)])
        return bound(op, ins)

    with jax.default_device(jax.devices("cpu")[0]):
        region.function(capture)(*(jax.numpy.asarray(v) for v in region.values))
    return seen[0]


def _source(region: Region, cand: Any) -> str | None:
    """The candidate, traced on the target's inputs, as the function the script computes instead of it."""
    from ..localize.program import flatten

    op = region.program.ops[region.target]
    shapes = tuple(jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in _target_inputs(region))
    try:
        program = flatten(lambda *xs: cand.instead(op, list(xs)), shapes)
        return function_source(f"fixed_{op.info.primitive}", program, cand.name,
                               several=op.eqn.primitive.multiple_results)
    except NotWritable:
        return None
