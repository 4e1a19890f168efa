"""Bad input and misbehaving paths: one clear line naming the path and the cause; the rest still run."""

import numpy as np
import pytest

from conftest import run_cli
from jaxparity.arrayio import save_arrays
from jaxparity.case import CaseError, load_case

pytestmark = pytest.mark.slow

MIS = "tests/cases/misbehaving.py"


def _lines(r):
    return r.stdout + r.stderr


def test_a_path_that_raises_is_reported_and_the_others_run():
    r = run_cli("compare", f"{MIS}:make_raises", "--paths", "eager,jit,declared", "--verbose")
    assert r.returncode == 1
    out = _lines(r)
    assert "jit" in out and "RuntimeError: refusing to be traced" in out and "misbehaving.py:" in out
    assert "eager" in out and "the baseline" in out


def test_a_path_that_crashes_its_process_is_reported_and_the_next_path_runs():
    r = run_cli("compare", f"{MIS}:make_crashes", "--paths", "eager,jit,export", "--verbose")
    assert r.returncode == 1
    out = _lines(r)
    assert "crashed" in out and "SIGABRT" in out
    # jit crashed the worker; export ran in a fresh worker and crashed it again; eager is intact
    assert out.count("killed by SIGABRT") >= 2 and "the baseline" in out


def test_a_path_that_hangs_is_stopped_at_the_timeout():
    r = run_cli("compare", f"{MIS}:make_hangs", "--paths", "eager,jit", "--timeout", "10", timeout=300)
    assert r.returncode == 1
    out = _lines(r)
    assert "timeout" in out and "did not finish within 10 s" in out


def test_an_untraceable_function_names_the_users_line():
    r = run_cli("compare", f"{MIS}:make_untraceable", "--paths", "eager,jit")
    assert r.returncode == 1
    assert "misbehaving.py:" in _lines(r) and "Concretization" in _lines(r) or "Tracer" in _lines(r)


@pytest.mark.parametrize("factory,message", [
    ("make_factory_raises", "make_factory_raises() raised ValueError: the checkpoint file is missing at misbehaving.py:"),
    ("make_not_a_pair", "must return (fn, args)"),
    ("make_nothing", "no factory function 'make_nothing'"),
])
def test_bad_factories_exit_2(factory, message):
    r = run_cli("compare", f"{MIS}:{factory}", "--paths", "eager")
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_inputs_file_overrides_bit_exactly_and_wrong_structure_is_named(tmp_path, examples):
    import ml_dtypes

    x = np.array([[[-1.0932410, -1.2380177]]], np.float32)
    good = tmp_path / "x.npz"
    save_arrays(good, {"arg1": x})
    case = load_case(str(examples / "conv_bf16.py"), good)
    np.testing.assert_array_equal(np.asarray(case.args[1]), x)
    assert "x.npz" in case.input_source

    bad = tmp_path / "bad.npz"
    save_arrays(bad, {"arg1": np.zeros((2, 2), np.float32)})
    with pytest.raises(CaseError, match=r"arg1 is float32\[2, 2\], the case expects float32\[1, 1, 2\]"):
        load_case(str(examples / "conv_bf16.py"), bad)
    wrong_name = tmp_path / "name.npz"
    save_arrays(wrong_name, {"x": x})
    with pytest.raises(CaseError, match=r"arrays \['x'\] match no input.*arg1 float32\[1, 1, 2\]"):
        load_case(str(examples / "conv_bf16.py"), wrong_name)
    r = run_cli("compare", "examples/conv_bf16.py", "--inputs", str(bad), "--paths", "eager")
    assert r.returncode == 2 and "the case expects" in r.stderr

    # bf16 saved by plain numpy comes back as raw |V2 bytes and is viewed, not converted
    plain = tmp_path / "plain.npz"
    np.savez(plain, arr_0=np.zeros((1, 1, 2), ml_dtypes.bfloat16))
    with pytest.raises(CaseError, match=r"arg0/params/Conv_0/kernel is raw 2-byte values"):
        load_case(str(examples / "conv_bf16.py"), plain)  # the kernel is float32: a real mismatch
    bf16_case = tmp_path / "bf16_case.py"
    bf16_case.write_text("import jax.numpy as jnp\n\ndef make():\n"
                         "    return (lambda x: x * 3), (jnp.ones((2,), jnp.bfloat16),)\n")
    bits = np.array([0x3F81, 0x0001], np.uint16)  # 1.0078125 and the smallest subnormal
    np.savez(plain, arr_0=bits.view(ml_dtypes.bfloat16))
    loaded = np.asarray(load_case(str(bf16_case), plain).args[0])
    assert loaded.dtype == ml_dtypes.bfloat16 and loaded.view(np.uint16).tolist() == bits.tolist()


def test_a_rerun_that_kills_the_explaining_process_is_skipped_and_said_the_rest_explained():
    """One re-run of the explanation (round_like_declared re-tracing the model) kills its worker with SIGSEGV:
    a new worker explains again without it. The cause and its verified flag fix stand; the model change says
    its re-run crashed, never "verified" nor "refuted"."""
    from jaxparity.comparison import compare_case

    result = compare_case(f"{MIS}:make_crashes_when_rewritten", paths=["eager", "jit"], explain=True)
    (e,) = result.explanations
    assert next(c for c in e.causes if c.status == "confirmed").cause == "excess-precision"
    flag = next(f for f in e.fixes if f.kind == "compile option")
    assert flag.verified and flag.spec == "jit:xla_allow_excess_precision=false"
    model = next(f for f in e.fixes if f.kind == "model change")
    assert not model.verified
    assert "crashed: re-running jit [fixed model] was killed by SIGSEGV (its process died there; that re-run is " \
           "skipped)" in model.evidence, model.evidence


def test_a_rerun_that_hangs_is_stopped_and_said_the_rest_explained(monkeypatch):
    """The re-traced model never returns: past JAXPARITY_RERUN_TIMEOUT the worker is stopped, a new one explains
    without that re-run, and the model change says it did not finish."""
    from jaxparity.comparison import compare_case

    monkeypatch.setenv("JAXPARITY_RERUN_TIMEOUT", "20")
    result = compare_case(f"{MIS}:make_hangs_when_rewritten", paths=["eager", "jit"], explain=True)
    (e,) = result.explanations
    flag = next(f for f in e.fixes if f.kind == "compile option")
    assert flag.verified and flag.spec == "jit:xla_allow_excess_precision=false"
    model = next(f for f in e.fixes if f.kind == "model change")
    assert not model.verified
    assert "timeout: re-running jit [fixed model] did not finish within 20 s (it was stopped; that re-run is " \
           "skipped)" in model.evidence, model.evidence
