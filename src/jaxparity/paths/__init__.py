"""Execution paths, registered by name. ``make_path('jit:xla_allow_excess_precision=false')``."""

from __future__ import annotations

import difflib

from .base import (CAPABILITIES, Path, PathError, PathOptionError, PathUnavailable, parse_spec, spec_env, with_env,
                   without_env)
from .eager import EagerPath
from .iree import IreePath
from .observed import ObservedPath
from .onnx import OnnxPath, OnnxReferencePath
from .reference import DeclaredPath, F64Path
from .savedmodel import SavedModelPath
from .savedmodel_c import SavedModelCPath
from .tflite import TFLitePath
from .xla import ExportPath, JitPath

__all__ = [
    "CAPABILITIES",
    "DEFAULT_BASELINE",
    "DEFAULT_PATHS",
    "PATHS",
    "Path",
    "PathError",
    "PathOptionError",
    "PathUnavailable",
    "as_path",
    "make_path",
    "parse_spec",
    "spec_env",
    "without_env",
    "with_env",
    "xla_twin",
]

PATHS: dict[str, type[Path]] = {
    cls.name: cls for cls in (EagerPath, JitPath, ExportPath, SavedModelPath, SavedModelCPath, TFLitePath, IreePath, OnnxPath,
                 OnnxReferencePath, DeclaredPath, F64Path, ObservedPath)
}

DEFAULT_PATHS: tuple[str, ...] = ("eager", "jit", "export", "savedmodel", "declared", "f64")
DEFAULT_BASELINE = "eager"  # what a user's research runs: op by op


def make_path(spec: str) -> Path:
    """The path for ``NAME[:key=value,...]``; raises PathOptionError naming what is wrong."""
    name, options = parse_spec(spec)
    if name not in PATHS:
        near = difflib.get_close_matches(name, PATHS, 2)
        raise PathOptionError(f"unknown path {name!r}" + (f"; did you mean {' or '.join(near)}?" if near else "")
                              + f" (known paths: {', '.join(PATHS)})")
    return PATHS[name](options, env=spec_env(spec))


def as_path(path: Path | str) -> Path:
    """``path`` itself, or the path a spec names (``make_path``)."""
    return path if isinstance(path, Path) else make_path(path)


def xla_twin(path: Path | str) -> JitPath:
    """JAX's own ``jit`` compiling the program with the XLA settings ``path`` compiles it with
    (``Path.xla_settings``): what reads the compiler's evidence for it, and what the same-compiler experiment
    runs to tell another runtime's lowering from XLA's."""
    return JitPath(as_path(path).xla_settings())
