"""Where no path is near the f64 ideal (``explain.toward``): the op where the program loses its digits, and the
change toward the ideal re-run on every path; nothing said where a path is near it, or where no op amplifies."""

from __future__ import annotations

import json

import jax
import numpy as np

import jaxparity
from jaxparity.case import load_case
from jaxparity.explain.toward import LOST, far
from jaxparity.fixes import rewrites, well_conditioned
from jaxparity.report.terminal import render_text
from conftest import CASES

TOWARD = CASES / "toward.py"


def planted_line(tag: str) -> str:
    n = next(i for i, text in enumerate(TOWARD.read_text().splitlines(), 1) if f"planted: {tag}" in text)
    return f"{TOWARD.relative_to(CASES.parents[1])}:{n}"


def test_a_one_pass_variance_with_keepdims_is_rewritten_in_two_passes():
    """jnp.mean(..., keepdims=True) puts a broadcast_in_dim between the sum and the division: still a mean, and the
    rewrite computes the same math (near the f64 ideal where the one-pass form is not)."""
    fn, args = load_case(f"{TOWARD}:make_one_pass").fn, load_case(f"{TOWARD}:make_one_pass").args
    sites = rewrites(fn, args)  # and the centering on the mean at the return line
    assert [s.split(" at ")[0] for s in sites] == ["one-pass variance", "centering on the mean"], sites
    with jax.enable_x64():
        ideal = np.asarray(fn(*(np.asarray(a, np.float64) for a in args)))
    before = np.abs(np.asarray(fn(*args), np.float64) - ideal).max()
    after = np.abs(np.asarray(well_conditioned(fn)(*args), np.float64) - ideal).max()
    assert after * 100 < before, (before, after)


def test_where_no_path_is_near_the_ideal_the_digits_are_placed_and_the_change_toward_it_verified_on_every_path():
    case = load_case(f"{TOWARD}:make_one_pass")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "tflite", "f64"]).explain()
    lost = result.lost
    assert lost is not None and far(result) is not None
    assert [p for p, _ in lost.errors] == ["eager", "jit", "tflite"]
    assert all(e >= LOST * lost.scale for _, e in lost.errors)
    assert lost.where is not None and lost.where.line == planted_line("one-pass variance"), lost.where
    assert lost.where.primitive == "sub" and lost.how.startswith("one-pass variance")
    assert lost.verified and "two passes" in lost.change
    before = dict(lost.errors)
    assert {p for p, _ in lost.after} == set(before)
    for p, e in lost.after:  # each path re-run with it: ten times nearer at least, and near
        assert e * 10 <= before[p] and e < LOST * lost.scale, (p, e, before[p])
    text = " ".join(render_text(result, width=200).split())
    assert "! no path is near the f64 ideal" in text and f"the digits are lost at {lost.where.line}" in text
    assert "fix ✓ compute the variance in two passes" in text and "every path then within" in text
    doc = json.loads(result.to_json())
    assert doc["lost"]["verified"] is True and doc["lost"]["where"]["line"] == lost.where.line
    # the paths agree with eager as correct implementations may: that is no divergence of theirs
    assert not any(v.kind == "divergence" for v in result.verdicts), [v.kind for v in result.verdicts]


def test_nothing_is_said_where_a_path_is_near_the_ideal_or_no_op_amplifies_the_error():
    case = load_case(f"{TOWARD}:make_two_pass")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "f64"]).explain()
    assert far(result) is None and result.lost is None
    # bfloat16's running sum is far on every path, by its declared precision: no op amplifies, nothing to change
    case = load_case(f"{TOWARD}:make_running_bf16")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "f64"]).explain()
    assert far(result) is not None and result.lost is None
    assert "no path is near the f64 ideal" not in render_text(result, width=200)


def test_the_command_says_it_first_and_writes_it_in_the_json(tmp_path):
    """The command runs it in its worker after the verdicts, whether or not a path differs: one line after them,
    the same in the JSON."""
    from conftest import run_cli, valid_result

    out = tmp_path / "r.json"
    proc = run_cli("explain", f"{TOWARD}:make_one_pass", "--paths", "eager,jit", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    head = next(i for i, line in enumerate(lines) if line.startswith("jaxparity "))
    assert lines[head + 1].startswith("✓ jit is identical to eager"), lines[head:head + 3]  # here: one program
    assert lines[head + 2].startswith("! no path is near the f64 ideal"), lines[head:head + 3]
    doc = valid_result(json.loads(out.read_text()))
    assert doc["lost"]["verified"] and [p for p, _ in doc["lost"]["after"]] == ["eager", "jit"]


def test_an_overflow_on_every_path_is_placed_and_the_max_shifted_form_verified():
    """NaN where the math is a number on every path: the first op that overflows from finite inputs is where the
    digits go, and the stable form of what is written from there on (the division a line below) is re-run on
    every path; on ONNX Runtime, where the two sides also differ, the fix search finds the same form and says it
    moves both sides toward the ideal, not to parity (neither was right)."""
    case = load_case(f"{TOWARD}:make_softmax_overflow")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "onnx"]).explain()
    lost = result.lost
    assert lost is not None and lost.where.line == planted_line("overflows") and lost.where.primitive == "exp"
    assert " overflows: inf where float64 gives" in lost.how
    assert lost.verified and lost.change.startswith("jax.nn.softmax(x)")
    assert all(np.isinf(e) for _, e in lost.errors) and all(e < 1e-6 for _, e in lost.after)
    text = " ".join(render_text(result, width=200).split())
    assert "out has NaN or inf where it is a number, on every path" in text and "where it overflows" in text
    (v,) = [v for v in result.verdicts if "onnx" in v.paths]
    if v.kind == "divergence":  # ORT's exp 1 ULP from eager's on some elements: then the search's fix says so
        (fix,) = v.holding
        assert fix.outcome == "toward f64" and fix.change.startswith("jax.nn.softmax(x)"), fix


def test_centering_on_a_mean_far_from_zero_is_rewritten_on_shifted_data():
    """x − mean(x) of rows offset by 1e7 (the mean's sum rounds by units in float32): computed on the data shifted
    by one of its own elements, it is the f64 ideal's to a few ULP; jnp.var's own first pass is rewritten too, and
    the row holding inf keeps the NaNs it had."""
    fn, args = load_case(f"{TOWARD}:make_offset_rows").fn, load_case(f"{TOWARD}:make_offset_rows").args
    sites = rewrites(fn, args)
    assert [s.split(" at ")[0] for s in sites] == ["centering on the mean"] * 2, sites
    with jax.enable_x64():
        ideal = np.asarray(fn(*(np.asarray(a, np.float64) for a in args)))
    before, after = np.asarray(fn(*args), np.float64), np.asarray(well_conditioned(fn)(*args), np.float64)
    finite = np.isfinite(ideal)
    assert np.array_equal(np.isnan(after), np.isnan(ideal)) and np.array_equal(np.isnan(before), np.isnan(ideal))
    assert np.abs(before - ideal)[finite].max() > 0.1 > 1e-5 > np.abs(after - ideal)[finite].max()
    np.testing.assert_allclose(np.asarray(jax.jit(well_conditioned(fn))(*args)), after, rtol=1e-6)  # under jit too


def test_rounding_amplified_by_centering_is_the_program_and_the_shifted_form_the_fix():
    """On tflite the row sums of 6e7 round otherwise (both within the sum's error bound): the verdict puts the
    difference in the program (x − mean(x) cancels), not in a kernel, and the fix is the shifted form, re-run."""
    case = load_case(f"{TOWARD}:make_offset_rows")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "tflite"]).explain()
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    assert v.cause == "ill-conditioned" and v.layer == "program", (v.cause, v.mechanism)
    assert "centering on the mean" in v.mechanism, v.mechanism
    assert v.holding and "center on a sample first" in v.holding[0].change, v.fixes
    again = jaxparity.compare(well_conditioned(case.fn), *case.args, paths=["eager", "tflite"])  # by hand
    assert again.verdicts and not any(x.kind == "divergence" for x in again.verdicts), [x.kind for x in again.verdicts]


def test_a_one_pass_variance_the_baseline_computes_as_zero_is_found_amplified():
    """Where eager's mean(x²) − mean(x)² is exactly 0 on a row and tflite's 131072, the relative difference at that
    op is all of the value, not none of it: the amplifier is found (the one-pass variance), with a row of squares
    that overflow to inf on both sides beside it; its two-pass form is the fix."""
    case = load_case(f"{TOWARD}:make_fast_variance_overflow")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "tflite"]).explain()
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    assert v.cause == "ill-conditioned" and "one-pass variance" in v.mechanism, (v.cause, v.mechanism)
    assert v.holding and "two passes" in v.holding[0].change, v.fixes


def test_a_second_mechanism_on_other_elements_of_the_same_op_is_said_beside_the_first():
    """eager flushes the subnormal row to zero (DAZ) and onnx sums the offset row otherwise, which the centering
    amplifies: both mechanisms are named (the headline and an "also" line), each in its own layer, and the f64
    stage's change holds once x − mean(x) is rewritten at every site of it (inside jnp.var and after it)."""
    case = load_case(f"{TOWARD}:make_offset_and_subnormal_rows")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "onnx"]).explain()
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    named = {v.cause} | {c for c in ("denormal-flush", "ill-conditioned") if any(
        n.startswith("also ") and c.replace("-", " ").split()[0] in n for n in v.notes)}
    assert v.cause in ("denormal-flush", "ill-conditioned") and named == {"denormal-flush", "ill-conditioned"}, \
        (v.cause, v.notes)
    assert " and " in v.title, v.title
    text = " ".join(render_text(result, width=200).split())
    assert " also " in text and "the program itself" in text and "the device's arithmetic" in text, text
    assert result.lost is not None and result.lost.verified and "every site" in result.lost.change, result.lost
