"""A change the fix search found (``explain.search``), applied to the user's function again: the same
candidate, by name, at the same ops of the flattened program (``Fix.recipe``), so that ``--write-fixed``
writes a case file whose model is the one the search verified, and any path can re-run it.

The recipe names ops by their index in the program flattened for the case's own argument shapes: the
written case re-flattens the function for the arguments it is called with and checks that each op is still
the primitive it was (a model edited since is an error that says so, never another op changed silently).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["apply_recipe", "write_searched_case"]


def apply_recipe(fn: Callable[..., Any], recipe: dict) -> Callable[..., Any]:
    """``fn`` with the recipe's candidate in place of its ops: {"ops": [indices], "candidate": name,
    "trigger": the trigger's words or None}."""
    import jax

    from ..explain.mechanism.captured import with_op
    from ..explain.search.candidates import candidates
    from ..localize.program import flatten

    def changed(*args: Any) -> Any:
        program = flatten(fn, args)
        ops = list(recipe["ops"])
        if any(i >= len(program.ops) for i in ops):
            raise ValueError(f"the model has {len(program.ops)} ops, the recipe names op #{max(ops)}: it was "
                             "written for another version of the model")
        first = program.ops[ops[0]]
        cand = next((c for c in candidates(first, recipe.get("trigger")) if c.name == recipe["candidate"]), None)
        if cand is None:
            raise ValueError(f"op #{ops[0]} ({first.info.primitive}) has no candidate {recipe['candidate']!r}: the "
                             "model changed since the fix was found")
        if any(program.ops[i].info.primitive != first.info.primitive for i in ops):
            raise ValueError("the recipe's ops are no longer the same primitive: the model changed since")
        flat = with_op(program, set(ops), cand.instead)(*args)
        return jax.tree_util.tree_unflatten(program.out_tree, list(flat))

    return changed


def write_searched_case(case_spec: str, out_path: str | os.PathLike, fix: Any) -> str:
    """Write a case file to ``out_path`` whose ``make()`` returns the case of ``case_spec`` with the fix the
    search verified (``fix``: a ``Fix`` with a recipe) applied. Returns the text written."""
    from ..case import parse_case_spec
    from .rounding import LOADER, _docstring_safe

    source, factory = parse_case_spec(case_spec)
    doc = _docstring_safe("\n".join([
        f"{source.name}:{factory} with the change jaxparity's fix search verified.",
        "",
        f"Original case: {source}:{factory}",
        "",
        *textwrap.wrap(f"The change: {fix.description}", 88),
        "",
        *textwrap.wrap(f"Verified: {fix.evidence}", 88),
        "",
        *textwrap.wrap("Here it is applied by jaxparity.fixes.searched.apply_recipe, at the same ops of the "
                       "flattened program; write the change at the line above in the model itself.", 88),
    ]))
    text = f'''"""{doc}
"""

import importlib.util
import os
import sys

from jaxparity.fixes.searched import apply_recipe

ORIGINAL = {str(source)!r}
FACTORY = {factory!r}
RECIPE = {fix.recipe!r}


{LOADER}

def make():
    """The original case's (fn, args), with fn changed as the fix search verified."""
    fn, args = getattr(_load_original(), FACTORY)()
    return apply_recipe(fn, RECIPE), args
'''
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text
