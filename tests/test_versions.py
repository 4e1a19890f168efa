"""The version range (issue 21): jaxparity installed into a user's stack at both ends of the JAX range it
declares, each stack an environment made by the tool's own environment support (cached in
~/.cache/jaxparity/envs; about a minute each the first time), running the smoke suite of
``version_smoke.py``: the seed compared and explained, a scan explained, reduce, snapshot/check and a
sample of the conformance corpus. Each stack must reach the explanation the project's own stack reaches:
the same op, the same confirmed cause, a verified fix where this stack verifies one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxparity.execution.envs import ensure_env, parse_env, worker_environment
from jaxparity.versions import SUPPORTED, parse

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
_TOOLS = "rich==15.0.0 safetensors==0.8.0 flatbuffers==25.12.19 mpmath==1.3.0 zstandard==0.25.0"
STACKS = {
    # the seed report's JAX, the oldest declared, on the oldest Python it supports
    "oldest": f"python==3.10 jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 numpy==2.2.6 ml_dtypes==0.7.0 tomli==2.4.0 "
              f"{_TOOLS}",
    # the newest JAX (0.11 and later need Python 3.12 or newer), on the newest Python here
    "newest": f"python==3.13 jax==0.12.0.1 jaxlib==0.12.0.1 flax==0.12.12 numpy==2.5.5 ml_dtypes==0.7.0 {_TOOLS}",
}


def smoke(python: str, out: Path) -> dict:
    proc = subprocess.run([python, str(ROOT / "tests" / "version_smoke.py"), str(out)], cwd=ROOT,
                          env=worker_environment({"JAX_PLATFORMS": "cpu"}), capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def own(tmp_path_factory) -> dict:
    return smoke(sys.executable, tmp_path_factory.mktemp("own"))


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_each_end_of_the_range_explains_as_the_projects_own_stack(stack, own, tmp_path):
    spec = parse_env(f"{stack}={STACKS[stack]}")
    got = smoke(str(ensure_env(spec)), tmp_path)
    low, high = SUPPORTED
    assert low <= parse(got["jax"]) < high, got["jax"]
    assert got["python"].startswith(spec.python_version + "."), got["python"]
    errors = {k: v["error"] for k, v in got.items() if isinstance(v, dict) and "error" in v}
    assert not errors, errors
    # installing jaxparity into that stack installs jaxparity and changes nothing else (pip's dry-run report)
    assert got["install"] == ["jaxparity==0.1.0"], got["install"]
    # compare: every path runs; declared rounds as eager does, op by op, bit for bit (the seed's own finding)
    assert got["seed_compare"] == own["seed_compare"]
    assert got["seed_compare"]["paths"]["declared"] == ["ok", "identical"]
    # explain: the same op, cause and verified fix on the seed and inside the scan
    assert got["seed_explain"] == own["seed_explain"]
    assert got["seed_explain"]["paths"]["jit"]["confirmed"] == ["excess-precision"]
    # loops: the same cause at the same op (whether xla_backend_optimization_level=0 restores parity depends on
    # the XLA and the CPU: jax 0.12's does not in the cond, and says so)
    def cause_and_op(run: dict) -> dict:
        return {p: (e["confirmed"], e["op"]) for p, e in run["paths"].items()}

    assert cause_and_op(got["scan_explain"]) == cause_and_op(own["scan_explain"])
    assert got["scan_explain"]["paths"]["jit"]["op"][2] == "tests/cases/loops.py:22"
    assert cause_and_op(got["cond_explain"]) == cause_and_op(own["cond_explain"])
    # sweep: every cell runs; the report's case has the same cause in every cell
    assert got["sweep"]["rc"] == 1 and got["sweep"]["cells"] == 4 and got["sweep"]["failed"] == 0, got["sweep"]
    conv = "conv_bf16.py jit"
    assert got["sweep"]["causes"][conv] == own["sweep"]["causes"][conv] == {
        "elided bf16/f16 rounding (excess precision)": 2}
    # reduce writes a script that reproduces the divergence (exit 1) in that stack; snapshot then check passes
    assert got["reduce"] == {"rc": 0, "repro_rc": 1}
    assert got["snapshot_check"] == {"snapshot_rc": 0, "check_rc": 0}
    # conformance: no tool error and no false "equal" on a sample of JAX's own harnesses
    c = got["conformance"]
    assert c["harnesses"] > 10 and not c["tool"] and not c["false_equal_in"], c


def test_an_env_names_its_python_and_a_missing_one_is_a_clear_error():
    spec = parse_env("x=python==3.13 jax==0.12.0.1")
    assert spec.python_version == "3.13" and spec.packages == ("jax==0.12.0.1",)
    assert spec.key != parse_env("x=python==3.12 jax==0.12.0.1").key  # another Python is another environment
    assert parse_env("x=jax==0.9.2").python_version is None
    from jaxparity.execution.envs import EnvError, interpreter

    with pytest.raises(EnvError, match="no Python 3.99 here"):
        interpreter("3.99")


def test_the_declared_range_is_the_tested_one_and_outside_it_is_said():
    import re

    from jaxparity.versions import unsupported

    text = (ROOT / "pyproject.toml").read_text()
    for package in ("jax", "jaxlib"):
        low, high = re.search(rf'"{package}>=([\d.]+),<([\d.]+)"', text).groups()
        assert (parse(low), parse(high)) == SUPPORTED
    assert unsupported("0.4.38") is None and unsupported("0.12.0.1") is None
    for outside in ("0.4.37", "0.13.0"):
        message = unsupported(outside)
        assert message and f"jax {outside} is outside" in message and "0.4.38 to 0.12" in message
    assert not re.search(r'"(jax|jaxlib|numpy|flax|tensorflow-cpu)==', text)  # no pins in the package


SERVING = (f"python==3.12 jax==0.12.0.1 jaxlib==0.12.0.1 tensorflow-cpu==2.21.0 numpy==2.5.5 ml_dtypes==0.7.0 "
           f"{_TOOLS}")


@pytest.mark.parametrize("factory, verified", [("make_top_k", True), ("make_sinh_erf", False)])
def test_the_newest_jax_beside_the_newest_tensorflow_is_a_stablehlo_skew_with_its_export_target(factory, verified,
                                                                                              tmp_path):
    """jax 0.12 writes StableHLO 1.18 by default; TensorFlow 2.21 reads 1.13.7. The savedmodel path fails
    with both versions named, and the export for 1.13.7 is re-run: top_k then gives jax.jit's values bit
    for bit; sinh loads and runs, a ULP off jax.jit, and the message says so rather than "verified"."""
    python = str(ensure_env(parse_env(f"serving={SERVING}")))
    report = tmp_path / "out.json"
    proc = subprocess.run([python, "-m", "jaxparity", "compare", f"tests/cases/versions.py:{factory}",
                           "--paths", "eager,jit,savedmodel", "--json", str(report)], cwd=ROOT,
                          env=worker_environment({"JAX_PLATFORMS": "cpu"}), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 1, proc.stderr[-2000:]
    paths = {p["spec"]: p for p in json.loads(report.read_text())["paths"]}
    saved = paths["savedmodel"]
    assert saved["status"] == "error"
    message = saved["message"]
    assert "jax 0.12.0.1 writes StableHLO 1.18.0 (jax.export's target" in message, message
    assert "the serving TensorFlow reads up to 1.13.7; its error points at versions.py:" in message, message
    if verified:
        assert "Fix ✓ verified: exported for StableHLO 1.13.7 (savedmodel:stablehlo=1.13.7) it loads, runs and " \
               "gives jax.jit's values bit for bit" in message, message
    else:
        assert "✓" not in message and "(savedmodel:stablehlo=1.13.7) it loads and runs" in message, message


def test_installing_into_the_reports_own_stack_adds_and_changes_nothing_it_has(tmp_path):
    """The seed report's stack (jax 0.4.38, flax 0.10.2, tensorflow-cpu 2.18, whose numpy must stay below
    2.1): pip's dry-run of `pip install jaxparity` there installs only packages the stack does not have."""

    spec = parse_env("old=jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0")  # test_envs.py's
    python = str(ensure_env(spec))
    have = subprocess.run([python, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                          check=True).stdout
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(have)}
    report = tmp_path / "install.json"
    subprocess.run([python, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report), str(ROOT)],
                   capture_output=True, text=True, check=True, timeout=600)
    added = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
             for i in json.loads(report.read_text())["install"]}
    assert "jaxparity" in added
    assert not (set(added) - {"jaxparity"}) & installed, {k: v for k, v in added.items() if k in installed}
