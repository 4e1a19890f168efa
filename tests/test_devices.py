"""The device a path computes on (issue 38): ``device=`` runs a path of this process on that platform, every
report names where each path ran, and the command's own process stays on the host so that the worker
running the paths is the one that holds an accelerator. On these CPU machines the accelerator half is the
refusal; the TPU runs are recorded in BENCHMARKS.md."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np

import jaxparity
from conftest import run_cli, valid_result


def f(x, w):
    return jnp.tanh(x @ w)


X = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
W = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)


def test_a_path_on_the_host_device_by_option():
    result = jaxparity.compare(f, X, W, paths=["eager", "jit:device=cpu", "export:device=cpu", "eager:device=cpu"])
    for spec in ("jit:device=cpu", "export:device=cpu", "eager:device=cpu"):
        p = result.path(spec)
        assert p.status == "ok" and p.device == "cpu", (spec, p.status, p.message)
    assert result.path("eager").device == jax.default_backend()
    from jaxparity.report.format import devices_line

    assert devices_line(result) == "cpu (every path that ran)"


def test_a_device_this_process_lacks_is_unavailable_and_says_so():
    if any(d.platform == "tpu" for d in jax.devices()):
        return  # on a TPU machine the path runs: see test_a_path_on_the_host_device_by_option
    result = jaxparity.compare(f, X, W, paths=["eager", "jit:device=tpu"])
    p = result.path("jit:device=tpu")
    assert p.status == "unavailable" and p.device is None
    assert "device=tpu: this process has no tpu device (it has cpu" in p.message


def test_eager_computes_numpy_inputs_with_jax():
    """Under disable_jit a numpy input would reach the user's code as numpy (``a @ b`` then is numpy's
    matmul); eager hands the model JAX arrays, as jit does."""
    def kind(x):
        return x * (1.0 if isinstance(x, jax.Array) else 2.0)

    result = jaxparity.compare(kind, np.ones(3, np.float32), paths=["eager", "jit"])
    assert result.path("jit").verdict == "identical"


def test_the_workers_get_the_platforms_the_command_was_started_with(monkeypatch):
    from jaxparity.execution.runners import host_only, worker_platforms

    monkeypatch.setenv("JAX_PLATFORMS", "tpu,cpu")
    monkeypatch.delenv("JAXPARITY_WORKER_JAX_PLATFORMS", raising=False)
    with host_only():
        assert os.environ["JAX_PLATFORMS"] == "cpu"
        assert worker_platforms(dict(os.environ))["JAX_PLATFORMS"] == "tpu,cpu"
    assert os.environ["JAX_PLATFORMS"] == "tpu,cpu" and "JAXPARITY_WORKER_JAX_PLATFORMS" not in os.environ
    monkeypatch.delenv("JAX_PLATFORMS")
    with host_only():
        assert "JAX_PLATFORMS" not in worker_platforms(dict(os.environ))
    assert "JAX_PLATFORMS" not in os.environ


def test_the_report_and_json_name_the_device(tmp_path):
    out = tmp_path / "r.json"
    r = run_cli("compare", "examples/conv_bf16.py", "--paths", "eager,jit:device=cpu", "--json", str(out))
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[0].endswith("against eager (exact), on cpu")
    verbose = run_cli("compare", "examples/conv_bf16.py", "--paths", "eager,jit:device=cpu", "--verbose")
    assert "devices  cpu (every path that ran)" in verbose.stdout
    doc = json.loads(out.read_text())
    valid_result(doc)
    assert {p["spec"]: p["device"] for p in doc["paths"]}["jit:device=cpu"] == "cpu"


def test_bfloat16_passes_are_emulated_on_the_host():
    """The matmul unit of a TPU, emulated on the captured inputs (explain/mechanism/device.py): one pass is
    the product of the inputs rounded to bfloat16, exactly summed; six passes are float32-accurate. On a TPU
    v5e the device's own DEFAULT, HIGH and HIGHEST products are within 1e-5 of 1, 3 and 6 passes
    (BENCHMARKS.md)."""
    import ml_dtypes

    from jaxparity.explain.mechanism.device import emulated_passes
    from jaxparity.interpreter import evaluate_eqn
    from jaxparity.localize.program import flatten

    r = np.random.default_rng(0)
    a, b = r.normal(size=(16, 32)).astype(np.float32), r.normal(size=(32, 8)).astype(np.float32)
    op = flatten(lambda x, y: x @ y, (a, b)).ops[0]
    exact = np.asarray(evaluate_eqn(op.eqn, [a, b], mode="f64")[0])
    bf = [v.astype(ml_dtypes.bfloat16).astype(np.float64) for v in (a, b)]
    np.testing.assert_array_equal(emulated_passes(op, [a, b], 1), bf[0] @ bf[1])
    errors = [np.abs(emulated_passes(op, [a, b], k) - exact).max() for k in (1, 3, 6)]
    assert errors[0] > 100 * errors[1] > 100 * 100 * errors[2], errors
    assert errors[2] < 1e-6


def test_on_one_device_the_device_arithmetic_is_not_run(examples):
    from jaxparity.case import load_case

    case = load_case(str(examples / "conv_bf16.py"))
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit"]).explain()
    assert result.explanations
    for e in result.explanations:
        (c,) = [c for c in e.causes if c.cause == "device-arithmetic"]
        assert c.status == "not run" and "same kind of device" in c.evidence


def test_a_function_that_computes_in_numpy_on_purpose_is_said_to():
    """Eager hands the model JAX arrays; a numpy output then comes from numpy on purpose, and the report says so."""
    def in_numpy(x):
        return np.asarray(x) * 2.0

    result = jaxparity.compare(in_numpy, np.ones(3, np.float32), paths=["eager"])
    assert any("computes some of its outputs in numpy" in n for n in result.path("eager").notes)
    plain = jaxparity.compare(f, X, W, paths=["eager"])
    assert not any("numpy" in n for n in plain.path("eager").notes)


def test_a_replayed_product_takes_the_paths_matmul_precision():
    """A path's jax_default_matmul_precision reaches the ops replayed one by one (lax.dot_general reads it at
    trace time; an equation recorded without it is bound as tracing under it would have made it)."""
    import jax
    import numpy as np

    from jaxparity.jaxcompat import as_configured
    from jaxparity.localize.program import flatten
    from jaxparity.paths.base import jax_config

    a = np.ones((4, 4), np.float32)
    (op,) = flatten(lambda x, y: x @ y, (a, a)).ops
    assert op.eqn.params["precision"] is None and as_configured(op.eqn.params)["precision"] is None
    with jax_config({"jax_default_matmul_precision": "highest"}):
        assert as_configured(op.eqn.params)["precision"] == (jax.lax.Precision.HIGHEST,) * 2


def test_like_against_like_a_path_on_another_device_is_judged_against_its_own_mode():
    """Issue 55: on a TPU, eager (the baseline) against jit on the host mixed the compiler's difference with the
    device's. A path that differs from the baseline both in its device and in its mode is measured and explained
    against the path of its own mode on the baseline's device. Here the seed's bf16 convolution runs on this CPU
    as eager, jit and jit:device=cpu, with eager and jit said to have run on a TPU (the one thing this machine
    cannot do): jit:device=cpu gave jit's values bit for bit, so it is identical to jit — no device difference —
    and the excess precision is jit's alone, against eager."""
    import dataclasses

    from jaxparity.case import load_case
    from jaxparity.explain.pairs import counterpart
    from jaxparity.paths.devices import host_twin
    from jaxparity.explain.verdict import decide
    from conftest import ROOT

    case = load_case(str(ROOT / "examples" / "conv_bf16.py"))
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "jit:device=cpu", "eager:device=cpu"])
    on_tpu = dataclasses.replace(result, paths=tuple(
        dataclasses.replace(p, device="tpu") if p.spec in ("eager", "jit") else p for p in result.paths))
    assert counterpart(on_tpu, "jit:device=cpu") == "jit"  # like against like
    assert counterpart(on_tpu, "eager:device=cpu") == "eager" and counterpart(on_tpu, "jit") == "eager"
    assert counterpart(result, "jit:device=cpu") == "eager"  # one device: the baseline
    verdicts = {p: v for v in decide(on_tpu) for p in v.paths}
    assert verdicts["jit"].kind == "divergence" and verdicts["jit"].baseline == "eager"
    assert verdicts["jit:device=cpu"].kind == "identical" and verdicts["jit:device=cpu"].baseline == "jit"
    assert verdicts["eager:device=cpu"].kind == "identical" and verdicts["eager:device=cpu"].baseline == "eager"
    from jaxparity.paths import make_path

    assert [host_twin(make_path(s)) for s in ("eager", "jit:jax_enable_x64=true", "savedmodel")] == \
        ["jit:device=cpu", "jit:jax_enable_x64=true,device=cpu", "jit:device=cpu"]
