"""A kernel's accuracy profile (``explain.mechanism.profile``): the op alone over its captured inputs and a sweep
of its domain, against the correctly rounded result, said as what kind of kernel it is and where."""

from __future__ import annotations

import numpy as np

import jaxparity
from jaxparity.case import load_case
from jaxparity.explain.mechanism.profile import ACCURATE, profile, sweep
from jaxparity.rounding import round_to_dtype
from conftest import CASES


def _logistic(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return round_to_dtype(1 / (1 + np.exp(-x.astype(np.float64))), np.float32)


def test_the_sweep_holds_every_decade_both_signs_the_edges_and_the_special_values():
    captured = np.array([0.123456, -7.5], np.float32)
    x = sweep(np.float32, captured)
    assert x.dtype == np.float32 and np.isnan(x[-1]) and np.signbit(x[-2]) and x[-2] == 0
    finite = x[np.isfinite(x)]
    assert set(captured) <= set(finite)
    info = np.finfo(np.float32)
    assert info.max in finite and -info.max in finite and info.smallest_subnormal in finite
    assert np.isposinf(x).any() and np.isneginf(x).any()
    decades = {int(np.floor(np.log10(abs(v)))) for v in finite if v > 0}
    assert set(range(-45, 39)) <= decades


def test_a_kernel_accurate_in_absolute_terms_only_is_told_with_its_interval_and_an_example():
    x = sweep(np.float32)
    with np.errstate(over="ignore"):
        # 1 − 1/(1 + eˣ) in float32: the subtraction of two numbers near 1 keeps the absolute error of one
        # rounding, so as the result shrinks (x below about -2) its relative error grows to 100%
        got = (np.float32(1) - np.float32(1) / (np.float32(1) + np.exp(x))).astype(np.float32)
    p = profile(got, _logistic(x), x)
    assert p.abs_only and p.max_rel >= 0.99 and p.max_ulp > 10**6
    (a, b, low, high, mirrored), *_ = p.intervals
    assert a < -10 and -3 < b < -0.1 and not high and not mirrored, p.intervals
    words = p.words("onnx", "logistic")
    assert "accurate to" in words and "absolute, not relative" in words and "e.g. x = " in words
    assert f"within {p.within} ULP elsewhere" in words and p.within <= ACCURATE


def test_an_accurate_kernel_flushed_subnormals_and_nans_are_each_said():
    x = sweep(np.float32)
    want = _logistic(x)
    assert profile(want, want, x).accurate
    info = np.finfo(np.float32)
    with np.errstate(divide="ignore"):
        logs = round_to_dtype(np.log(np.abs(x.astype(np.float64))), np.float32)
    flushed = np.where(np.abs(x) < info.smallest_normal, np.float32(-np.inf), logs).astype(np.float32)
    p = profile(flushed, logs, x, at_zero=(np.float32(-np.inf), np.float32(-np.inf)))
    assert p.flush_in and "subnormal inputs are computed as zero" in p.words("tflite", "log")
    nan_at_inf = np.where(np.isinf(x), np.float32(np.nan), want).astype(np.float32)
    p = profile(nan_at_inf, want, x)
    assert p.nans is not None and p.nans.startswith("NaN where the result is a number (2 points")


def test_onnx_runtimes_sigmoid_is_named_by_its_profile_and_tflites_is_noise():
    """The real kernels: ORT's Sigmoid alone over the sweep is beyond a math library for negative inputs and
    accurate in absolute terms (the mechanism and the trigger say so, the same interval); TFLite's is within a few
    ULP on the op's own inputs, so its profile is no departure and its verdict stays rounding noise."""
    case = load_case(f"{CASES / 'kernels.py'}:make_sigmoid")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "onnx", "tflite"]).explain()
    by = {e.path: {c.cause: c for c in e.causes} for e in result.explanations}
    onnx = by["onnx"]["kernel-accuracy"]
    assert onnx.status == "confirmed", onnx
    assert onnx.title.startswith("a kernel accurate in absolute terms only"), onnx.title
    assert "alone it gives onnx's own values of the op on 100% of its captured inputs" in onnx.evidence
    assert "eager's is within" in onnx.evidence or "eager's, on the same points" in onnx.evidence
    (v,) = [v for v in result.verdicts if "onnx" in v.paths]
    assert v.kind == "divergence" and v.layer == "kernel" and v.title == "a kernel accurate in absolute terms only"
    interval = onnx.trigger.split(" where ", 1)[1].split(" (", 1)[0]
    assert v.trigger == onnx.trigger and interval in v.mechanism, (v.trigger, v.mechanism)
    assert by["tflite"]["kernel-accuracy"].status in ("refuted", "not run")
    (t,) = [v for v in result.verdicts if "tflite" in v.paths]
    assert t.kind == "noise", t


def test_a_kernel_that_gives_nan_for_a_number_has_those_inputs_in_its_interval():
    """The TFLite converter's cube root gives NaN for every negative input: the profile says so, and the interval
    where the kernel is wrong (the trigger) holds the negative inputs, though no ULP count measures them."""
    case = load_case(f"{CASES / 'kernels.py'}:make_cbrt")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "tflite"]).explain()
    (e,) = result.explanations
    (c,) = [c for c in e.causes if c.cause == "kernel-accuracy"]
    assert c.status in ("confirmed", "partly"), c
    assert "NaN where the result is a number" in c.evidence, c.evidence
    assert c.trigger is not None and ("x ≤ " in c.trigger or "every x" in c.trigger), c.trigger
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    assert v.cause == "kernel-accuracy" and v.trigger == c.trigger


def test_a_function_the_converter_composes_of_other_kernels_puts_the_fault_on_the_converter():
    """TFLite has no lgamma kernel: what the profile measures is the converter's composition of others, so the
    layer at fault is the converter's, and the report says what it wrote."""
    case = load_case(f"{CASES / 'kernels.py'}:make_lgamma")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "tflite"]).explain()
    (e,) = result.explanations
    (c,) = [c for c in e.causes if c.cause == "kernel-accuracy"]
    assert c.status in ("confirmed", "partly"), c
    assert "tflite has no kernel of its own for lgamma" in c.evidence and c.layer == "converter", c
    (v,) = [v for v in result.verdicts if "tflite" in v.paths]
    assert v.layer == "converter", v
