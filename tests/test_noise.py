"""Rounding noise judged against what correct implementations of the program's ops may differ by
(explain/noise.py, issue 37 item 7): two realistic float32 programs through every converted runtime pass the
default gate, with the share of the bound said; a skipped bf16 rounding, a runtime's other semantics and a
bit-for-bit tolerance still fail it."""

import numpy as np
import pytest

import jaxparity
from jaxparity.case import load_case
from jaxparity.metrics import Tolerance


def explained(cases, name, paths, tolerance=None):
    case = load_case(f"{cases / 'noise.py'}:{name}")
    return jaxparity.compare(case.fn, *case.args, paths=paths, tolerance=tolerance).explain()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["make_small_cnn", "make_encoder_block"])
def test_runtimes_that_differ_by_rounding_only_pass(cases, name):
    from jaxparity.report.format import summary_line

    result = explained(cases, name, ["eager", "jit", "tflite", "onnx", "onnx-ref", "iree"])
    differing = [p.spec for p in result.paths if p.gated and p.verdict == "differs"]
    assert len(differing) >= 3, [(p.spec, p.verdict) for p in result.paths]  # else this tests nothing
    for e in result.explanations:
        assert e.rounding is not None, (e.path, [(c.cause, c.status) for c in e.causes])
        assert 0 < e.rounding.share <= 1 and e.rounding.gap <= e.rounding.bound
    assert result.passed and result.exit_code == 0
    line = summary_line(result)
    assert line.startswith("✓ all ") and "within rounding noise" in line and all(p in line for p in differing), line
    from jaxparity.report.brief import brief

    e = result.explanations[0]
    triage = dict(brief(e, result.path(e.path)))["triage"]
    assert triage.startswith("rounding noise: out differs from eager by up to"), triage


@pytest.mark.slow
def test_a_tolerance_given_is_the_gate(cases):
    """--ulp 0 asks for bit for bit: the noise judgement is still reported, and no longer passes."""
    result = explained(cases, "make_one_pass_softmax_sum", ["eager", "onnx"], Tolerance(ulp=0))
    (e,) = result.explanations
    assert e.rounding is not None
    assert not result.passed


def test_a_skipped_narrow_rounding_is_no_noise(cases):
    """jit keeps float32 between bf16 ops: the difference is no larger than a bf16 rounding, but the
    program declares that rounding, so it is a departure, not noise."""
    result = explained(cases, "make_bf16_chain", ["eager", "jit"])
    (e,) = result.explanations
    assert e.rounding is None
    assert result.exit_code == 1


def test_other_semantics_are_no_noise():
    """lax.rem against a floored remainder (TFLite's FLOOR_MOD): whole units apart where signs differ."""
    from jax import lax

    x = np.array([-7.5, 7.5, -3.25, 2.0], np.float32)
    y = np.array([2.0, -2.0, 1.5, 3.0], np.float32)
    result = jaxparity.compare(lax.rem, x, y, paths=["eager", "tflite"]).explain()
    (e,) = result.explanations
    assert e.rounding is None and result.exit_code == 1


def test_the_spread_of_one_op_is_its_roundoff():
    """One float32 multiply: a correct implementation is within a unit roundoff of the exact product; the
    spread (σ over the draws) is of that size at every element, and 0 for an output that is not a float."""
    import jax
    import jax.numpy as jnp

    from jaxparity.explain.noise import spread
    from jaxparity.localize.program import flatten

    def f(x, y):
        return x * y, (x > y).astype(jnp.int32)

    x = np.linspace(1, 2, 64, dtype=np.float32)
    y = np.full(64, 3.0, np.float32)
    far = spread(flatten(f, (x, y)), jax.tree_util.tree_leaves((x, y)))
    u = np.finfo(np.float32).eps / 2
    rel = far[0] / np.abs(x.astype(np.float64) * 3)
    assert np.all(rel > u / 10) and np.all(rel < u), rel
    assert far[1] is None


def test_discrete_and_nan_differences_are_never_noise():
    from jaxparity.explain.noise import _within

    base = [np.array([1.0, 2.0], np.float32)]
    far = [np.array([1e-3, 1e-3])]
    assert _within([np.array([1.0, np.nan], np.float32)], base, far) is None
    assert _within([np.array([1.0, np.inf], np.float32)], base, far) is None
    assert _within([np.array([1, 3], np.int32)], [np.array([1, 2], np.int32)], [None]) is None
    within = _within([np.array([1.0, 2.0005], np.float32)], base, far)
    assert within is not None and within.share < 1
    # an inf is no rounding of the largest float, even where the ops' spread is unbounded (erfinv at 1)
    big = np.finfo(np.float32).max
    assert _within([np.array([1.0, big], np.float32)], [np.array([1.0, np.inf], np.float32)],
                   [np.array([1e-3, np.inf])]) is None


def test_a_fix_is_never_noise_against_an_inf_baseline_error():
    """The element-wise judge of a fix: a baseline error of inf is no floor, and inf against the largest float is
    not 1 ULP of rounding."""
    import types

    from jaxparity.explain.search.rerun import as_accurate

    big = np.finfo(np.float32).max
    ctx = types.SimpleNamespace(run=lambda spec: [np.array([1.0, 2.0], np.float32)])
    narrowed = types.SimpleNamespace(outcome="narrows")
    assert not as_accurate(ctx, narrowed, [np.array([1.0, big], np.float32)], [np.array([1.0, np.inf], np.float32)])
    assert not as_accurate(ctx, narrowed, [np.array([1.0, 7.0], np.float32)], [np.array([1.0, np.inf], np.float32)])


def test_the_same_values_get_the_same_verdict_whichever_paths_run_beside_them(cases):
    """A 0-d loss 2 ULP apart on tflite and onnx (the same value on both): eager's flush of exp's subnormal results
    is a fact about an op that carries none of the difference (those terms are lost in a sum of about 1 either
    way), so it makes no divergence of onnx's; each path alone and the two together are rounding noise."""
    for paths in (["eager", "onnx"], ["eager", "tflite"], ["eager", "tflite", "onnx"]):
        result = explained(cases, "make_scalar_loss", paths)
        kinds = {v.paths: v.kind for v in result.verdicts}
        assert set(kinds.values()) == {"noise"}, (paths, kinds, [v.mechanism for v in result.verdicts])
