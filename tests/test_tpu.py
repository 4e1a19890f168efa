"""On a TPU (issue 38): the default comparison includes the host, the device's float32 products are named as
bfloat16 passes and the highest precision verified on the device, the seed's excess precision and its flag
hold there. These run where JAX sees a TPU (the lent TPU machine: `python -m pytest tests/test_tpu.py` there,
in one process, since one process at a time holds the chip) and are skipped elsewhere, saying why; CI has no
TPU, and tests/test_bundle.py explains two bundles captured on one."""

import jax
import pytest

import jaxparity
from jaxparity.case import load_case
from conftest import ROOT

_PLATFORMS = sorted({d.platform for d in jax.devices()})
pytestmark = pytest.mark.skipif("tpu" not in _PLATFORMS, reason=f"needs a TPU: JAX sees only {', '.join(_PLATFORMS)} here")

CASES = ROOT / "benchmarks" / "tpu" / "cases.py"


def explained(spec, paths=None):
    case = load_case(spec)
    return jaxparity.compare(case.fn, *case.args, paths=paths).explain()


def test_the_default_comparison_sees_the_host_and_names_the_matmul_passes():
    result = explained(f"{CASES}:make_mlp")
    host = result.path("jit:device=cpu")
    assert host.device == "cpu" and result.path("eager").device == "tpu"
    assert not result.passed
    (e,) = [e for e in result.explanations if e.path == "jit:device=cpu"]
    assert e.baseline == "jit"  # like against like: the host's jit against the TPU's
    (c,) = [c for c in e.causes if c.cause == "device-arithmetic"]
    assert c.status == "confirmed" and "1 bfloat16 pass" in c.evidence, c
    assert c.proof is not None and c.proof.spec == "jit:jax_default_matmul_precision=highest"
    assert c.proof.rerun.after[2] < 0.01 * c.proof.rerun.before[2], c.proof
    # What the highest precision leaves is explained with it applied on the TPU's side: the TPU's tanh.
    rest = e.remainder
    assert rest is not None and rest.baseline == "jit:jax_default_matmul_precision=highest", e.summary
    assert "tanh" in rest.summary, rest.summary


def test_the_seed_is_excess_precision_on_the_tpu_and_its_flag_runs():
    result = explained(str(ROOT / "examples" / "conv_bf16.py"), ["eager", "jit"])
    (e,) = result.explanations
    assert any(c.cause == "excess-precision" and c.status == "confirmed" for c in e.causes)
    flagged = load_case(str(ROOT / "examples" / "conv_bf16.py"))
    assert jaxparity.compare(flagged.fn, *flagged.args,
                             paths=["eager", "jit:xla_allow_excess_precision=false"]).passed


def test_the_tpus_tanh_is_named_against_the_hosts():
    result = explained(f"{CASES}:make_tanh", ["eager", "jit:device=cpu"])
    (e,) = result.explanations
    (c,) = [c for c in e.causes if c.cause == "device-arithmetic"]
    assert c.status == "confirmed" and "tanh is an approximation of its own" in c.evidence, c


def test_a_float32_convolution_is_named_as_bfloat16_passes_against_the_host():
    result = explained(f"{CASES}:make_conv")
    (e,) = [e for e in result.explanations if e.path == "jit:device=cpu"]
    (c,) = [c for c in e.causes if c.cause == "device-arithmetic"]
    assert c.status == "confirmed" and "conv_general_dilated" in c.evidence and "1 bfloat16 pass" in c.evidence, c


def test_like_against_like_the_hosts_jit_is_explained_against_the_tpus_jit():
    """Issue 55: eager on the TPU against jit on the host mixed eager's difference from jit with the devices'.
    jit:device=cpu is measured and explained against jit on the TPU: on the seed, the TPU's XLA keeps the bf16
    convolution in float32 where the host's rounds it, so what remains between them is the TPU's compiler keeping
    excess precision (its side), and eager's difference is jit's, on the TPU."""
    result = explained(str(ROOT / "examples" / "conv_bf16.py"), ["eager", "jit", "jit:device=cpu"])
    verdicts = {p: v for v in result.verdicts for p in v.paths}
    assert verdicts["jit"].baseline == "eager"
    host = verdicts["jit:device=cpu"]
    assert host.baseline == "jit", host
    (e,) = [e for e in result.explanations if e.path == "jit:device=cpu"]
    assert e.baseline == "jit" and any("like against like" in n for n in e.notes), e.notes


def test_a_division_carrier_is_tried_as_the_devices_arithmetic():
    """Every op with a device-specific implementation is a candidate for the device's arithmetic (a division here):
    run alone on each device on the captured inputs, against the correctly rounded result."""
    result = explained(f"{CASES}:make_div", ["jit", "jit:device=cpu"])
    (e,) = result.explanations
    (c,) = [c for c in e.causes if c.cause == "device-arithmetic"]
    # The TPU's division is up to 2 ULP from the correctly rounded result, the host's 0: rounding, not wrong code.
    assert c.status == "noise" and "alone on tpu and on the host" in c.experiment, c
    assert not any(c.cause == "wrong-code" and c.status == "confirmed" for c in e.causes), e.summary
    (v,) = [v for v in result.verdicts if "jit:device=cpu" in v.paths]
    assert v.kind == "noise" and v.baseline == "jit", v


def test_the_references_run_on_the_host():
    """declared and f64 interpret the program in float64 on the host, not on the chip (a float64 reference on the
    TPU ran for minutes while the report said the CPU): every trace of the program they make is under the CPU."""
    import numpy as np

    from jaxparity.paths import make_path

    for spec in ("declared", "f64"):
        seen: list = []

        def probe(x, seen=seen):  # a function of its own per path: nothing traced before
            seen.append(jax.config.jax_default_device)
            return jax.numpy.tanh(x) * 2

        make_path(spec).run(probe, (np.linspace(-1, 1, 8, dtype=np.float32),))
        assert seen and all(d is not None and d.platform == "cpu" for d in seen), (spec, seen)
