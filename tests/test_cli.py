"""The command line as a user runs it: exit codes, messages, JSON output."""

import json
import re
from importlib import resources

import jsonschema
import pytest

from conftest import run_cli

SEED = "examples/conv_bf16.py"


def test_help_shows_examples_and_exit_codes():
    r = run_cli("compare", "--help")
    assert r.returncode == 0
    assert "examples:" in r.stdout and "jaxparity compare examples/conv_bf16.py" in r.stdout
    assert "exit status: 0" in r.stdout


@pytest.mark.slow
def test_divergence_exits_1_and_json_matches_the_schema(tmp_path):
    out = tmp_path / "r.json"
    r = run_cli("compare", SEED, "--paths", "eager,jit", "--json", str(out))
    assert r.returncode == 1, r.stderr
    assert "DIFFERS" in r.stdout and "would pass with --ulp" in r.stdout
    doc = json.loads(out.read_text())
    schema = json.loads(resources.files("jaxparity").joinpath("schema/result-v1.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["schema_version"] == 1 and doc["passed"] is False
    jit = next(p for p in doc["paths"] if p["spec"] == "jit")
    assert jit["verdict"] == "differs" and jit["leaves"][0]["diff"]["required_ulp"] > 0


@pytest.mark.slow
def test_the_smallest_passing_tolerance_printed_does_pass():
    r = run_cli("compare", SEED, "--paths", "eager,jit", "--json", "-")
    ulp = json.loads(r.stdout)["paths"][1]["leaves"][0]["diff"]["required_ulp"]
    assert run_cli("compare", SEED, "--paths", "eager,jit", "--ulp", str(ulp), "-q").returncode == 0
    assert run_cli("compare", SEED, "--paths", "eager,jit", "--ulp", str(ulp - 1), "-q").returncode == 1


@pytest.mark.slow
def test_agreement_exits_0():
    r = run_cli("compare", SEED, "--paths", "eager,jit:xla_allow_excess_precision=false,declared")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "✓ jit:xla_allow_excess_precision=false is identical to eager" in r.stdout


@pytest.mark.parametrize("args,message", [
    (["compare", "no/such/model.py"], "no/such/model.py: no such file"),
    (["compare", SEED, "--paths", "eager,jti"], "unknown path 'jti'; did you mean jit?"),
    (["compar", SEED], "invalid choice: 'compar'"),
    (["compare", SEED, "--sampels", "3"], "--sampels: did you mean --samples?"),
    (["sweep", "s.toml", "--jbos", "2"], "--jbos: did you mean --jobs"),
    (["compare", SEED, "--paths", "eager,savedmodel:XLA_FLAGS=--xla_allow_excess_precison=false"],
     "XLA has no flag --xla_allow_excess_precison; did you mean --xla_allow_excess_precision?"),
    (["compare", SEED, "--paths", "eager:foo=1"], "path 'eager' has no option 'foo'"),
    (["compare", SEED, "--baseline", "nope"], "unknown path 'nope'"),
    (["compare", SEED, "--inputs", "missing.npz"], "--inputs missing.npz: no such file"),
    (["compare", "README.md"], "a case is a Python file"),
    (["compare", SEED, "--ulp", "-1"], "--ulp must be a non-negative integer"),
    # an output in a directory that is not there: said before any path runs, not as a traceback at the end
    (["reduce", SEED, "--paths", "eager,jit", "-o", "no/such/dir/repro.py"],
     "-o/--out no/such/dir/repro.py: there is no directory no/such/dir; create it first"),
    (["explain", SEED, "--json", "no/such/r.json"], "--json no/such/r.json: there is no directory no/such"),
    (["compare", SEED, "--html", "no/such/r.html"], "--html no/such/r.html: there is no directory no/such"),
])
def test_usage_errors_exit_2_with_one_clear_line(args, message):
    r = run_cli(*args)
    assert r.returncode == 2
    assert message in r.stderr
    if args[0] == "compar":
        assert "did you mean compare?" in r.stderr
    assert "Traceback" not in r.stderr


def test_paths_lists_every_path_and_says_it_can_run():
    r = run_cli("paths")
    assert r.returncode == 0
    for name in ("eager", "jit", "export", "savedmodel", "declared", "f64"):
        assert name in r.stdout


@pytest.mark.slow
def test_explain_exits_1_writes_schema_valid_json_and_a_fixed_case_that_passes(tmp_path):
    out, fixed = tmp_path / "e.json", tmp_path / "conv_fixed.py"
    r = run_cli("explain", SEED, "--paths", "eager,jit,export", "--json", str(out), "--write-fixed", str(fixed))
    assert r.returncode == 1, r.stderr
    # jit and export give the same values: one verdict, both named, the fix verified on each
    flat = " ".join(r.stdout.split())
    assert "✗ jit, export diverge from eager — excess precision at examples/conv_bf16.py:30" in flat
    assert ("fix ✓ jax.jit(fn, compiler_options={'xla_allow_excess_precision': False}): parity on jit, export"
            in flat)
    doc = json.loads(out.read_text())
    schema = json.loads(resources.files("jaxparity").joinpath("schema/result-v1.json").read_text())
    jsonschema.validate(doc, schema)
    assert {e["path"] for e in doc["explanations"]} == {"jit", "export"}
    program = doc["explanations"][0]["localization"]["program"]  # the graph, with every op's operands
    assert any(o.startswith("arg") for op in program for o in op["operands"])
    assert any(o.startswith("op") for op in program for o in op["operands"])
    assert fixed.exists() and f"wrote {fixed}" in r.stdout.replace("\n", "")
    # the written case is the fix: jit and export now agree with eager, without any option
    again = run_cli("compare", str(fixed), "--paths", "eager,jit,export")
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.slow
def test_explain_on_agreeing_paths_exits_0():
    r = run_cli("explain", "examples/mlp_bf16.py", "--paths", "eager,jit")
    assert r.returncode == 0 and "why" not in r.stdout


@pytest.mark.slow
def test_explain_between_any_two_paths():
    # "my jax.jit result differs from TensorFlow Serving": the serving process with the flag against jit
    # without it. Both are compiled; the first op whose inputs agree and output does not is named.
    flag = "savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false"
    r = run_cli("explain", SEED, "--baseline", flag, "--paths", "jit")
    assert r.returncode == 1, r.stderr
    flat = " ".join(r.stdout.split())
    assert re.search(r"--> examples/conv_bf16.py:30 #\d+ convert_element_type in \S+: 100% of the difference", flat)
    assert "never rounded" in flat and "excess precision" in flat


@pytest.mark.slow
def test_html_and_model_explorer_outputs(tmp_path):
    html, me = tmp_path / "r.html", tmp_path / "me"
    r = run_cli("explain", SEED, "--paths", "eager,jit", "--html", str(html), "--model-explorer", str(me))
    assert r.returncode == 1, r.stderr
    text = html.read_text()
    assert 'id="summary"' in text and 'id="drift"' in text and "float-normalization-bf16" in text
    assert "http://" not in text and "https://" not in text
    assert json.loads((me / "jit.drift.json").read_text())["results"]
    assert f"model-explorer {me / 'graph.json'} --node_data_paths=" in r.stderr
