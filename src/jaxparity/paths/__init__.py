"""Execution paths, registered by name. ``make_path('jit:xla_allow_excess_precision=false')``."""

from __future__ import annotations

import difflib

from .base import Path, PathError, PathOptionError, PathUnavailable, parse_spec, spec_env, with_env, without_env
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
    "DEFAULT_PATHS",
    "PATHS",
    "Path",
    "PathError",
    "PathOptionError",
    "PathUnavailable",
    "make_path",
    "parse_spec",
    "spec_env",
    "without_env",
    "with_env",
]

PATHS: dict[str, type[Path]] = {
    cls.name: cls for cls in (EagerPath, JitPath, ExportPath, SavedModelPath, SavedModelCPath, TFLitePath, IreePath, OnnxPath,
                 OnnxReferencePath, DeclaredPath, F64Path, ObservedPath)
}

DEFAULT_PATHS: tuple[str, ...] = ("eager", "jit", "export", "savedmodel", "declared", "f64")


def make_path(spec: str) -> Path:
    """The path for ``NAME[:key=value,...]``; raises PathOptionError naming what is wrong."""
    name, options = parse_spec(spec)
    if name not in PATHS:
        near = difflib.get_close_matches(name, PATHS, 2)
        raise PathOptionError(f"unknown path {name!r}" + (f"; did you mean {' or '.join(near)}?" if near else "")
                              + f" (known paths: {', '.join(PATHS)})")
    return PATHS[name](options, env=spec_env(spec))
