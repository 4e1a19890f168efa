"""jaxparity.testing.assert_parity and the pytest plugin, as a user's test suite meets them."""

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxparity.pytest_plugin import report_name
from jaxparity.testing import ParityError, assert_parity, failures, format_failure

USER_PROJECT = Path(__file__).resolve().parent / "user_project"
FAILING = "test_model.py::test_softmax_jit_matches_eager_exactly"
PASSING = "test_model.py::test_softmax_jit_without_excess_precision_matches_eager"


@pytest.fixture(scope="module")
def model():
    spec = importlib.util.spec_from_file_location("jaxparity_user_project_model", USER_PROJECT / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- assert_parity ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_assert_parity_raises_with_the_explanation(model):
    with pytest.raises(AssertionError) as info:
        assert_parity(model.softmax_bf16, model.example_input(), paths=("eager", "jit"))
    err = info.value
    assert isinstance(err, ParityError) and not err.result.passed
    assert failures[-1] is err.result
    message = str(err)
    lines = message.splitlines()
    assert lines[0].startswith("jaxparity: softmax_bf16: ✗ jit diverges from eager — excess precision at "), lines
    assert "assert_parity(..., ulp=1 (of bfloat16) or atol=" in message
    flat = " ".join(message.split())
    assert "fix ✓ jax.jit(fn, compiler_options={'xla_allow_excess_precision': False}): parity on jit" in flat
    assert "fix ✓ jaxparity.fixes.round_like_declared(fn): parity on jit" in flat
    assert "model.py:" in message  # the user's line that computes the unrounded value
    assert "┃" not in message and "━" not in message  # no tables in a test log
    assert len(lines) < 15


@pytest.mark.slow
def test_report_falls_back_to_json_without_the_html_reporter(model, tmp_path, monkeypatch):
    from jaxparity import pytest_plugin

    with pytest.raises(ParityError) as info:
        assert_parity(model.softmax_bf16, model.example_input(), explain=False)
    monkeypatch.setitem(sys.modules, "jaxparity.report.html", None)  # import fails
    path, note = pytest_plugin._write(info.value.result, tmp_path / "r" / "t.py__test")
    assert path == tmp_path / "r" / "t.py__test.json" and "wrote the JSON report instead" in note
    assert json.loads(path.read_text())["passed"] is False


@pytest.mark.slow
def test_assert_parity_passes_with_the_fix_or_the_tolerance(model):
    x = model.example_input()
    fixed = assert_parity(model.softmax_bf16, x, paths=("eager", "jit:xla_allow_excess_precision=false"))
    assert fixed.passed and fixed.path("jit:xla_allow_excess_precision=false").verdict == "identical"
    tolerant = assert_parity(model.softmax_bf16, x, ulp=1)
    assert tolerant.passed and tolerant.path("jit").verdict == "within tolerance"
    assert tolerant.explanations == ()
    with pytest.raises(ParityError):
        assert_parity(model.softmax_bf16, x, atol=1e-4, explain=False)


@pytest.mark.slow
def test_assert_parity_without_explain_still_names_the_smallest_tolerance(model):
    with pytest.raises(ParityError) as info:
        assert_parity(model.softmax_bf16, model.example_input(), paths="jit", explain=False)
    message = str(info.value)
    assert info.value.result.explanations == ()
    assert "would pass with --ulp 1" in message and "why" not in message
    assert format_failure(info.value.result) == message


def test_report_names_are_safe_and_distinct():
    a = report_name("tests/test_x.py::test_y[bf16-1.5/2]")
    assert a == "tests_test_x.py__test_y_bf16-1.5_2"
    long_ids = [f"t.py::test[{'x' * 300}{i}]" for i in range(2)]
    names = [report_name(n) for n in long_ids]
    assert names[0] != names[1] and all(len(n) <= 120 for n in names)


def test_the_plugin_imports_no_jax():
    code = "import sys, jaxparity.pytest_plugin; print(any(m.split('.')[0] in ('jax', 'numpy') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- the pytest plugin, on a user's project ----------------------------------------------------------
def run_user_project(*args: str) -> subprocess.CompletedProcess:
    """pytest on tests/user_project, with the plugin loaded by ``-p`` (entry-point autoloading off,
    so this works whether or not the pytest11 entry point is installed)."""
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "jaxparity.pytest_plugin", *args],
                          cwd=USER_PROJECT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_plugin_writes_one_report_for_the_failing_parity_test(tmp_path):
    reports = tmp_path / "reports"
    run = run_user_project("--jaxparity-report", str(reports), "-rA")
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert f"FAILED {FAILING}" in out and f"PASSED {PASSING}" in out
    written = sorted(reports.iterdir())
    assert [p.stem for p in written] == [report_name(FAILING)], written
    (report,) = written
    assert report.suffix in (".html", ".json")
    if report.suffix == ".json":
        assert "HTML reporter unavailable" in out  # said so in the test output
        doc = json.loads(report.read_text())
        assert doc["passed"] is False and doc["explanations"], "the report carries the explanation"
    else:
        assert "HTML reporter unavailable" not in out and "excess" in report.read_text()
    # The failure shows the explanation, and where the report is.
    assert "ParityError: jaxparity: softmax_bf16: ✗ jit diverges from eager — excess precision at " in out
    assert "fix ✓ jax.jit(fn, compiler_options={'xla_allow_excess_precision': False})" in out
    assert out.count(f"jaxparity: wrote {report}") == 1, out  # once, in the session's summary, with its test
    assert f"jaxparity: wrote {report} ({FAILING})" in out
    assert "jaxparity reports" in out


@pytest.mark.slow
def test_plugin_without_the_option_writes_nothing():
    run = run_user_project("-k", "excess_precision")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "jaxparity: wrote" not in out
    assert "--jaxparity-report" in run_user_project("--help").stdout


def test_entry_point_when_installed():
    """Once pyproject registers ``[project.entry-points.pytest11] jaxparity = "jaxparity.pytest_plugin"``
    (and the package is reinstalled), pytest loads the plugin on its own."""
    eps = [ep for ep in importlib.metadata.entry_points(group="pytest11") if ep.value == "jaxparity.pytest_plugin"]
    if not eps:
        pytest.skip("the pytest11 entry point is not registered in this installation")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=USER_PROJECT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert "--jaxparity-report" in out.stdout, out.stdout + out.stderr
