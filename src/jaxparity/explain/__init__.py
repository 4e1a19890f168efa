"""Why a path diverges, and what fixes it: a pipeline of stages (``pipeline``), each a module of its own.

    triage → localize → blame → evidence → mechanism → fix → sentence

The data they share sit below them: the known causes (``causes``), the verdicts and fixes (``verdicts``),
the explanation of one path (``explanation``), the measures of a re-run (``measure``) and the context every
stage after the capture reads (``context``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CauseVerdict", "Fix", "PathExplanation", "explain_or_report", "explain_path", "explain_paths",
           "share_across"]

_WHERE = {"CauseVerdict": ".verdicts", "Fix": ".verdicts", "PathExplanation": ".explanation",
          "explain_or_report": ".pipeline", "explain_path": ".pipeline", "explain_paths": ".pipeline",
          "share_across": ".pipeline"}


def __getattr__(name: str) -> Any:  # the pipeline imports JAX and every stage: only when asked for
    if name not in _WHERE:
        raise AttributeError(f"module 'jaxparity.explain' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_WHERE[name], __name__), name)
