"""Which of a case's arguments are the model and which are its data.

Drawn input sets (``--samples``, ``sweep``) vary the data only: the model stays the trained one. A
BatchNorm's running variance drawn like data goes negative and turns every output into NaN, which
every path then "agrees" on. An argument is the model's when it is

- marked ``jaxparity.variables(...)`` (and data when marked ``jaxparity.data(...)``; once any argument
  is marked data, the unmarked ones are the model's);
- a Flax NNX ``Module``, ``State`` or a tree of NNX ``Variable`` s; an Equinox ``Module``; any other
  callable pytree (a bound module);
- a mapping with a Flax linen collection (``params``, ``batch_stats``...): ``model.init``'s variables;
- named like one in the function's signature (``params``, ``variables``, ``weights``, ``model``...).

The rest is data. Within data, a leaf under a linen collection name stays the model's too.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ArgRole", "Marked", "argument_roles", "data", "data_leaves", "unmark", "variables"]

# The collections ``flax.linen.Module.init`` returns beside ``params``.
LINEN_COLLECTIONS = frozenset({"params", "batch_stats", "cache", "constants", "stats", "spectral", "quant"})
# Parameter names that hold a model's weights in plain JAX code (``def predict(params, x)``).
MODEL_NAMES = frozenset({"params", "param", "variables", "weights", "model", "module", "net", "network", "state",
                         "theta", "ckpt", "checkpoint", "graphdef", "model_state", "train_state", "vars"})


@dataclass(frozen=True)
class Marked:
    """An argument marked by the case as data or as the model's variables."""

    value: Any
    role: Literal["data", "variables"]


def data(value: Any) -> Marked:
    """Mark an argument of a case as data: drawn input sets vary it (and, once one is marked, only
    the marked ones)."""
    return Marked(value, "data")


def variables(value: Any) -> Marked:
    """Mark an argument of a case as the model's variables: drawn input sets never change it."""
    return Marked(value, "variables")


def unmark(args: tuple) -> tuple[tuple, dict[int, str]]:
    """The arguments without their marks, and {position: role} of the marked ones."""
    marks: dict[int, str] = {i: a.role for i, a in enumerate(args) if isinstance(a, Marked)}
    return tuple(a.value if isinstance(a, Marked) else a for a in args), marks


@dataclass(frozen=True)
class ArgRole:
    """One positional argument: ``arg0`` is the model's variables because it is an ``nnx.State``."""

    name: str  # arg0, arg1...
    role: Literal["data", "variables"]
    why: str  # "nnx.State", "marked jaxparity.data", "named 'params' in the signature", ...


def argument_roles(fn: Callable[..., Any], args: tuple, marks: Mapping[int, str] | None = None) -> tuple[ArgRole, ...]:
    """The role of each positional argument of ``fn(*args)``; see the module's docstring."""
    marks = dict(marks or {})
    names = _parameter_names(fn, len(args))
    out = []
    for i, arg in enumerate(args):
        if i in marks:
            out.append(ArgRole(f"arg{i}", marks[i], f"marked jaxparity.{marks[i]}"))  # type: ignore[arg-type]
            continue
        if "data" in marks.values():
            out.append(ArgRole(f"arg{i}", "variables", "not marked jaxparity.data"))
            continue
        why = _model_kind(arg)
        name = names[i]
        if why is None and name and name.lower() in MODEL_NAMES:
            why = f"named {name!r} in the signature"
        out.append(ArgRole(f"arg{i}", "variables" if why else "data", why or "an input"))
    return tuple(out)


def data_leaves(leaf_names: list[str], roles: tuple[ArgRole, ...]) -> set[str]:
    """The leaves of data arguments, less those under a linen collection name (``arg1/params/...``)."""
    data_args = {r.name for r in roles if r.role == "data"}
    return {n for n in leaf_names
            if n.split("/", 1)[0] in data_args and not LINEN_COLLECTIONS.intersection(n.split("/")[1:])}


def _parameter_names(fn: Callable[..., Any], n: int) -> list[str | None]:
    """The names ``fn``'s positional parameters give its first ``n`` arguments (None where unknown)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [None] * n
    names: list[str | None] = []
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return (names + [None] * n)[:n]


def _model_kind(arg: Any) -> str | None:
    """What makes ``arg`` a model rather than data (None: nothing does)."""
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None:
        if isinstance(arg, nnx.Module):
            return f"an NNX module ({type(arg).__name__})"
        if isinstance(arg, nnx.State):
            return "an nnx.State"
        if isinstance(arg, nnx.Variable):
            return f"an nnx.{type(arg).__name__}"
    eqx = sys.modules.get("equinox")
    if eqx is not None and isinstance(arg, eqx.Module) and _has_arrays(arg):
        return f"an Equinox module ({type(arg).__name__})"
    if isinstance(arg, Mapping):
        found = sorted(LINEN_COLLECTIONS.intersection(k for k in arg if isinstance(k, str)))
        if found:
            return f"linen variables ({', '.join(found)})"
    if callable(arg) and not isinstance(arg, type) and _has_arrays(arg):
        return f"a callable pytree ({type(arg).__name__})"
    if nnx is not None and _has_nnx_variables(arg, nnx):
        return "holds NNX variables"
    return None


def _has_arrays(tree: Any) -> bool:
    import jax

    return any(hasattr(x, "shape") and hasattr(x, "dtype") for x in jax.tree_util.tree_leaves(tree))


def _has_nnx_variables(tree: Any, nnx: Any) -> bool:
    import jax

    leaves = jax.tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, nnx.Variable))
    return any(isinstance(x, nnx.Variable) for x in leaves)
