"""Host callbacks named (``cases/callbacks.py``): Equinox's error_if, jax.debug.print, a debug callback inside a
scan, an io_callback, a staged checkify check; each found with its primitive, the user's line, the library's
line and the library's switch (or said to have none). Paths that cannot hold them fail naming them, and with
Equinox's switch set in the command's environment (EQX_ON_ERROR=nan) export runs and matches jit."""

import json

import jax
import jax.numpy as jnp
import pytest

from conftest import CASES, run_cli, valid_result
from jaxparity.case import load_case
from jaxparity.localize.callbacks import SWITCHES, find_callbacks, names_a_callback
from planted_lines import planted_line

CASE = CASES / "callbacks.py"


def _found(factory: str):
    case = load_case(f"{CASE}:{factory}")
    return find_callbacks(case.fn, case.args)


def test_equinox_error_if_is_named_with_its_lines_and_switch():
    found = _found("error_if")
    assert [cb.primitive for cb in found] == ["pure_callback", "pure_callback"]  # inside a cond inside custom_jvp
    for cb in found:
        assert cb.user_source is not None and cb.user_source.endswith(planted_line(CASE, "error_if"))
        assert cb.library_source is not None and cb.library_source.startswith("equinox/_errors.py:")
        assert cb.library == "equinox" and cb.env == {"EQX_ON_ERROR": "nan"}
        assert cb.switch is not None and "EQX_ON_ERROR=nan" in cb.switch
    assert found[0].library_source != found[1].library_source  # the two callbacks of error_if's error branch


@pytest.mark.parametrize(("factory", "primitive", "what"), [
    ("debug_print", "debug_print", "debug.print"),
    ("scan_callback", "debug_callback", "debug.callback"),  # in a scan body
])
def test_jax_debug_calls_are_named_with_no_switch(factory, primitive, what):
    (cb,) = _found(factory)
    assert cb.primitive == primitive and cb.user_source.endswith(planted_line(CASE, what))
    assert cb.library == "jax.debug" and cb.switch is None and cb.env == {}
    assert "remove the debug call" in cb.instead


def test_a_callback_of_no_known_library_says_no_switch_is_known():
    (cb,) = _found("io")
    assert cb.primitive == "io_callback" and cb.user_source.endswith(planted_line(CASE, "io_callback"))
    assert cb.library is None and cb.switch is None and cb.library_source is None
    assert "compute it in JAX" in cb.instead


def test_a_staged_checkify_check_is_named_and_checkify_checkify_takes_it_out():
    from jax.experimental import checkify

    def fn(x):
        checkify.check(jnp.all(x > 0), "negative")
        return x * 2

    x = jnp.ones(3)
    (cb,) = find_callbacks(fn, (x,))
    assert cb.primitive == "check" and cb.library == "checkify" and "checkify.checkify(fn)" in cb.instead
    assert find_callbacks(checkify.checkify(fn), (x,)) == ()  # the switch it names holds no callback


def test_a_program_without_callbacks_has_none_and_a_nested_jit_is_opened():
    assert _found("plain") == ()
    inner = jax.jit(lambda x: jax.debug.print("{}", x) or x + 1)
    (cb,) = find_callbacks(lambda x: inner(x) * 2, (jnp.ones(2),))
    assert cb.primitive == "debug_print" and cb.user_source is not None and "test_callbacks.py:" in cb.user_source


def test_the_runtimes_own_words_are_told_apart():
    assert names_a_callback("NotImplementedError: serialization of host_callbacks is not yet implemented")
    assert names_a_callback("NotImplementedError: [cond] No plugins registered for primitive 'pure_callback'")
    assert names_a_callback("call_target_name xla_ffi_python_cpu_callback")
    assert not names_a_callback("NotImplementedError: [converter] No plugins registered for primitive 'erf_inv'")
    assert not names_a_callback(None)


def test_the_switches_are_data_keyed_by_library():
    assert len({s.library for s in SWITCHES}) == len(SWITCHES)
    for s in SWITCHES:
        assert (s.switch is None) != (s.instead is None), s.library  # a switch, or plainly none and what instead
        assert not s.env or s.switch is not None


@pytest.mark.slow
def test_paths_that_cannot_hold_them_fail_naming_them_in_the_report_and_json(tmp_path):
    out = tmp_path / "r.json"
    r = run_cli("compare", f"{CASE}:error_if", "--paths", "eager,jit,export,savedmodel", "--json", str(out))
    assert r.returncode == 1, r.stderr
    doc = json.loads(out.read_text())
    valid_result(doc)
    paths = {p["spec"]: p for p in doc["paths"]}
    assert paths["jit"]["verdict"] == "identical" and paths["jit"]["callbacks"] == []  # jit runs them, as before
    for spec in ("export", "savedmodel"):
        p = paths[spec]
        assert p["status"] == "error" and "host_callbacks" in p["message"]  # the runtime's own words kept
        assert [cb["primitive"] for cb in p["callbacks"]] == ["pure_callback", "pure_callback"]
        assert all(cb["env"] == {"EQX_ON_ERROR": "nan"} for cb in p["callbacks"])
    text = r.stdout
    line = planted_line(CASE, "error_if")
    assert "could not run because of 2 host callbacks" in text and line in text and "equinox/_errors.py:" in text
    assert text.count("could not run because of 2 host callbacks") == 1  # one verdict for both, listed once
    assert "EQX_ON_ERROR=nan jaxparity compare" in text and f"{CASE}:error_if" in text


@pytest.mark.slow
def test_with_equinox_switch_set_export_runs_and_matches_jit(monkeypatch, tmp_path):
    monkeypatch.setenv("EQX_ON_ERROR", "nan")  # the command's environment, which its workers inherit
    out = tmp_path / "r.json"
    r = run_cli("compare", f"{CASE}:error_if", "--paths", "eager,jit,export", "--baseline", "jit", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    paths = {p["spec"]: p for p in json.loads(out.read_text())["paths"]}
    assert paths["export"]["verdict"] == "identical" and paths["export"]["callbacks"] == []
    assert "EQX_ON_ERROR=nan jaxparity" not in r.stdout  # nothing left to switch


@pytest.mark.slow
def test_a_debug_print_says_no_switch_and_offers_no_command():
    r = run_cli("compare", f"{CASE}:debug_print", "--paths", "eager,jit,export")
    assert r.returncode == 1
    assert "debug_print at" in r.stdout and planted_line(CASE, "debug.print") in r.stdout
    assert "no switch is known" in r.stdout and "to run them with the switch" not in r.stdout
