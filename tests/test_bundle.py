"""Capture on the device, explain on the host (issue 38): ``jaxparity capture`` writes the inputs, outputs and
every op's values of one path; ``explain --paths observed:FILE --inputs FILE`` localizes it op by op and decides
the device's arithmetic on the op's captured values. The two bundles in tests/data/tpu were captured on a
TPU v5e (JAX 0.10.2) by ``bash benchmarks/tpu/run.sh capture``: CI has no TPU, these are its values."""

import json
from pathlib import Path

import jax.numpy as jnp
import pytest

from conftest import ROOT, run_cli

TPU = Path(__file__).parent / "data" / "tpu"
CASES = ROOT / "benchmarks" / "tpu" / "cases.py"


def explain_json(tmp_path, case, bundle, *extra):
    out = tmp_path / "e.json"
    r = run_cli("explain", case, "--paths", f"eager,observed:{bundle}", "--inputs", str(bundle), "--json", str(out),
                *extra)
    return r, json.loads(out.read_text())


@pytest.mark.slow
def test_a_bundle_captured_here_is_localized_op_by_op(tmp_path):
    bundle = tmp_path / "jit.npz"
    r = run_cli("capture", "examples/conv_bf16.py", "--path", "jit", "-o", str(bundle))
    assert r.returncode == 0, r.stderr
    assert "along jit on cpu" in r.stdout and f"observed:{bundle}" in r.stdout
    r, doc = explain_json(tmp_path, "examples/conv_bf16.py", bundle)
    assert r.returncode == 1, r.stderr
    (e,) = doc["explanations"]
    lead = e["localization"]["local"][0]["op"]
    assert lead["primitive"] == "convert_element_type", lead
    assert any(c["cause"] in ("excess-precision", "narrow-rounding-skipped") and c["status"] == "confirmed"
               for c in e["causes"]), [(c["cause"], c["status"]) for c in e["causes"]]


@pytest.mark.slow
@pytest.mark.parametrize("name, primitive", [("attention", "dot_general"), ("tanh", "tanh")])
def test_tpu_outputs_are_explained_on_the_host_by_the_devices_arithmetic(tmp_path, name, primitive):
    r, doc = explain_json(tmp_path, f"{CASES}:make_{name}", TPU / f"{name}-tpu.npz")
    assert r.returncode == 1, r.stderr
    assert "tpu: observed:" in r.stdout  # the devices line names where the bundle ran
    (e,) = doc["explanations"]
    (c,) = [c for c in e["causes"] if c["cause"] == "device-arithmetic"]
    assert c["status"] == "confirmed", c
    flat = " ".join(r.stdout.split())
    if primitive == "dot_general":
        assert "on tpu as 1 bfloat16 pass of its float32 inputs (matmul precision DEFAULT)" in flat, flat
    else:
        assert "tpu's tanh is an approximation of its own, the host's is accurate" in flat, flat


def test_a_bundle_of_another_program_is_refused_with_a_reason(tmp_path):
    """Values captured from one model are never read as another's ops: the explanation says so and falls back
    to the outputs alone."""
    case = tmp_path / "two.py"
    case.write_text("import jax.numpy as jnp\nimport numpy as np\n\n"
                    "def make_tanh():\n    return (lambda x: jnp.tanh(x) * 2), (np.linspace(-1, 1, 8, dtype=np.float32),)\n\n"
                    "def make_sin():\n    return (lambda x: jnp.sin(x)), (np.linspace(-1, 1, 8, dtype=np.float32),)\n")
    bundle = tmp_path / "tanh.npz"
    assert run_cli("capture", f"{case}:make_tanh", "-o", str(bundle)).returncode == 0
    r, doc = explain_json(tmp_path, f"{case}:make_sin", bundle)
    assert r.returncode == 1, r.stderr
    (e,) = doc["explanations"]
    assert any("was captured from another program" in n for n in e["notes"]), e["notes"]
    assert e["localization"] is None


def test_a_bundle_of_other_inputs_says_to_take_them(tmp_path):
    """Inputs drawn with jax.random differ by device: the bundle's outputs are of its own inputs, and explaining
    it against other ones is refused with the flag that takes them."""
    import numpy as np

    from jaxparity.arrayio import save_arrays

    case = tmp_path / "one.py"
    case.write_text("import jax.numpy as jnp\nimport numpy as np\n\n"
                    "def make():\n    return (lambda x: jnp.tanh(x) * 2), (np.linspace(-1, 1, 8, dtype=np.float32),)\n")
    other = tmp_path / "other.npz"
    save_arrays(other, {"arg0": np.linspace(-2, 2, 8, dtype=np.float32)})
    bundle = tmp_path / "b.npz"
    assert run_cli("capture", str(case), "--inputs", str(other), "-o", str(bundle)).returncode == 0
    r = run_cli("compare", str(case), "--paths", f"eager,observed:{bundle}")
    assert r.returncode == 1
    assert "holds other inputs than this case's (arg0 differs" in " ".join(r.stdout.split()), r.stdout
    assert run_cli("compare", str(case), "--paths", f"eager,observed:{bundle}", "--inputs", str(bundle)).returncode == 0


OLD = Path(__file__).parent / "data" / "jax0438"


def test_a_bundle_from_another_jax_is_aligned_op_by_op_and_says_so(tmp_path):
    """Issue 55: a bundle captured under another JAX passed the same-program check and then crashed on values of
    other shapes. tests/data/jax0438/moments.npz was captured under JAX 0.4.38 (`jaxparity capture` run by the
    environment tests/test_envs.py builds); here its ops are aligned with this JAX's trace by primitive, types and
    line, and the explanation says where it was captured."""
    bundle = OLD / "moments.npz"
    r, doc = explain_json(tmp_path, "tests/cases/versions.py:make_moments", bundle)
    assert r.returncode in (0, 1), r.stderr
    notes = [n for e in doc["explanations"] for n in e["notes"]]
    assert any("captured under jax 0.4.38, explained under jax" in n for n in notes), notes
    assert not any(v["stage_errors"] for v in doc["verdicts"]), doc["verdicts"]


def _body(x, extra):
    y = x * 2.0
    y = extra(y)
    return jnp.tanh(y).sum(axis=0)


def test_ops_another_trace_adds_are_left_without_values():
    """The alignment itself: a bundle of a program is read against the same code traced with two ops more (as
    another JAX may trace it): the ops that align by primitive, types and line keep their values, the others are
    said; a bundle of another program altogether is refused."""
    import dataclasses
    import tempfile

    import jax
    import numpy as np

    from jaxparity.bundle import aligned_values
    from jaxparity.case import Case
    from jaxparity.execution.capture import write_bundle
    from jaxparity.localize.program import flatten

    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    with tempfile.TemporaryDirectory() as d:
        bundle = write_bundle(Case(lambda x: _body(x, lambda y: y), (x,), "before"), "jit", f"{d}/b.npz")
    program = flatten(lambda x: _body(x, lambda y: y.astype(jnp.bfloat16).astype(jnp.float32)), (x,))
    assert [op.info.primitive for op in program.ops] == ["mul", "convert_element_type", "convert_element_type",
                                                         "tanh", "reduce_sum"]
    values, note = aligned_values(dataclasses.replace(bundle, versions={"jax": "0.0.1"}), program, jax.__version__)
    assert note is not None and "captured under jax 0.0.1" in note and "3 of this program's 5 ops align" in note, note
    kept = {op.info.primitive for op in program.ops if op.outputs[0] in values}
    assert kept == {"mul", "tanh", "reduce_sum"}, kept
    tanh = next(op for op in program.ops if op.info.primitive == "tanh")
    assert values[tanh.outputs[0]] is bundle.values[bundle.ops[1][3][0]]  # the bundle's own tanh values
    with pytest.raises(ValueError, match="another program"):
        aligned_values(bundle, flatten(lambda x: jnp.sort(jnp.cumsum(x, axis=1), axis=0), (x,)), jax.__version__)


def test_plain_outputs_of_a_tpu_are_named_by_emulating_its_matmul(tmp_path):
    """Issue 55: outputs a TPU computed, saved without `jaxparity capture` (no per-op values), got "cause unknown".
    The whole program is emulated on the host with each float32 product as 1, 3 and 6 bfloat16 passes: the
    attention's TPU outputs (tests/data/tpu, captured on a TPU v5e) are reproduced by 1 pass, far nearer them than
    the host's own run; the verdict says so, and that `capture` gives the per-op view."""
    import numpy as np

    from jaxparity.arrayio import load_arrays

    arrays = load_arrays(TPU / "attention-tpu.npz")
    np.savez(tmp_path / "in.npz", **{k: v for k, v in arrays.items() if k.startswith("arg")})
    np.savez(tmp_path / "out.npz", out=arrays["out"])
    out = tmp_path / "e.json"
    r = run_cli("explain", f"{CASES}:make_attention", "--paths", f"eager,observed:{tmp_path / 'out.npz'}",
                "--inputs", str(tmp_path / "in.npz"), "--json", str(out))
    assert r.returncode == 1, r.stderr
    doc = json.loads(out.read_text())
    (c,) = [c for e in doc["explanations"] for c in e["causes"] if c["cause"] == "device-arithmetic"]
    assert c["status"] == "confirmed" and "as 1 bfloat16 pass (matmul precision DEFAULT)" in c["evidence"], c
    (v,) = [v for v in doc["verdicts"] if v["kind"] == "divergence"]
    assert v["cause"] == "device-arithmetic" and any("`jaxparity capture`" in n for n in v["notes"]), v
