"""Causes outside XLA's flags, decided on the diverging op's own evidence (issue 11): subnormal
handling, implementation-defined casts, the order of equal keys, two math libraries, amplification by
a discontinuous op. Each planted in `cases/runtimes.py` and run through a real runtime."""

import re
from pathlib import Path

import pytest

import jaxparity
from planted_lines import planted_line as planted_line_in
from jaxparity.case import load_case

pytestmark = pytest.mark.slow

CASES = Path(__file__).parent / "cases" / "runtimes.py"


def planted(what: str) -> str:
    return planted_line_in(CASES, what)


def explain(factory: str, path: str):
    case = load_case(f"{CASES}:{factory}")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", path]).explain()
    (e,) = [x for x in result.explanations if x.path == path]
    return e


def verdict(e, cause_id):
    return next(c for c in e.causes if c.cause == cause_id)


def line(d) -> str:
    return re.sub(r".*/", "", d.op.user_source or "")


def test_log_of_subnormals_on_tflite_is_subnormal_flushing_and_both_sides_are_far():
    e = explain("make_log_subnormal", "tflite")
    first = e.localization.first
    assert line(first) == planted("log subnormal")
    assert ("path", "inputs") in first.elements.flushes  # log with DAZ reproduces tflite
    assert verdict(e, "denormal-flush").status == "confirmed"
    assert first.elements.wrong_side() == "both"  # eager's log of a subnormal is wrong too (XLA on CPU)
    assert verdict(e, "other-lowering").status == "not run"  # the catch-all is the last resort only


def test_log_of_subnormals_on_onnx_runtime_is_right_and_the_baseline_is_wrong():
    """The issue's own example: XLA's log (eager) is ~10^6 ULP off on subnormal inputs; ONNX Runtime
    is correctly rounded. The report must say the baseline is the wrong side."""
    e = explain("make_log_subnormal", "onnx")
    first = e.localization.first
    assert line(first) == planted("log subnormal")
    ev = first.elements
    assert ev.path_ulp <= 1 and ev.baseline_ulp > 2**10 and ev.wrong_side() == "baseline"
    assert any(c.name == "subnormal inputs" for c in ev.classes)
    assert not ev.flushes  # XLA's log of a subnormal is its own approximation, not log(0)
    sub = verdict(e, "denormal-flush")
    assert sub.status == "confirmed" and "eager does not handle subnormals" in sub.evidence
    assert verdict(e, "wrong-code").status != "confirmed"  # a known limitation, not a miscompile
    assert verdict(e, "other-lowering").status == "not run"


@pytest.mark.parametrize("path", ["tflite", "onnx", "iree"])
def test_nan_to_int_is_implementation_defined_not_wrong_code(path):
    e = explain("make_nan_to_int", path)
    first = e.localization.first
    assert line(first) == planted("float to int")
    assert first.elements.implementation_defined >= 1
    assert verdict(e, "implementation-defined-conversion").status == "confirmed"
    assert verdict(e, "wrong-code").status != "confirmed"
    assert "wrong code" not in e.summary


@pytest.mark.parametrize("path", ["tflite", "iree"])
def test_a_one_ulp_tan_difference_that_floor_amplifies(path):
    e = explain("make_floor_tan", path)
    first = e.localization.first
    assert line(first) == planted("tan")
    assert verdict(e, "math-library").status == "confirmed"
    amp = verdict(e, "amplification")
    assert amp.status == "confirmed" and planted("floor") in amp.evidence


def test_ties_and_signed_zeros_ordered_differently_by_iree():
    e = explain("make_sort_ties", "iree")
    first = e.localization.first
    assert first.op.primitive == "sort" and line(first) == planted("argsort ties")
    ties = verdict(e, "tie-ordering")
    # jnp.argsort asks for a stable sort: the order of equal keys is declared, and iree breaks it.
    assert ties.status == "confirmed" and "iree does not keep it" in ties.evidence
    assert any("a stable order is declared" in c.name for c in first.elements.classes)
    assert verdict(e, "wrong-code").status != "confirmed"


# Real-world reports (cases/runtimes.py cites each issue).


def test_atan2_miscompile_under_jit_is_wrong_code_and_eager_is_right():
    """openxla/xla#44705: NaN where IEEE gives +0, under jit only."""
    e = explain("make_atan2_miscompile", "jit")
    first = e.localization.first
    assert first.op.primitive == "atan2" and line(first) == planted("atan2 miscompile")
    assert first.elements.wrong_side() == "path"
    wrong = verdict(e, "wrong-code")
    assert wrong.status == "confirmed" and "jit is wrong here" in wrong.evidence


def test_max_dropping_nan_in_a_savedmodel_is_fast_min_max_and_the_serving_flag_fixes_it():
    """tensorflow#120298: TensorFlow's XLA turns fast min/max on; the serving flag restores parity."""
    e = explain("make_max_nan", "savedmodel")
    assert line(e.localization.first) == planted("max nan")
    fast = verdict(e, "fast-min-max")
    assert fast.status == "confirmed"
    assert any(f.verified and "xla_cpu_enable_fast_min_max=false" in (f.spec or "") for f in e.fixes)
    assert verdict(e, "wrong-code").status != "confirmed"  # a documented option, not a miscompile


def test_round_half_on_onnx_is_the_converters_mapping_not_the_runtime():
    """jax#4952 again, in jax2onnx: ONNX Round is half-to-even; onnx-ref agrees with onnxruntime."""
    e = explain("make_round_half", "onnx")
    first = e.localization.first
    assert first.op.primitive == "round" and line(first) == planted("round half")
    assert any(c.name.startswith("halfway inputs") for c in first.elements.classes)
    wrong = verdict(e, "wrong-code")
    assert wrong.status == "confirmed" and "converter (jax2onnx)" in wrong.evidence


def test_argsort_with_a_subnormal_key_eager_reads_it_as_zero():
    """jax#24280: eager (XLA on CPU) ties 1.4e-45 with 0; ONNX Runtime sorts it as IEEE does."""
    e = explain("make_argsort_subnormal", "onnx")
    first = e.localization.first
    assert first.op.primitive == "sort" and line(first) == planted("argsort subnormal")
    assert ("baseline", "inputs") in first.elements.flushes
    assert verdict(e, "denormal-flush").status == "confirmed"
    assert verdict(e, "tie-ordering").status != "confirmed"
    assert verdict(e, "wrong-code").status != "confirmed"


def test_a_negated_zero_dropped_by_tflite_is_a_signed_zero_and_carries_the_atan2_flip():
    """TFLite's NEG gives +0 for -(+0): 0 ULP from eager's -0, yet atan2 downstream gives π against -π.
    The neg is the local divergence (a zero of the other sign, shown as an element class), it carries the
    whole output difference, and the cause is the dropped sign, with TFLite the side that drops it."""
    e = explain("make_negated_zero_atan2", "tflite")
    loc = e.localization
    (d,) = loc.local  # atan2 is right on TFLite's own (+0) input: only the neg departs
    assert d.op.primitive == "neg" and line(d) == planted("negated zero") and d.max_ulp == 0 and d.n_differ == 2
    assert any(c.name.startswith("zeros of the other sign") and c.count == 2 for c in d.elements.classes)
    assert loc.blame.lead.alone >= 0.99
    v = verdict(e, "signed-zero")
    assert v.status == "confirmed" and "tflite gives +0 where the op declares -0" in v.evidence, v
    from jaxparity.report.format import explaining_cause

    assert explaining_cause(e.causes, loc.lead).cause == "signed-zero"  # what the report leads with


def test_the_same_atan2_flip_through_jax2onnx_is_the_converters_decomposition_reading_minus_zero_as_plus():
    """Through jax2onnx the neg keeps -0 and atan2 (decomposed: ONNX has no Atan2) gives π for (-0, -1):
    the -0 inputs are the element class, onnx-ref agrees (the converter, not the runtime); and though onnx
    gives TFLite's values bit for bit, it is explained on its own, not as TFLite's dropped sign."""
    case = load_case(f"{CASES}:make_negated_zero_atan2")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "tflite", "onnx"]).explain()
    e = next(x for x in result.explanations if x.path == "onnx")
    (d,) = e.localization.local
    assert d.op.primitive == "atan2" and any(c.name.startswith("-0 inputs") for c in d.elements.classes)
    wrong = verdict(e, "wrong-code")
    assert wrong.status == "confirmed" and "converter (jax2onnx)" in wrong.evidence
    assert e.same_values == "tflite"
    from jaxparity.report.explanation import group_explanations

    assert [len(others) for _, others in group_explanations(result.explanations)] == [0, 0]  # shown apart
