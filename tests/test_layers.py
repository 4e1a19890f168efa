"""The shape of the code: the result model at the bottom of the import graph, and no import cycles.

Imports are read from the source (including those inside functions), so a lazy import that reaches
back up counts as much as a module-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "jaxparity"


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    deps.add(full if full in mods else target)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            if comp:
                found.append(sorted([v, *comp]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_result_model_imports_only_data():
    assert _graph()["jaxparity.result"] <= {"jaxparity._version", "jaxparity.metrics"}
    assert _graph()["jaxparity.metrics"] <= {"jaxparity.rounding"}


def test_reporters_never_import_the_commands():
    graph = _graph()
    above = {"jaxparity.comparison", "jaxparity.baseline", "jaxparity.cli"}
    for name, deps in graph.items():
        if name.startswith("jaxparity.report"):
            assert not deps & above, (name, deps & above)
            assert not {d for d in deps if d.startswith("jaxparity.execution.") and d != "jaxparity.execution.runs"}, \
                (name, deps)


def test_the_execution_layer_never_imports_the_commands():
    """execution/ runs paths for the commands (compare, explain, sweep, reduce); never the reverse."""
    commands = ("jaxparity.comparison", "jaxparity.baseline", "jaxparity.cli", "jaxparity.sweep", "jaxparity.reduce")
    for name, deps in _graph().items():
        if name.startswith("jaxparity.execution"):
            assert not {d for d in deps if d.startswith(commands)}, (name, deps)


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_private_jax_is_read_in_one_module_only():
    """Every private JAX symbol (``jax._src``) is read through jaxparity/jaxcompat.py, where each names the JAX
    versions it covers (issue 21): no other module imports or names one, in code or in a lazy import."""
    offenders = []
    for name, path in _modules().items():
        if name == "jaxparity.jaxcompat":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            module = (node.module if isinstance(node, ast.ImportFrom) else
                      next((a.name for a in node.names), None) if isinstance(node, ast.Import) else None)
            if module and module.startswith("jax._src"):
                offenders.append(f"{name}:{node.lineno} imports {module}")
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "jax" \
                    and node.attr in ("_src", "core"):
                offenders.append(f"{name}:{node.lineno} reads jax.{node.attr}")
    assert not offenders, offenders
