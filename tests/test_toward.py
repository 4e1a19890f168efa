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
    (site,) = rewrites(fn, args)
    assert site.startswith("one-pass variance at"), site
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
