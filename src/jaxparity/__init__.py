"""jaxparity: why does your JAX model give different numbers in production, and how to make them agree.

The public API. Names are imported on first use so that ``import jaxparity`` (and the CLI, and the
TensorFlow serving process, which must never import JAX) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

_EXPORTS = {
    "compare": ".comparison",
    "compare_case": ".comparison",
    "hunt_case": ".hunt",
    "Tolerance": ".metrics",
    "Comparison": ".comparison",
    "ComparisonResult": ".result",
    "PathResult": ".result",
    "LeafResult": ".result",
    "Case": ".case",
    "CaseError": ".case",
    "load_case": ".case",
    "data": ".roles",
    "variables": ".roles",
    "interpret": ".interpreter",
    "DEFAULT_PATHS": ".paths",
    "PATHS": ".paths",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def _warn_if_unsupported() -> None:
    import warnings

    from .versions import unsupported

    message = unsupported()
    if message:
        warnings.warn(message, RuntimeWarning, stacklevel=3)


_warn_if_unsupported()

if TYPE_CHECKING:
    from .case import Case as Case, CaseError as CaseError, load_case as load_case
    from .roles import data as data, variables as variables
    from .comparison import Comparison as Comparison, compare as compare, compare_case as compare_case
    from .hunt import hunt_case as hunt_case
    from .interpreter import interpret as interpret
    from .metrics import Tolerance as Tolerance
    from .paths import DEFAULT_PATHS as DEFAULT_PATHS, PATHS as PATHS
    from .result import ComparisonResult as ComparisonResult, LeafResult as LeafResult, PathResult as PathResult


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'jaxparity' has no attribute {name!r}")
