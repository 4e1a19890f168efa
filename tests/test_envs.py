"""Other package versions. One test builds the second environment (jax 0.4.38 + TF 2.18, about 2 GB,
1-2 minutes on a new machine; cached in ~/.cache/jaxparity/envs afterwards) and reproduces the bug
report's own numbers with it; another checks that a SavedModel from this stack is reported as a
compatibility failure by that TensorFlow, never as a crash."""

import jax
import numpy as np
import pytest

from jaxparity.comparison import compare_case
from jaxparity.execution.envs import EnvError, EnvSpec, parse_env
from jaxparity.paths import make_path, spec_env

OLD = parse_env("old=jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0")


def test_parse_env_and_specs():
    assert OLD == EnvSpec("old", ("jax==0.4.38", "jaxlib==0.4.38", "flax==0.10.2", "tensorflow-cpu==2.18.0"))
    assert OLD.key == parse_env('old="jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0"').key
    assert parse_env("old=jax==0.4.37").key != OLD.key  # a changed spec is a new environment
    with pytest.raises(EnvError, match="write NAME="):
        parse_env("no requirements")
    p = make_path("savedmodel@old:native_serialization=false")
    assert (p.name, p.env, p.spec) == ("savedmodel", "old", "savedmodel@old:native_serialization=false")
    assert spec_env("eager@old") == "old" and spec_env("eager") is None


def test_an_undeclared_environment_is_a_usage_error(examples):
    with pytest.raises(EnvError, match="no environment 'new'"):
        compare_case(str(examples / "conv_bf16.py"), paths=["eager", "eager@new"])


@pytest.mark.slow
def test_old_stack_reproduces_the_reports_numbers(examples):
    # The report's five computations: flax eager, jax2tf native and non-native, and two by hand
    # (declared per-op rounding, which `declared` computes). Native jax2tf gave f32-everywhere
    # numbers on the report's machine; on this CPU (AVX512_BF16) XLA rounds the inputs, so native
    # is checked by relation: it equals jit@old, not eager.
    result = compare_case(str(examples / "conv_bf16.py"), envs=[OLD], inputs_from="old",
                          paths=["eager@old", "savedmodel@old:native_serialization=false", "savedmodel@old",
                                 "jit@old", "declared@old", "eager", "jit"])
    # These four hold the report's numbers on every CPU: each output is one bf16 product (exact in f32,
    # rounded once to bf16, by XLA, TF's kernel or numpy alike) plus one f32 addition.
    report = np.float32([-1.3705847, -2.27708])
    for spec in ("eager@old", "savedmodel@old:native_serialization=false", "declared@old", "eager"):
        p = result.path(spec)
        assert p.status == "ok", p.message
        np.testing.assert_array_equal(np.float32(p.leaves[0].values), report)
    assert "drawn in environment old" in result.input_source
    old_saved = result.path("savedmodel@old:native_serialization=false")
    assert any("TF ops" in n for n in old_saved.notes)  # jax 0.4.38 honours non-native serialization
    assert any("ran in environment old: jax 0.4.38" in n for n in old_saved.notes)
    assert result.path("jit").verdict == "differs"
    assert result.path("savedmodel@old").leaves[0].values == result.path("jit@old").leaves[0].values
    assert result.path("savedmodel@old").verdict == "differs"


@pytest.mark.slow
def test_a_savedmodel_from_this_stack_is_a_compatibility_failure_in_old_tensorflow(examples):
    result = compare_case(str(examples / "conv_bf16.py"), envs=[OLD], paths=["eager", "savedmodel:serve_env=old"])
    p = result.path("savedmodel:serve_env=old")
    assert p.status == "error"
    assert p.message.startswith("compatibility: the SavedModel exported by jax 0.9.2 / TensorFlow 2.21.0 cannot be "
                                "loaded by TensorFlow 2.18.0 (environment old): Cannot deserialize computation")
    assert "at fault: attribute use_shardy_partitioner of XlaCallModule" in p.message


@pytest.mark.slow
def test_a_jax_export_artifact_from_this_jax_is_a_compatibility_failure_in_old_jax(examples):
    result = compare_case(str(examples / "conv_bf16.py"), envs=[OLD], paths=["eager", "export:load_env=old"])
    p = result.path("export:load_env=old")
    assert p.status == "error"
    assert p.message.startswith("compatibility: the jax.export artifact serialized by jax 0.9.2 (calling "
                                "convention v10, platforms cpu) cannot be called by jax 0.4.38 (environment old): ")
    assert "Error" in p.message.rsplit("(environment old): ", 1)[1]  # the old JAX's own words


@pytest.mark.slow
def test_export_env_and_serve_env_flags_on_the_command_line():
    from conftest import run_cli

    r = run_cli("compare", "examples/conv_bf16.py", "--paths", "eager", "--env",
                "old=jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0",
                "--export-env", "old", "--serve-env", "old")
    # exported by old jax2tf, served by old TF: it loads and runs (and, natively serialized, keeps
    # XLA's excess precision, so it differs from eager: exit 1, not an error)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "savedmodel@old:serve_env=old │ DIFFERS" in r.stdout
    assert "ran in environment old" in run_cli(*r.args[3:], "--verbose").stdout
    r = run_cli("compare", "examples/conv_bf16.py", "--export-env", "old")
    assert r.returncode == 2 and "--export-env and --serve-env go together" in r.stderr


@pytest.mark.slow
def test_the_reports_question_is_explained_in_its_own_environment(examples):
    """The seed's own question on its own stack (jax 0.4.38, TensorFlow 2.18): why does the SavedModel differ
    from flax eager? Explained by that environment's worker (its JAX captures every op): the op, the cause and
    a verified fix. A path of another environment than the baseline's is explained from both environments'
    per-op values, aligned op by op."""
    result = compare_case(str(examples / "conv_bf16.py"), envs=[OLD], inputs_from="old", baseline="eager@old",
                          paths=["eager@old", "savedmodel@old", "savedmodel@old:native_serialization=false", "jit"],
                          explain=True)
    found = {e.path: e for e in result.explanations}
    assert set(found) == {"savedmodel@old", "jit"}  # native_serialization=false gives eager@old's values
    e = found["savedmodel@old"]
    assert e.baseline == "eager@old"
    lead = e.localization.lead
    assert (lead.op.index, lead.op.primitive, lead.op.user_source) == (3, "convert_element_type",
                                                                         "examples/conv_bf16.py:30")
    cause = next(c for c in e.causes if c.status == "confirmed")
    assert cause.cause == "excess-precision"
    serving = next(c.proof for c in e.causes if c.proof and c.proof.kind == "serving flag")
    assert not serving.verified  # on TensorFlow 2.18 its own re-run changes nothing: said, not offered as the fix
    model = [f for f in e.fixes if f.kind == "model change" and f.verified]
    assert model and "round_like_declared" in model[0].description, e.fixes
    assert any(n.startswith("explained in environment old (jax 0.4.38") for n in e.notes), e.notes
    # jit runs here, the baseline in old: both sides' per-op values, each from its own JAX's trace, aligned by
    # provenance; the op where they part is the one the same-environment explanation names
    other = found["jit"]
    (cause,) = other.causes
    assert cause.cause == "other-lowering" and cause.status == "confirmed", cause
    assert cause.evidence.startswith("#3 convert_element_type (examples/conv_bf16.py:30) is where the two "
                                     "environments part: its inputs agree bit for bit"), cause.evidence
    assert f"this environment (jax {jax.__version__}) than in environment old (jax 0.4.38)" in cause.evidence
    assert "--baseline eager" in cause.fix
    assert any(n.startswith("ops aligned by primitive, source line and types") for n in other.notes)


def test_ops_of_two_traces_are_aligned_by_provenance_and_the_first_local_departure_is_found(examples):
    """The alignment behind cross-environment explanations, on two traces of one environment: eager and jit of
    the report's case part at #3 (its inputs agree, its output does not); a trace with an extra op in front
    still aligns every other op, and the extra one is never compared."""
    import jax.numpy as jnp

    from jaxparity.case import load_case
    from jaxparity.localize.align import align, capture_ops, first_departure

    case = load_case(str(examples / "conv_bf16.py"))
    eager, jit = (capture_ops(case.fn, case.args, spec) for spec in ("eager", "jit"))
    d = first_departure(jit, eager)
    assert (d.op.index, d.op.primitive, d.local, d.n_differ) == (3, "convert_element_type", True, 2)
    assert d.aligned == len(eager) == len(jit)
    assert first_departure(eager, eager) is None

    def shifted(variables, x):
        return case.fn(variables, jnp.negative(jnp.negative(x)))

    other = capture_ops(shifted, case.args, "eager")
    pairs = align(other, eager)
    assert len(other) == len(eager) + 2 and len(pairs) == len(eager)
    assert all(other[i].info.primitive == eager[j].info.primitive for i, j in pairs.items())
