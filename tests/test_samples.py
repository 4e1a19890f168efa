"""Many-inputs mode: --samples N --seed S, --inputs DIR, --repeat K."""

import json

import numpy as np
import pytest

from conftest import run_cli, valid_result
from jaxparity.arrayio import save_arrays
from jaxparity.metrics import Tolerance
from jaxparity.execution.samples import args_with, draw_sample, draw_samples


def test_draw_samples_keep_shapes_dtypes_and_are_reproducible():
    import ml_dtypes

    example = {"x": np.ones((3, 4), ml_dtypes.bfloat16) * 2, "i": np.array([3, 0, 4, 1, 2], np.int32),
               "b": np.array([True, False])}
    sets = draw_samples(example, 4, seed=7)
    assert len(sets) == 4
    for s in sets:
        assert set(s) == {"x", "i"}  # booleans stay the case's own; integers vary within their range
        assert 0 <= s["i"].min() and s["i"].max() <= 4 and s["i"].dtype == np.int32
        assert s["x"].shape == example["x"].shape and s["x"].dtype == example["x"].dtype
    assert not np.array_equal(sets[0]["x"], sets[1]["x"])
    again = draw_sample(example, 7, 2)
    assert again["x"].tobytes() == sets[2]["x"].tobytes()


def test_draw_samples_keep_integer_masks_and_position_ids():
    """A Hugging Face model's int32 attention mask and position ids say where the tokens are: drawn within
    their range they would be invalid inputs (a padded position inside a sequence). The token ids vary."""
    mask = np.ones((2, 6), np.int32)
    mask[1, 4:] = 0
    example = {"arg1/input_ids": np.array([[5, 9, 2, 7, 1, 8], [3, 3, 6, 0, 4, 2]], np.int32),
               "arg1/attention_mask": mask,
               "arg1/position_ids": np.broadcast_to(np.arange(6, dtype=np.int32), (2, 6)),
               "arg1/left_padded_positions": np.array([[0, 0, 0, 1, 2, 3]], np.int32)}
    assert set(draw_sample(example, 0, 0)) == {"arg1/input_ids"}


def test_draw_samples_keep_the_model_variables():
    """Leaves of an argument holding a Flax params collection are the trained model: kept."""
    example = {"arg0/params/Dense_0/kernel": np.ones((2, 2), np.float32),
               "arg0/batch_stats/BatchNorm_0/mean": np.zeros(2, np.float32),
               "arg1": np.ones((3, 2), np.float32), "arg2/params_like": np.ones(2, np.float32)}
    s = draw_sample(example, 0, 0)
    assert set(s) == {"arg1", "arg2/params_like"}


def test_args_with_replaces_leaves_and_rejects_bad_shapes():
    import jax.numpy as jnp

    args = ({"w": jnp.zeros(3)}, jnp.ones(2))
    new = args_with(args, {"arg1": np.full(2, 5, np.float32)})
    assert float(new[1][0]) == 5 and new[0]["w"].shape == (3,)
    with pytest.raises(ValueError):
        args_with(args, {"arg1": np.zeros(3, np.float32)})


def test_jit_compiles_once_across_samples(monkeypatch):
    import jax
    import jax.numpy as jnp
    from jax._src import stages

    from jaxparity.execution.inprocess import run_in_process
    from jaxparity.paths import make_path

    calls = []
    original = stages.Lowered.compile

    def counting(self, *a, **k):
        calls.append(1)
        return original(self, *a, **k)

    monkeypatch.setattr(stages.Lowered, "compile", counting)

    def fn(x):
        return jnp.sin(x) * 2

    args = (jnp.ones(8, jnp.float32),)
    from jaxparity.paths.staging import compile_once

    with compile_once():
        for s in draw_samples({"arg0": np.ones(8, np.float32)}, 10, 0):
            run = run_in_process(make_path("jit"), fn, args_with(args, s))
            assert run.status == "ok"
    assert len(calls) == 1
    run_in_process(make_path("jit"), fn, args)  # outside many-inputs mode every run compiles
    assert len(calls) == 2
    del jax


@pytest.mark.slow
def test_samples_on_conv(examples, tmp_path):
    out, worst = tmp_path / "r.json", tmp_path / "worst.npz"
    proc = run_cli("compare", str(examples / "conv_bf16.py"), "--paths", "eager,jit", "--samples", "20",
                   "--seed", "0", "--json", str(out), "--save-worst", str(worst))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(out.read_text())


    valid_result(doc)
    assert doc["samples"] == 20
    jit = next(p for p in doc["paths"] if p["spec"] == "jit")
    s = jit["samples"]
    assert s["n"] == 20 and s["fraction"] > 0 and 0 <= s["worst_sample"] < 20
    q = s["ulp_percentiles"]
    assert q["50"] <= q["90"] <= q["99"] <= q["100"]
    assert jit["leaves"][0]["diff"]["max_ulp"] == q["100"]
    assert f"sample {s['worst_sample']} of 20 (seed 0)" in doc["input_source"]
    # The worst sample alone reproduces the worst difference.
    alone = tmp_path / "alone.json"
    proc = run_cli("compare", str(examples / "conv_bf16.py"), "--paths", "eager,jit", "--inputs", str(worst),
                   "--json", str(alone))
    assert proc.returncode == 1, proc.stderr
    jit_alone = next(p for p in json.loads(alone.read_text())["paths"] if p["spec"] == "jit")
    assert jit_alone["leaves"][0]["diff"]["max_ulp"] == q["100"]
    assert jit_alone["leaves"][0]["diff"]["max_abs"] == jit["leaves"][0]["diff"]["max_abs"]


@pytest.mark.slow
def test_inputs_dir_and_repeat(examples, tmp_path):
    from jaxparity.case import load_case
    from jaxparity.pytree import argument_leaves, host

    example = {n: host(x) for n, x in argument_leaves(load_case(str(examples / "conv_bf16.py")).args)}
    d = tmp_path / "inputs"
    d.mkdir()
    for i, s in enumerate(draw_samples(example, 3, 1)):
        save_arrays(d / f"s{i}.npz", s)
    out = tmp_path / "r.json"
    proc = run_cli("compare", str(examples / "conv_bf16.py"), "--paths", "eager", "--inputs", str(d),
                   "--repeat", "3", "--json", str(out))
    assert proc.returncode == 0, proc.stderr  # the baseline alone agrees with itself: exit as compare
    doc = json.loads(out.read_text())
    assert doc["samples"] == 3
    for p in doc["paths"]:
        assert p["samples"]["n"] == 3 and p["samples"]["repeat"] == 3
        assert p["samples"]["nondeterministic"] == 0
        assert not any("nondeterministic" in n for n in p["notes"])


def test_usage_errors(examples):
    proc = run_cli("compare", str(examples / "conv_bf16.py"), "--samples", "0")
    assert proc.returncode == 2
    proc = run_cli("compare", str(examples / "conv_bf16.py"), "--repeat", "2")
    assert proc.returncode == 2


def test_aggregate_percentiles_monotone():
    from jaxparity.comparison import aggregate_samples
    from jaxparity.execution.runs import CaseInfo, PathRun

    base = np.zeros(4, np.float32)
    runs = {"eager": [[PathRun("eager", "ok", (("out", base),))] for _ in range(5)],
            "jit": [[PathRun("jit", "ok", (("out", np.nextafter(base, np.float32(1)) if i % 2 else base),))]
                    for i in range(5)]}
    info = CaseInfo("t", None, "x", ())
    r = aggregate_samples(info, runs, "eager", Tolerance(), {"eager", "jit"}, [f"s{i}" for i in range(5)])
    s = r.path("jit").samples
    assert s.diverging == 2 and s.worst_sample in (1, 3) and r.path("jit").verdict == "differs"
    assert s.ulp_percentiles["50"] <= s.ulp_percentiles["100"] == 1
    assert r.exit_code == 1


@pytest.mark.slow
def test_explain_in_many_inputs_mode_explains_the_worst_sample():
    r = run_cli("explain", "examples/conv_bf16.py", "--paths", "eager,jit", "--samples", "6", "--seed", "1")
    assert r.returncode == 1, r.stderr
    assert "✗ jit diverges from eager — excess precision at" in " ".join(r.stdout.split())
    assert "explained on sample" in r.stdout and "the worst sample for jit" in r.stdout


_MANY_CASE = '''
import os

import jax.numpy as jnp


def make():
    def fn(x):
        if float(x[0]) < 0:  # eager only: a failure that depends on the sample
            raise ValueError("negative input")
        if float(x[0]) > 100:
            os._exit(3)  # kills the worker
        return x * 2

    return fn, (jnp.ones(4, jnp.float32),)
'''


@pytest.mark.slow
def test_run_many_reports_each_sample_and_survives_a_crash(tmp_path):
    from jaxparity.execution.isolated import IsolatedRunner

    case = tmp_path / "case.py"
    case.write_text(_MANY_CASE)
    sets = [{"arg0": np.full(4, v, np.float32)} for v in (1, -1, 2, 0, 3, 500, 4)]
    sets[3] = {"arg0": np.zeros(3, np.float32)}  # does not fit the case
    with IsolatedRunner(str(case)) as runner:
        runner.send_samples(sets)
        parts = list(runner.run_many("eager", range(0, 7), repeat=2, timeout=60, chunk=2))
        assert [len(p) for p in parts] == [2, 2, 2, 1]  # streamed chunk by chunk
        runs = [r for p in parts for r in p]
        assert [[r.status for r in repeats] for repeats in runs] == [
            ["ok", "ok"], ["error", "error"], ["ok", "ok"], ["error"], ["crashed"], ["crashed"], ["ok", "ok"]]
        assert "ValueError: negative input" in runs[1][0].message
        assert "arg0 is float32[3], the case expects float32[4]" in runs[3][0].message
        assert "exited with status 3" in runs[5][0].message
        for i, v in ((0, 1), (2, 2), (6, 4)):  # the samples after the crash ran in a fresh worker
            (name, out), = runs[i][1].outputs
            assert name == "out" and isinstance(out, np.ndarray)
            np.testing.assert_array_equal(out, np.full(4, 2 * v, np.float32))
        # Abandoned halfway, the worker (still sending) is stopped; the next call starts a fresh one.
        first = runner.run_many("eager", range(0, 4), chunk=2)
        assert [r[0].status for r in next(first)] == ["ok", "error"]
        first.close()
        (run,), = [r for p in runner.run_many("eager", range(6, 7)) for r in p]
        np.testing.assert_array_equal(run.outputs[0][1], np.full(4, 8, np.float32))


def test_the_samples_table_never_counts_a_reference_as_failing():
    from rich.console import Console

    from jaxparity.comparison import aggregate_samples
    from jaxparity.execution.runs import CaseInfo, PathRun
    from jaxparity.report.terminal import print_result

    base = np.linspace(1, 2, 4, dtype=np.float32)
    runs = {"eager": [[PathRun("eager", "ok", (("out", base),))] for _ in range(3)],
            "jit": [[PathRun("jit", "ok", (("out", np.nextafter(base, np.float32(3))),))] for _ in range(3)],
            "f64": [[PathRun("f64", "ok", (("out", base + 1e-5),))] for _ in range(3)]}
    r = aggregate_samples(CaseInfo("t", None, "x", ()), runs, "eager", Tolerance(), {"eager", "jit", "f64"},
                          [f"s{i}" for i in range(3)])
    assert r.path("f64").reference and r.path("jit").samples.failing == 3
    console = Console(record=True, width=120)
    print_result(r, console)
    rows = {cells[0]: cells for line in console.export_text().splitlines()
            if (cells := [c.strip() for c in line.split("│")])[0] in ("jit", "f64") and len(cells) > 3}
    assert rows["jit"][1:3] == ["3/3", "3"]  # diverges on 3 of 3, fails on 3
    assert rows["f64"][1:3] == ["3/3", ""]  # where the numbers should be: no fail count


def test_a_path_that_failed_on_every_sample_names_no_worst_sample():
    from jaxparity.comparison import aggregate_samples
    from jaxparity.execution.runs import CaseInfo, PathRun

    base = np.linspace(1, 2, 4, dtype=np.float32)
    runs = {"eager": [[PathRun("eager", "ok", (("out", base),))] for _ in range(5)],
            "jit": [[PathRun("jit", "ok", (("out", np.nextafter(base, np.float32(3)) if i == 3 else base),))]
                    for i in range(5)],
            "tflite": [[PathRun("tflite", "error", None, message="RuntimeError: no kernel")] for _ in range(5)]}
    r = aggregate_samples(CaseInfo("t", None, "x", ()), runs, "eager", Tolerance(), set(runs),
                          [f"sample {i} of 5" for i in range(5)])
    assert r.path("tflite").samples.errored == 5 and r.exit_code == 1
    assert r.input_source == "5 samples; the worst: jit: sample 3 of 5; tflite failed on all 5"
    alone = {k: v for k, v in runs.items() if k != "jit"}
    r = aggregate_samples(CaseInfo("t", None, "x", ()), alone, "eager", Tolerance(), set(alone),
                          [f"sample {i} of 5" for i in range(5)])
    assert r.input_source == "5 samples; tflite failed on all 5"


def test_prng_keys_are_known_typed_or_raw_and_never_drawn():
    """A typed key, and a raw uint32[2] key known by feeding jax.random's primitives, stay as they are: drawn as
    data they would be other keys (a hunt once varied a Haiku sampler's key "in [0, 2]")."""
    import jax

    from jaxparity.execution.samples import key_inputs

    def noisy(key, x, n):
        return x + 0.01 * jax.random.normal(key, x.shape) * n.sum()

    x, n = np.linspace(-1, 1, 8, dtype=np.float32), np.arange(3, dtype=np.int32)
    assert key_inputs(noisy, (np.asarray(jax.random.PRNGKey(3)), x, n)) == {"arg0"}
    assert key_inputs(noisy, (jax.random.key(3), x, n)) == {"arg0"}
    assert key_inputs(lambda a, b: a * b, (x, x)) == set()
