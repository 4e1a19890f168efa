"""jax2onnx's plugins, imported only for the model libraries the program uses.

On its first conversion in a process jax2onnx imports every module under ``jax2onnx.plugins``
(``plugin_system.import_all_plugins``). Those for a model library (Equinox's ``eqx.nn`` layers, their
examples) import the library and build example modules as they are imported: jax2onnx 0.17.1's Equinox
plugins draw their weights with ``jax.random``, 67 XLA compiles, 8.6 s of the 13.9 s it took to convert
a Hugging Face GPT-2 that uses no Equinox. A plugin for a library the program never imported cannot
convert any of its calls (it replaces that library's layers while jax2onnx traces), so ``load`` leaves
it out, and imports it at the first conversion after the library has been imported.
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
from pathlib import Path

__all__ = ["LIBRARIES", "load", "left_out"]

# Model libraries whose jax2onnx plugins import them, with the folder names those plugins live under.
LIBRARIES = {"equinox": ("equinox", "eqx"), "dm_pix": ("dm_pix",)}
_IMPORTS = re.compile(r"^(?:import|from)\s+(" + "|".join(LIBRARIES) + r")\b", re.M)  # at the top level
_LEFT_OUT: dict[str, list[str]] = {}  # library -> plugin modules not imported (it was not imported)
_log = logging.getLogger(__name__)


def load() -> None:
    """Import jax2onnx's plugins as ``import_all_plugins`` does, but none of a library's own folder that
    imports a library of ``LIBRARIES`` the program has not imported; those left out before are imported once
    theirs is. A jax2onnx without this plugin system is left to import its own."""
    try:
        from jax2onnx.plugins import plugin_system as ps
    except ImportError:
        return
    if not hasattr(ps, "_already_imported_plugins"):
        return
    if ps._already_imported_plugins:
        for library in [lib for lib in _LEFT_OUT if lib in sys.modules]:
            _import(_LEFT_OUT.pop(library))
        return
    root = Path(ps.__file__).parent
    wanted: list[str] = []
    for py in sorted(root.rglob("*.py")):
        if py.name in {"plugin_system.py", "__init__.py"}:
            continue
        parts = py.relative_to(root).with_suffix("").parts
        name = ".".join(("jax2onnx.plugins", *parts))
        # A plugin of the library's own folder that imports it: one elsewhere (a jax primitive's) is always kept.
        needs = {m.group(1) for m in _IMPORTS.finditer(py.read_text(errors="replace"))
                 if set(LIBRARIES[m.group(1)]) & set(parts[:-1])} - set(sys.modules)
        if needs:
            _LEFT_OUT.setdefault(sorted(needs)[0], []).append(name)
        else:
            wanted.append(name)
    _import(wanted)
    ps._already_imported_plugins = True


def left_out() -> dict[str, int]:
    """{library: plugin modules not imported}, for this process so far."""
    return {lib: len(mods) for lib, mods in _LEFT_OUT.items()}


def _import(modules: list[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as e:  # as jax2onnx does: one broken plugin does not stop the others
            _log.warning("jax2onnx plugin %s not imported: %s", name, e)
