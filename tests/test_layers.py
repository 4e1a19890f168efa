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
    assert _graph()["jaxparity.result"] <= {"jaxparity._version", "jaxparity.metrics", "jaxparity.verdict"}
    assert _graph()["jaxparity.verdict"] == set()
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


# The explanation's stages in pipeline order (explain/pipeline.py): a stage may import the data modules of
# explain/ and the stages before it, never one after it.
STAGES = ("triage", "localize", "blame", "evidence", "mechanism", "fix", "search", "sentence", "verdict", "pipeline")
EXPLAIN_DATA = ("causes", "verdicts", "explanation", "measure", "context")


def _stage(module: str) -> int | None:
    parts = module.split(".")
    return STAGES.index(parts[2]) if parts[:2] == ["jaxparity", "explain"] and len(parts) > 2 and \
        parts[2] in STAGES else None


def test_the_explanation_is_a_pipeline_of_stages_each_importing_only_those_before_it():
    explain = SRC / "explain"
    assert all((explain / f"{s}.py").exists() or (explain / s / "__init__.py").exists() for s in STAGES)
    graph = _graph()
    for name, deps in graph.items():
        mine = _stage(name)
        later = {d for d in deps if (theirs := _stage(d)) is not None and (mine is None or theirs > mine)}
        if mine is None and not name.startswith(tuple(f"jaxparity.explain.{d}" for d in EXPLAIN_DATA)):
            continue  # modules outside explain/ call the pipeline; the data modules call no stage at all
        assert not later, f"{name} imports a later stage: {sorted(later)}"


def test_no_module_of_the_explanation_is_over_500_lines_and_its_orchestrator_under_300():
    sizes = {p.relative_to(SRC): len(p.read_text().splitlines()) for p in (SRC / "explain").rglob("*.py")}
    assert max(sizes.values()) <= 500, {str(p): n for p, n in sizes.items() if n > 500}
    assert sizes[Path("explain/pipeline.py")] < 300


# Runtimes by name: outside paths/ (each runtime's own room, and its registry), code asks a path for a
# capability (Path.has, Path.xla_option_kind, ...), never compares a spec or a name with a runtime's name.
RUNTIMES = {"jit", "export", "savedmodel", "savedmodel-c", "tflite", "onnx", "onnx-ref", "iree", "eager", "observed"}


def _runtime_names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value.split(":", 1)[0]} & RUNTIMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_runtime_names(e) for e in node.elts))
    return set()


def test_no_code_outside_paths_decides_by_a_runtimes_name():
    offenders = []
    for name, path in _modules().items():
        if name.startswith("jaxparity.paths"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            sides: list[ast.AST] = []
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("startswith", "endswith", "removeprefix"):
                sides = list(node.args)
            found = set().union(*(_runtime_names(s) for s in sides)) if sides else set()
            if found:
                offenders.append(f"{name}:{node.lineno} compares with {sorted(found)}")
    assert not offenders, offenders
