"""A case: a function plus example inputs, loaded from ``FILE.py[:FACTORY]``.

The factory returns ``(fn, args)``; ``fn(*args)`` must run. Inputs may be replaced, leaf by leaf
and bit-exactly, from an .npz or .safetensors file whose array names are the leaf names
(``arg1``, ``arg0/params/Conv_0/kernel``), or ``arr_0``, ``arr_1``... in leaf order.
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

__all__ = ["Case", "CaseError", "load_case", "override_inputs", "parse_case_spec"]


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
    if not (isinstance(made, tuple) and len(made) == 2 and callable(made[0])):
        raise CaseError(
            f"{file}:{factory}() must return (fn, args) with fn callable and args a tuple, "
            f"got {type(made).__name__}"
        )
    fn, args = made
    if not isinstance(args, (tuple, list)):
        args = (args,)
    case = Case(fn=fn, args=tuple(args), name=f"{path.name}:{factory}", source=str(path))
    return override_inputs(case, inputs) if inputs is not None else case


def override_inputs(case: Case, file: str | os.PathLike) -> Case:
    """Replace input leaves by the arrays of ``file``, matched by leaf name (or ``arr_N`` order)."""
    import jax

    from .pytree import argument_leaves

    try:
        arrays = load_arrays(file)
    except ArrayFileError as e:
        raise CaseError(str(e)) from e
    leaves = argument_leaves(case.args)
    names = [n for n, _ in leaves]
    if arrays and all(k.startswith("arr_") for k in arrays) and not set(arrays) & set(names):
        arrays = {names[int(k[4:])]: v for k, v in arrays.items() if int(k[4:]) < len(names)}
    unknown = sorted(set(arrays) - set(names))
    if unknown:
        expected = ", ".join(f"{n} {np.asarray(x).dtype}{list(np.shape(x))}" for n, x in leaves)
        raise CaseError(f"{file}: arrays {unknown} match no input of {case.name}; inputs are: {expected}")
    new_leaves = []
    for name, old in leaves:
        if name not in arrays:
            new_leaves.append(old)
            continue
        new, old_np = arrays[name], np.asarray(old)
        if new.dtype.kind == "V" and new.dtype.itemsize == old_np.dtype.itemsize:
            new = new.view(old_np.dtype)  # bf16 saved by plain np.savez comes back as raw |V2
        if new.shape != old_np.shape or new.dtype != old_np.dtype:
            kind = str(new.dtype)
            if new.dtype.kind == "V":
                kind = f"raw {new.dtype.itemsize}-byte values (|V{new.dtype.itemsize}: bfloat16 or float8 saved by np.savez)"
            raise CaseError(
                f"{file}: {name} is {kind}{list(new.shape)}, the case expects {old_np.dtype}{list(old_np.shape)}"
            )
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
    )
