"""Model Explorer export: checked against Model Explorer's own data classes, and opened in it.

Needs the package ai-edge-model-explorer (installed by `make test`) and, for the browser test,
Chromium at /usr/bin/chromium with playwright. It fails, not skips, without them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxparity.report.model_explorer import (
    model_explorer_graph,
    model_explorer_node_data,
    open_command,
    write_model_explorer,
)

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = "/usr/bin/chromium"


def _strict(cls, data):
    import dacite

    return dacite.from_dict(cls, data, config=dacite.Config(strict=True))


def test_files_are_model_explorer_data(seed_explained):
    """Every field is one Model Explorer's builder classes define (strict: no unknown keys)."""
    from model_explorer import graph_builder, node_data_builder

    collection = _strict(graph_builder.GraphCollection, model_explorer_graph(seed_explained))
    (graph,) = collection.graphs
    loc = seed_explained.explanations[0].localization
    assert len(graph.nodes) == len(loc.program) + 2  # two program arguments: the params and x
    for metric in ("drift", "local"):
        _strict(node_data_builder.GraphNodeData, model_explorer_node_data(seed_explained, metric=metric))


def test_node_data_keys_are_graph_nodes(seed_explained):
    graph = model_explorer_graph(seed_explained)["graphs"][0]
    ids = {n["id"] for n in graph["nodes"]}
    for n in graph["nodes"]:
        for e in n.get("incomingEdges", []):
            assert e["sourceNodeId"] in ids, (n["id"], e)
    drift = model_explorer_node_data(seed_explained, metric="drift")["results"]
    local = model_explorer_node_data(seed_explained, metric="local")["results"]
    assert drift and local and set(local) <= set(drift) <= ids


def test_values_are_the_localization(seed_explained):
    loc = seed_explained.explanations[0].localization
    drift = model_explorer_node_data(seed_explained, "jit", "drift")["results"]
    worst = max(loc.drift, key=lambda d: d.max_abs)
    assert drift[str(worst.index)]["value"] == worst.max_abs > 0
    first = loc.first
    local = model_explorer_node_data(seed_explained, "jit", "local")["results"]
    assert local[str(first.op.index)]["value"] == first.max_ulp
    node = next(n for n in model_explorer_graph(seed_explained)["graphs"][0]["nodes"] if n["id"] == str(first.op.index))
    assert node["label"] == first.op.primitive and node["namespace"] == first.op.name_stack
    assert node["style"]["borderColor"]  # where the divergence starts is marked
    assert {"key": "your line", "value": first.op.user_source} in node["attrs"]


def test_non_finite_values_stay_valid_json(seed_explained):
    e = seed_explained.explanations[0]
    loc = e.localization
    bad = dataclasses.replace(loc.drift[-1], max_abs=math.inf)
    loc2 = dataclasses.replace(loc, drift=loc.drift[:-1] + (bad,))
    result = dataclasses.replace(seed_explained, explanations=(dataclasses.replace(e, localization=loc2),))
    data = model_explorer_node_data(result, metric="drift")
    json.dumps(data, allow_nan=False)
    entry = data["results"][str(bad.index)]
    assert entry["bgColor"] and math.isfinite(entry["value"])


def test_write_and_errors(tmp_path, seed_explained):
    files = write_model_explorer(seed_explained, tmp_path / "me")
    assert [f.name for f in files] == ["graph.json", "jit.drift.json", "jit.local.json"]
    assert json.loads(files[1].read_text()) == model_explorer_node_data(seed_explained, "jit", "drift")
    assert open_command(files).startswith(f"model-explorer {files[0]} --node_data_paths={files[1]},")
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("keep me")
    with pytest.raises(NotADirectoryError):
        write_model_explorer(seed_explained, not_a_dir)
    assert not_a_dir.read_text() == "keep me"
    with pytest.raises(ValueError, match="jaxparity explain"):
        write_model_explorer(dataclasses.replace(seed_explained, explanations=()), tmp_path / "none")
    assert not (tmp_path / "none").exists()
    with pytest.raises(KeyError, match="explained"):
        model_explorer_node_data(seed_explained, "iree")


@pytest.mark.slow
def test_model_explorer_shows_the_drift(tmp_path, seed_explained):
    """The real Model Explorer server loads the graph and both node data files; headless Chromium
    shows each op's values in its node data table. Screenshot: artifacts/model-explorer.png."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"needs playwright: `.venv/bin/pip install playwright==1.65.2` ({exc})")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"needs Chromium at {CHROMIUM}: `apt-get install -y chromium`")
    import portpicker

    files = write_model_explorer(seed_explained, tmp_path / "me")
    loc = seed_explained.explanations[0].localization
    worst = max(loc.drift, key=lambda d: d.max_abs)
    port = portpicker.pick_unused_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "model-explorer"), str(files[0]),
         f"--node_data_paths={','.join(map(str, files[1:]))}", "--no_open_in_browser", f"--port={port}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    problems: list[str] = []
    try:
        url = None
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                pytest.fail(f"model-explorer exited with {server.wait()} before serving")
            if line.startswith(f"http://localhost:{port}/"):
                url = line.strip()
        assert url, "model-explorer printed no URL in 120 s"
        ARTIFACTS.mkdir(exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--use-gl=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                # Model Explorer looks for a newer release online; with no network that request fails.
                page.on("console", lambda m: problems.append(m.text) if m.type == "error"
                        and "ERR_NAME_NOT_RESOLVED" not in m.text and "ERR_INTERNET_DISCONNECTED" not in m.text
                        else None)
                page.on("pageerror", lambda err: problems.append(f"page error: {err}"))
                page.goto(url)
                page.get_by_text("jit.local.json").first.wait_for(timeout=60_000)
                page.get_by_text(repr(float(worst.max_abs))).first.wait_for(timeout=30_000)
                text = page.inner_text("body")
                assert f"{len(loc.program) + 2} nodes" in text  # the graph selector: our graph, all nodes
                assert "jit.drift.json" in text and str(loc.first.max_ulp) in text
                assert "GroupedConvResidual" in text  # the Flax module became a layer
                page.screenshot(path=str(ARTIFACTS / "model-explorer.png"))
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert problems == [], problems
