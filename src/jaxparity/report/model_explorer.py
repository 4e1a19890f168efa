"""Per-op error on the model graph, for Google AI Edge Model Explorer.

``write_model_explorer(result, DIR)`` writes what Model Explorer needs to draw the drift on the
program, keyed to each other by construction:

``graph.json``
    The flattened program (the ops jaxparity localizes on) as a Model Explorer graph collection,
    the format of Model Explorer's JSON loader (``{"label", "graphs": [{"id", "nodes"}]}``, nodes
    as in ``model_explorer.graph_builder``): one node per op, labelled with its primitive, grouped
    by its Flax module path (``namespace``), with its operands as edges, its output types, its
    source lines and, per explained path, its error as attributes. Program arguments are nodes in
    an ``Inputs`` group, named like ``--inputs`` files.
``<path>.drift.json``
    Node data (``model_explorer.node_data_builder.GraphNodeData``): per op, the largest absolute
    difference between the path and the baseline at its output, inherited plus local — how the
    divergence grows through the graph.
``<path>.local.json``
    Node data: per op whose own output is wrong given its own inputs, the ULPs between the path and
    the baseline's implementation replayed on them — where the divergence starts.

Open them with ``model-explorer DIR/graph.json --node_data_paths=DIR/jit.drift.json,...`` (the
``ai-edge-model-explorer`` package). Both kinds of node data colour nodes by fixed thresholds
(decades), so colours mean the same in every graph; an op whose value is not finite keeps the
largest finite value of the file and is drawn dark red.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ..result import ComparisonResult
from .format import producer

__all__ = ["model_explorer_graph", "model_explorer_node_data", "write_model_explorer"]

GRAPH_ID = "jaxpr"
_NOT_FINITE = "#6e0b0b"
# Thresholds: a value <= `value` gets `bgColor` (the first that fits); 0 stays white.
_DRIFT_THRESHOLDS = [
    {"value": 0, "bgColor": "#ffffff"},
    {"value": 1e-6, "bgColor": "#fff4d6"},
    {"value": 1e-4, "bgColor": "#ffe08a"},
    {"value": 1e-2, "bgColor": "#ffb45c"},
    {"value": 1, "bgColor": "#f0703c"},
    {"value": 1e300, "bgColor": "#cf222e"},
]
_LOCAL_THRESHOLDS = [
    {"value": 0, "bgColor": "#ffffff"},
    {"value": 1, "bgColor": "#ffe08a"},
    {"value": 16, "bgColor": "#ffb45c"},
    {"value": 1024, "bgColor": "#f0703c"},
    {"value": 1e300, "bgColor": "#cf222e"},
]


def _explained(result: ComparisonResult) -> list[Any]:
    explained = [e for e in result.explanations if e.localization is not None and e.localization.program]
    if not explained:
        raise ValueError("no localized explanation in this result: run `jaxparity explain` (or call .explain() "
                         "on the result): localizing a path is what gives per-op error")
    return explained


def _explanation(result: ComparisonResult, path: str | None) -> Any:
    explained = _explained(result)
    if path is None:
        return explained[0]
    for e in explained:
        if e.path == path:
            return e
    raise KeyError(f"no per-op error for path {path!r}; explained: {[e.path for e in explained]}")


def _kv(key: str, value: object) -> dict[str, str]:
    return {"key": key, "value": str(value)}


def _edge(operand: str, position: int) -> dict[str, str] | None:
    if operand.startswith("arg"):
        return {"sourceNodeId": operand, "sourceNodeOutputId": "0", "targetNodeInputId": str(position)}
    src = producer(operand)
    if src is not None:
        return {"sourceNodeId": str(src[0]), "sourceNodeOutputId": str(src[1]), "targetNodeInputId": str(position)}
    return None  # constants and literals are not nodes


def model_explorer_graph(result: ComparisonResult) -> dict[str, Any]:
    """The localized program as a Model Explorer graph collection (its JSON loader's format)."""
    explained = _explained(result)
    program = explained[0].localization.program
    per_path = []
    for e in explained:
        loc = e.localization
        per_path.append((e.path, {d.index: d for d in loc.drift}, {d.top_index: d for d in reversed(loc.local)}))
    nodes: list[dict[str, Any]] = []
    used_args = sorted({int(o[3:]) for op in program for o in op.operands if o.startswith("arg")})
    for k in used_args:
        info = result.inputs[k] if k < len(result.inputs) else None
        shape = f"{info.dtype}[{','.join(map(str, info.shape))}]" if info else "?"
        nodes.append({"id": f"arg{k}", "label": info.name if info else f"arg{k}", "namespace": "Inputs",
                      "attrs": [_kv("input", info.name if info else f"argument {k}")],
                      "outputsMetadata": [{"id": "0", "attrs": [_kv("tensor_shape", shape)]}]})
    for op in program:
        attrs = [_kv("primitive", op.primitive), _kv("op index", op.index),
                 _kv("your line", op.user_source or "-"), _kv("created at", op.source or "-")]
        local_in = []
        for path, drift, local in per_path:
            d = drift.get(op.index)
            if d is not None:
                attrs += [_kv(f"{path}: max abs diff", f"{d.max_abs:.6g}"), _kv(f"{path}: max ULP", d.max_ulp)]
            if op.index in local:
                ld = local[op.index]
                inside = f" inside: {ld.where()}" if ld.within else ""
                attrs.append(_kv(f"{path}: diverges here", f"{ld.n_differ} of {ld.size} elements, up to "
                                 f"{ld.max_ulp} ULP against the baseline replayed on the same inputs{inside}"))
                local_in.append(path)
        node: dict[str, Any] = {
            "id": str(op.index),
            "label": op.primitive,
            "namespace": op.name_stack,
            "attrs": attrs,
            "incomingEdges": [e for i, o in enumerate(op.operands) if (e := _edge(o, i)) is not None],
            "outputsMetadata": [{"id": str(j), "attrs": [_kv("tensor_shape", t)]} for j, t in enumerate(op.outputs)],
            "inputsMetadata": [{"id": str(i), "attrs": [_kv("tensor_shape", t)]} for i, t in enumerate(op.inputs)],
        }
        if local_in:  # a red border marks where a path's divergence starts
            node["style"] = {"backgroundColor": "", "borderColor": "#cf222e", "hoveredBorderColor": "#cf222e"}
        nodes.append(node)
    return {"label": result.case, "graphs": [{"id": GRAPH_ID, "nodes": nodes}]}


def model_explorer_node_data(result: ComparisonResult, path: str | None = None,
                             metric: str = "drift") -> dict[str, Any]:
    """Node data for one explained path (the first by default), keyed like ``model_explorer_graph``.

    ``metric="drift"``: per op, the largest absolute difference from the baseline at its output;
    ``metric="local"``: per op diverging locally, its ULPs against the baseline replayed on its inputs.
    """
    loc = _explanation(result, path).localization
    if metric == "drift":
        values = {str(d.index): float(d.max_abs) for d in loc.drift}
        thresholds = _DRIFT_THRESHOLDS
    elif metric == "local":
        values = {}
        for d in loc.local:
            values[str(d.top_index)] = max(values.get(str(d.top_index), 0.0), float(d.max_ulp))
        thresholds = _LOCAL_THRESHOLDS
    else:
        raise ValueError(f"metric must be 'drift' or 'local', not {metric!r}")
    finite = [v for v in values.values() if math.isfinite(v)]
    cap = max(finite, default=0.0)
    results = {k: ({"value": v} if math.isfinite(v) else {"value": cap, "bgColor": _NOT_FINITE})
               for k, v in values.items()}
    return {"results": results, "thresholds": thresholds}


def _file_stem(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", path).strip("_") or "path"


def write_model_explorer(result: ComparisonResult, directory: str | Path) -> list[Path]:
    """Write ``graph.json`` and, per explained path, its drift and local node data into ``directory``.

    Returns the files written, the graph first. Existing files of the same names are replaced.
    """
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out} exists and is not a directory; --model-explorer takes a directory")
    graph = model_explorer_graph(result)  # raises before anything is written when nothing is explained
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "graph.json"]
    written[0].write_text(json.dumps(graph, indent=1, allow_nan=False), encoding="utf-8")
    for e in _explained(result):
        for metric in ("drift", "local"):
            f = out / f"{_file_stem(e.path)}.{metric}.json"
            f.write_text(json.dumps(model_explorer_node_data(result, e.path, metric), indent=1, allow_nan=False),
                         encoding="utf-8")
            written.append(f)
    return written


def open_command(files: list[Path]) -> str:
    """The command that opens ``files`` (as written by ``write_model_explorer``) in Model Explorer."""
    return f"model-explorer {files[0]} --node_data_paths={','.join(str(f) for f in files[1:])}"
