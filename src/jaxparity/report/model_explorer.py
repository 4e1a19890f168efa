"""Per-op error as Google AI Edge Model Explorer "node data" (a custom overlay JSON file).

Model Explorer can colour the nodes of a graph from a JSON file loaded next to the model
("Custom node data"). The format used here, which is an assumption taken from Model Explorer's
documented node-data structure (its ``node_data_builder`` module: ``GraphNodeData`` with ``results``
mapping node id -> ``NodeDataResult(value=...)``, plus an optional colour ``gradient``), and not
checked against a running Model Explorer in this project, is::

    {"version": 1,
     "results": {"<node id>": {"value": <float>}, ...},
     "gradient": [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#cf222e"}],
     "jaxparity": {"path": ..., "baseline": ..., "metric": "max_abs", "case": ...}}

Node ids are the jaxpr op's name stack (the Flax module path, e.g.
``TwoBlockEncoder/PreLNBlock_0/Dense_0``), a ``/``, then its index in the flattened program
(``.../Dense_0/57``); ops at top level are just their index. That matches the namespaces Model Explorer
draws for a JAX model; if a graph labels its nodes differently, the ``jaxparity`` block says how
these ids were made, so a caller can re-key them. The value is the op's largest absolute difference
between the path and the baseline (``OpDrift.max_abs``), one file per explained path.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..result import ComparisonResult

__all__ = ["model_explorer_node_data", "node_id", "write_model_explorer"]

NODE_DATA_VERSION = 1
_GRADIENT = [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 0.5, "bgColor": "#ffd8b5"}, {"stop": 1, "bgColor": "#cf222e"}]


def node_id(name_stack: str, index: int) -> str:
    return f"{name_stack}/{index}" if name_stack else str(index)


def _explanation(result: ComparisonResult, path: str | None) -> Any:
    explained = [e for e in result.explanations if e.localization is not None and e.localization.drift]
    if not explained:
        raise ValueError("no per-op drift in this result: call .explain() on it first (a localized explanation "
                         "is what gives per-op error)")
    if path is None:
        return explained[0]
    for e in explained:
        if e.path == path:
            return e
    raise KeyError(f"no per-op drift for path {path!r}; explained: {[e.path for e in explained]}")


def model_explorer_node_data(result: ComparisonResult, path: str | None = None) -> dict[str, Any]:
    """Node data for one explained path (the first by default): per op, max abs difference."""
    e = _explanation(result, path)
    loc = e.localization
    results = {node_id(d.name_stack, d.index): {"value": float(d.max_abs) if math.isfinite(d.max_abs) else 0.0}
               for d in loc.drift}
    local = [node_id(ld.op.name_stack, ld.op.index) for ld in loc.local]
    return {
        "version": NODE_DATA_VERSION,
        "results": results,
        "gradient": _GRADIENT,
        "jaxparity": {"case": result.case, "path": e.path, "baseline": e.baseline, "metric": "max_abs",
                      "node_id": "<name stack>/<op index in the flattened jaxpr>", "local_divergences": local},
    }


def write_model_explorer(result: ComparisonResult, path: str | Path, explained_path: str | None = None) -> None:
    """Write ``model_explorer_node_data(result, explained_path)`` as JSON to ``path``."""
    data = model_explorer_node_data(result, explained_path)
    Path(path).write_text(json.dumps(data, indent=2, allow_nan=False), encoding="utf-8")
