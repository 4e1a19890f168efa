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
    (c,) = [c for c in e.causes if c.cause == "device-arithmetic"]
    assert c.status == "confirmed" and "1 bfloat16 pass" in c.evidence, c
    assert c.proof is not None and c.proof.spec == "eager:jax_default_matmul_precision=highest"
    assert c.proof.rerun.after[2] < 0.01 * c.proof.rerun.before[2], c.proof
    # What the highest precision leaves is explained with it applied on the TPU's side: the TPU's tanh.
    rest = e.remainder
    assert rest is not None and rest.baseline == "eager:jax_default_matmul_precision=highest", e.summary
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
