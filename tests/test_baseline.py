"""Baselines: snapshot, check, and the ways a baseline can be unusable."""

import json

import pytest

from conftest import run_cli
from jaxparity.baseline import BaselineError, check, load_manifest, snapshot
from jaxparity.execution.envs import parse_env
from jaxparity.metrics import Tolerance

pytestmark = pytest.mark.slow

SEED = "examples/conv_bf16.py"
OLD = parse_env("old=jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0")


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, examples):
    out = tmp_path_factory.mktemp("baseline") / "conv"
    snapshot(str(examples / "conv_bf16.py"), out, paths=["eager", "jit", "savedmodel:native_serialization=false"])
    return out


def test_snapshot_stores_inputs_outputs_environment_and_hashes(baseline):
    manifest = load_manifest(baseline)
    assert set(manifest["paths"]) == {"eager", "jit", "savedmodel:native_serialization=false", "f64"}
    assert manifest["environment"]["packages"]["jax"] == "0.9.2"
    assert {"inputs.npz", "outputs/eager.npz", "outputs/jit.npz"} <= set(manifest["files"])


def test_check_on_the_same_stack_passes(baseline, examples):
    r = check(str(examples / "conv_bf16.py"), baseline)
    assert r.passed and {m.status for m in r.moves} == {"same"} and r.changes == ()


def test_a_baseline_checked_with_another_jax_names_what_moved_and_why(baseline, examples):
    # jax 0.9.2 ignores native_serialization=false (the SavedModel keeps XLA's excess precision);
    # jax 0.4.38 honours it (TF ops, eager's numbers): that path moves, the others do not.
    r = check(str(examples / "conv_bf16.py"), baseline, in_env="old", envs=[OLD])
    moves = {m.spec: m.status for m in r.moves}
    assert moves["savedmodel:native_serialization=false"] == "moved"
    assert moves["eager"] == "same" and moves["jit"] == "same"
    assert "jax: 0.9.2 -> 0.4.38" in r.changes and "tensorflow-cpu: 2.21.0 -> 2.18.0" in r.changes
    assert not r.passed and r.exit_code == 1
    moved = next(m for m in r.moves if m.status == "moved")
    ulp = moved.leaves[0][1].max_ulp
    assert check(str(examples / "conv_bf16.py"), baseline, in_env="old", envs=[OLD],
                 tolerance=Tolerance(ulp=ulp)).passed


def test_a_snapshot_never_overwrites_a_baseline(baseline, examples):
    with pytest.raises(BaselineError, match="already holds a baseline; choose another directory or pass --force"):
        snapshot(str(examples / "conv_bf16.py"), baseline, paths=["eager"])
    r = run_cli("snapshot", SEED, "-o", str(baseline), "--paths", "eager")
    assert r.returncode == 2 and "already holds a baseline" in r.stderr


@pytest.mark.parametrize("damage,message", [
    (lambda d: (d / "outputs" / "jit.npz").write_bytes((d / "outputs" / "jit.npz").read_bytes()[:40]),
     "outputs/jit.npz was modified or truncated"),
    (lambda d: (d / "inputs.npz").unlink(), "inputs.npz is missing"),
    (lambda d: (d / "manifest.json").write_text("{not json"), "manifest.json: corrupt"),
    (lambda d: (d / "manifest.json").write_text(json.dumps({"format": 99})), "not a jaxparity baseline"),
])
def test_a_corrupt_or_truncated_baseline_is_a_clear_error(baseline, tmp_path, damage, message):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(baseline, copy)
    damage(copy)
    with pytest.raises(BaselineError, match=message):
        load_manifest(copy)
    r = run_cli("check", SEED, "--against", str(copy))
    assert r.returncode == 2 and message.split(" ")[0] in r.stderr and "Traceback" not in r.stderr


def test_a_baseline_of_another_case_is_refused(baseline, examples):
    with pytest.raises(BaselineError, match="does not match|is a baseline of"):
        check(str(examples / "mlp_bf16.py"), baseline)


def test_check_on_the_command_line(baseline, tmp_path):
    out = tmp_path / "check.json"
    r = run_cli("check", SEED, "--against", str(baseline), "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no path moved beyond tolerance" in r.stdout
    assert json.loads(out.read_text())["passed"] is True


def test_check_says_when_the_case_now_gives_other_inputs_and_runs_on_them_when_asked(tmp_path):
    """The weights changed since the snapshot: the check re-runs the stored ones, and says so; with
    --case-inputs it runs the case as it is now, and the paths move with the weights."""
    case = tmp_path / "weights.py"
    case.write_text("import os, jax.numpy as jnp\n"
                    "def make():\n"
                    "    w = jnp.full((4, 3), float(os.environ.get('WEIGHT', '1')))\n"
                    "    return (lambda params, x: jnp.tanh(x @ params)), (w, jnp.arange(8.0).reshape(2, 4) / 8)\n")
    out = tmp_path / "snap"
    snapshot(str(case), out, paths=["eager", "jit"])
    same = check(str(case), out)
    assert same.passed and same.notes == ("ran on the snapshot's inputs, which are the case's own as it is now",)
    import os

    os.environ["WEIGHT"] = "2"
    try:
        stored = check(str(case), out)
        now = check(str(case), out, case_inputs=True)
    finally:
        del os.environ["WEIGHT"]
    assert stored.passed and "the case's own inputs now differ from the snapshot's in 1 of 2 (arg0)" in stored.notes[0]
    assert "--case-inputs" in stored.notes[0]
    assert not now.passed and {m.status for m in now.moves} == {"moved"}
    assert "ran on the case's own inputs (--case-inputs)" in now.notes[0]


def test_the_f64_row_is_measured_in_the_outputs_declared_dtype(tmp_path):
    """A bf16 output: the f64 path's float64 values, then and now, correctly rounded to bfloat16 as
    compare measures them, never ~2**63 float64 ULP."""
    import os

    import numpy as np

    case = tmp_path / "bf16.py"
    case.write_text("import os, jax.numpy as jnp\n"
                    "def make():\n"
                    "    w = jnp.full((4, 3), float(os.environ.get('WEIGHT', '1')), jnp.bfloat16)\n"
                    "    x = (jnp.arange(8.0).reshape(2, 4) / 8 - 0.4).astype(jnp.bfloat16)\n"
                    "    return (lambda params, x: jnp.tanh(x @ params)), (w, x)\n")
    out = tmp_path / "snap"
    snapshot(str(case), out, paths=["eager"])
    os.environ["WEIGHT"] = "-2"  # every output changes sign
    try:
        now = check(str(case), out, case_inputs=True)
    finally:
        del os.environ["WEIGHT"]
    moves = {m.spec: m for m in now.moves}
    (_, eager), = moves["eager"].leaves
    (_, f64), = moves["f64"].leaves
    assert moves["f64"].status == "moved" and f64.dtype == eager.dtype == "bfloat16"
    assert 0 < f64.max_ulp < 1 << 16 and abs(f64.max_ulp - eager.max_ulp) <= 2
    stored = np.load(out / "outputs" / "f64.npz")
    assert stored[stored.files[0]].dtype == np.float64  # the snapshot keeps the ideal as it is
