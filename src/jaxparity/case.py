"""A case: a function plus example inputs, loaded from ``FILE.py[:FACTORY]``.

The factory returns ``(fn, args)`` or ``(fn, args, kwargs)``; ``fn(*args, **kwargs)`` must run.
Arguments that hold no array (``deterministic=True``, ``train=False``, a string, a tuple of ints)
are static: bound into the function, never traced. The array arguments, keyword ones after the
positional ones, are the case's inputs ``arg0``, ``arg1``...; ``jaxparity.data(x)`` and
``jaxparity.variables(v)`` mark which of them drawn input sets vary (see ``roles``).

Inputs may be replaced, leaf by leaf and bit-exactly, from an .npz or .safetensors file whose array
names are the leaf names (``arg1``, ``arg0/params/Conv_0/kernel``), or ``arr_0``, ``arr_1``... in leaf
order.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .arrayio import ArrayFileError, load_arrays
from .roles import MODEL_NAMES, ArgRole, Marked, argument_roles, unmark

__all__ = ["Case", "CaseError", "bind_static", "load_case", "override_inputs", "parse_case_spec"]


class CaseError(Exception):
    """The case cannot be loaded or its inputs do not fit; the message says what to change."""


@dataclass(frozen=True)
class Case:
    fn: Callable[..., Any]
    args: tuple
    name: str
    source: str | None = None
    input_source: str = "example inputs from the case"
    notes: tuple[str, ...] = field(default=())
    # Which arguments are the model's variables and which are data (what drawn input sets vary).
    roles: tuple[ArgRole, ...] = field(default=())
    # Inputs an --inputs file replaced with other values than the case's own (by leaf name).
    replaced: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.roles:
            args, marks = unmark(tuple(self.args))
            object.__setattr__(self, "args", args)
            object.__setattr__(self, "roles", argument_roles(self.fn, args, marks))

    def data_leaves(self) -> set[str]:
        """The input leaves drawn input sets vary (the data's float leaves are chosen among these)."""
        from .pytree import argument_leaves
        from .roles import data_leaves

        return data_leaves([n for n, _ in argument_leaves(self.args)], self.roles)


def _short_traceback(exc: BaseException, filename: str) -> str:
    """The user's own frames from a traceback, so errors point at their file, not ours."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def parse_case_spec(spec: str) -> tuple[Path, str]:
    """``'model.py:make_small'`` -> (absolute path of model.py, 'make_small'); factory defaults to make."""
    file, _, factory = spec.partition(":")
    factory = factory or "make"
    path = Path(file)
    if path.suffix != ".py":
        raise CaseError(f"{spec}: a case is a Python file, written FILE.py or FILE.py:FACTORY")
    if not path.is_file():
        raise CaseError(f"{file}: no such file")
    if not factory.isidentifier():
        raise CaseError(f"{spec}: {factory!r} is not a function name")
    return path.resolve(), factory


def load_case(spec: str, inputs: str | os.PathLike | None = None) -> Case:
    """Import ``FILE.py[:FACTORY]`` (default factory ``make``) and call the factory."""
    path, factory = parse_case_spec(spec)
    file = str(Path(spec.partition(":")[0]))
    module_name = f"jaxparity_case_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    assert module_spec and module_spec.loader
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.parent))  # let the case import its neighbours
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        raise CaseError(f"{file}: importing the case failed: {_short_traceback(e, str(path))}") from e
    finally:
        sys.path.remove(str(path.parent))
    make = getattr(module, factory, None)
    if not callable(make):
        found = sorted(n for n in dir(module) if n.startswith("make") and callable(getattr(module, n)))
        hint = f" (factories found: {', '.join(found)})" if found else ""
        raise CaseError(f"{file}: no factory function {factory!r}{hint}")
    try:
        made = make()
    except Exception as e:
        raise CaseError(f"{file}:{factory}() raised {_short_traceback(e, str(path))}") from e
    if not (isinstance(made, tuple) and len(made) in (2, 3) and callable(made[0])
            and (len(made) == 2 or isinstance(made[2], dict))):
        raise CaseError(
            f"{file}:{factory}() must return (fn, args) or (fn, args, kwargs), with fn callable, args a tuple "
            f"and kwargs a dict, got {_shape_of(made)}"
        )
    fn, args, kwargs = made if len(made) == 3 else (*made, {})
    if not isinstance(args, (tuple, list)):
        args = (args,)
    fn, args, notes, roles = bind_static(fn, tuple(args), kwargs)
    case = Case(fn=fn, args=args, name=f"{path.name}:{factory}", source=str(path), notes=notes, roles=roles)
    return override_inputs(case, inputs) if inputs is not None else case


def _shape_of(made: Any) -> str:
    if isinstance(made, tuple):
        return f"a tuple of {len(made)} ({', '.join(type(m).__name__ for m in made)})"
    return type(made).__name__


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


@dataclass(frozen=True)
class _Split:
    """One argument split into what is traced (its array leaves, other leaves None) and what is bound in:
    an Equinox module's activation functions and Python numbers, a flag, a string."""

    kind: str  # "arrays" (every leaf an array), "static" (none), "mixed"
    value: Any  # the argument as given
    dynamic: Any = None  # mixed: the argument with its non-array leaves replaced by None
    treedef: Any = None
    statics: tuple = ()  # mixed: each leaf that is not an array, None where the leaf is one

    def join(self, dynamic: Any) -> Any:
        """The argument again: ``dynamic``'s arrays (its leaves, in order) where the argument had arrays, the
        bound-in values elsewhere. A None the argument itself holds (an Equinox module's absent bias) is no
        leaf in either flattening, so it never shifts one against the other."""
        import jax

        arrays = iter(jax.tree_util.tree_leaves(dynamic))
        return jax.tree_util.tree_unflatten(self.treedef, [next(arrays) if s is None else s for s in self.statics])


def _split(value: Any) -> _Split:
    import jax

    leaves, treedef = jax.tree_util.tree_flatten(value)
    arrays = [_is_array(x) for x in leaves]
    if all(arrays) and (leaves or isinstance(value, Marked)):
        return _Split("arrays", value)
    if not any(arrays):
        return _Split("static", value)
    dynamic = jax.tree_util.tree_unflatten(treedef, [x if a else None for x, a in zip(leaves, arrays)])
    return _Split("mixed", value, dynamic, treedef, tuple(None if a else x for x, a in zip(leaves, arrays)))


def bind_static(fn: Callable[..., Any], args: tuple, kwargs: dict, numbers: bool = False
                ) -> tuple[Callable[..., Any], tuple, tuple, tuple]:
    """``fn(*args, **kwargs)`` as a function of its arrays only: the positional arguments, then the keyword
    ones. What is not an array (a flag, a string, a shape; an Equinox module's activation functions and
    Python numbers) is bound in, static, as ``equinox.filter_jit`` does; the notes say which. The roles of the
    array arguments are worked out on ``fn``'s own signature. ``numbers``: an argument that is itself a
    Python number is an input (``jaxparity.compare(fn, x, 2.5)``), as JAX traces it; inside a pytree one
    stays bound in, as ``equinox.filter_jit`` keeps it."""
    unmarked, marks = unmark(args)
    kw_unmarked, kw_marks = unmark(tuple(kwargs.values()))
    keys = list(kwargs)
    roles_all = argument_roles(fn, unmarked, marks)
    parts = [_Split("arrays", a) if numbers and isinstance(a, (int, float, complex, np.generic)) else _split(a)
             for a in unmarked]
    kw_parts = dict(zip(keys, (_split(v) for v in kw_unmarked)))
    if all(p.kind == "arrays" for p in parts) and not kwargs:
        return fn, unmarked, (), tuple(roles_all)
    dynamic = [i for i, p in enumerate(parts) if p.kind != "static"]
    kw_dynamic = [k for k, p in kw_parts.items() if p.kind != "static"]

    def bound(*arrays: Any) -> Any:
        it = iter(arrays)

        def given(p: _Split) -> Any:
            if p.kind == "static":
                return p.value
            x = next(it)
            return p.join(x) if p.kind == "mixed" else x

        full = [given(p) for p in parts]
        return fn(*full, **{k: given(p) for k, p in kw_parts.items()})

    bound.__name__ = bound.__qualname__ = getattr(fn, "__qualname__", None) or type(fn).__name__
    traced = [parts[i] for i in dynamic] + [kw_parts[k] for k in kw_dynamic]
    new_args = tuple(p.dynamic if p.kind == "mixed" else p.value for p in traced)
    roles = [ArgRole(f"arg{j}", roles_all[i].role, roles_all[i].why) for j, i in enumerate(dynamic)]
    kw_roles = {keys[i]: r for i, r in kw_marks.items()}
    for j, k in enumerate(kw_dynamic, start=len(dynamic)):
        role = kw_roles.get(k) or ("variables" if "data" in marks.values() or "data" in kw_marks.values()
                                   or k.lower() in MODEL_NAMES else "data")
        roles.append(ArgRole(f"arg{j}", role, f"keyword argument {k}"))  # type: ignore[arg-type]
    said = [f"{k}={p.value!r}" for k, p in kw_parts.items() if p.kind == "static"]
    said += [f"argument {i} = {p.value!r}" for i, p in enumerate(parts) if p.kind == "static"]
    mixed = [(f"arg{j}", p) for j, p in enumerate(traced) if p.kind == "mixed"]
    notes = []
    if said:
        notes.append(f"static, bound into the function: {', '.join(said)}"[:300])
    for name, p in mixed:
        kinds = sorted({type(x).__name__ for x in p.statics if x is not None})
        n = sum(x is not None for x in p.statics)
        notes.append(f"{name} ({type(p.value).__name__}): {n} leaves that are not arrays ({', '.join(kinds)}) bound in, "
                     "static")
    if kw_dynamic:
        notes.append("keyword inputs: " + ", ".join(f"{k} is arg{j}" for j, k in enumerate(kw_dynamic, start=len(dynamic))))
    return bound, new_args, tuple(notes), tuple(roles)


def override_inputs(case: Case, file: str | os.PathLike) -> Case:
    """Replace input leaves by the arrays of ``file``, matched by leaf name (or ``arr_N`` order)."""
    import jax

    from .pytree import argument_leaves, host

    try:
        arrays = load_arrays(file)
    except ArrayFileError as e:
        raise CaseError(str(e)) from e
    from .bundle import META, is_bundle_entry

    if META in arrays:  # a `jaxparity capture` bundle: its inputs, not its outputs and per-op values
        arrays = {k: v for k, v in arrays.items() if not is_bundle_entry(k)}
    leaves = argument_leaves(case.args)
    names = [n for n, _ in leaves]
    if arrays and all(k.startswith("arr_") for k in arrays) and not set(arrays) & set(names):
        arrays = {names[int(k[4:])]: v for k, v in arrays.items() if int(k[4:]) < len(names)}
    unknown = sorted(set(arrays) - set(names))
    if unknown:
        expected = ", ".join(f"{n} {np.asarray(x).dtype}{list(np.shape(x))}" for n, x in leaves)
        raise CaseError(f"{file}: arrays {unknown} match no input of {case.name}; inputs are: {expected}")
    new_leaves, replaced = [], []
    for name, old in leaves:
        if name not in arrays:
            new_leaves.append(old)
            continue
        new, old_np = arrays[name], np.asarray(host(old))
        if new.dtype.kind == "V" and new.dtype.itemsize == old_np.dtype.itemsize:
            new = new.view(old_np.dtype)  # bf16 saved by plain np.savez comes back as raw |V2
        if new.shape != old_np.shape or new.dtype != old_np.dtype:
            kind = str(new.dtype)
            if new.dtype.kind == "V":
                kind = f"raw {new.dtype.itemsize}-byte values (|V{new.dtype.itemsize}: bfloat16 or float8 saved by np.savez)"
            raise CaseError(
                f"{file}: {name} is {kind}{list(new.shape)}, the case expects {old_np.dtype}{list(old_np.shape)}"
            )
        if new.tobytes() != old_np.tobytes():
            replaced.append(name)
        new_leaves.append(jax.numpy.asarray(new))
    treedef = jax.tree_util.tree_structure(case.args)
    args = jax.tree_util.tree_unflatten(treedef, new_leaves)
    used = ", ".join(n for n in names if n in arrays)
    return Case(
        fn=case.fn,
        args=tuple(args),
        name=case.name,
        source=case.source,
        input_source=f"{Path(file).name} ({used}); other inputs from the case",
        notes=case.notes,
        roles=case.roles,
        replaced=tuple(replaced),
    )
