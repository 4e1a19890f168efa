"""Blame: which local divergences carry the output difference, measured by injecting each one's own
error into eager's replay of the program (``localize.blame``)."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

import jaxparity
from conftest import run_cli, valid_result
from jaxparity.case import load_case
from planted_lines import planted_line as planted_line_in

pytestmark = pytest.mark.slow

CASES = Path(__file__).parent / "cases" / "blame.py"


def planted_line(what: str) -> str:
    return planted_line_in(CASES, what)


def line(op) -> str:
    """``"blame.py:21"``: an op's user line without its directory (the API and the CLI spell it differently)."""
    return re.sub(r".*/", "", op["user_source"] if isinstance(op, dict) else op.user_source)


def localization(factory: str):
    case = load_case(f"{CASES}:{factory}")
    (e,) = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit"]).explain().explanations
    return e.localization


def test_a_bf16_matmul_carries_the_error_and_the_1_ulp_divide_ahead_of_it_is_noise():
    """The matmul's unrounded convert carries the output difference; the 1 ULP divide before it does not."""
    loc = localization("make_small_ahead_of_matmul")
    b = loc.blame
    assert b is not None and b.lead is not None, b
    lead = loc.local[b.lead.divergence]
    assert (lead.op.primitive, line(lead.op)) == ("convert_element_type", planted_line("blame matmul"))
    assert lead.unrounded is not None and lead.unrounded.primitive == "dot_general"
    assert b.lead.alone >= 0.9 and b.together >= 0.9 and len(b.carriers) == 1
    (div,) = [k for k, d in enumerate(loc.local) if d.op.primitive == "div"]
    assert loc.local[div].max_ulp == 1 and line(loc.local[div].op) == planted_line("blame small op")
    assert div in b.noise and b.amplifier is None
    assert set(b.noise) == set(range(len(loc.local))) - {b.lead.divergence}  # the FMA'd add too
    assert loc.lead is lead  # what the explanation reads first is the carrier, not the first divergence


def test_two_divergences_that_cross_a_threshold_only_together_are_named_together(tmp_path):
    """Through the CLI's JSON: two 1 ULP divides, each carrying nothing alone, both needed for the flip."""
    out = tmp_path / "e.json"
    r = run_cli("explain", f"{CASES}:make_only_together", "--paths", "jit", "--json", str(out))
    assert r.returncode == 1, r.stderr
    doc = json.loads(out.read_text())
    valid_result(doc)
    loc = doc["explanations"][0]["localization"]
    # only the two divides diverge on their own: the product, the compare and the select do not
    assert [(d["op"]["primitive"], line(d["op"])) for d in loc["local"]] == [
        ("div", planted_line("together first")), ("div", planted_line("together second"))]
    b = loc["blame"]
    assert b["together"] >= 0.9 and sorted(b["acting_together"]) == [0, 1] and b["noise"] == []
    assert {c["divergence"] for c in b["carriers"]} == {0, 1}
    for c in b["carriers"]:
        assert c["alone"] < 0.05 <= c["needed"]
    assert b["amplifier"] is None
    assert "matters only together with" in r.stdout
    verbose = " ".join(run_cli("explain", f"{CASES}:make_only_together", "--paths", "jit", "-v").stdout.split())
    assert "needed: the share lost when it is left out of all of them injected together" in verbose


def test_a_one_pass_variance_is_blamed_on_the_reduction_that_the_cancellation_amplifies():
    """jit's sum of squares is a few ULP off and alone carries the whole variance difference; the
    subtraction that amplifies it is named with its condition and the two-pass form."""
    loc = localization("make_cancellation")
    if not loc.local:
        pytest.skip("eager and jit sum in the same order on this CPU")
    b = loc.blame
    assert b is not None and b.lead is not None, b
    lead = loc.local[b.lead.divergence]
    # On this CPU (XLA, x: 16 x 4096) the only local divergence is the reduce_sum of x * x, 2 ULP
    # and within the reduction-noise bound; the mean's division by 4096 is exact on both paths. The
    # subtraction turns those 2 ULP of mean(x²) ~ 1e6 into ~0.1 of a variance ~ 1: blame names the
    # reduction as the carrier and, its local error being small, the subtraction that amplifies it.
    assert (lead.op.primitive, line(lead.op)) == ("reduce_sum", planted_line("one-pass variance"))
    assert lead.within_noise_bound and lead.max_ulp <= 8
    feeding = {o.split(":")[0] for o in lead.op.operands}
    assert [op.primitive for op in loc.program if f"op{op.index}" in feeding] == ["mul"]
    assert b.lead.alone >= 0.9 and b.together >= 0.9
    assert b.outputs[0][1] >= 0.01  # amplified: a few ULP at the reduction, ~1e6 ULP at the output
    a = b.amplifier
    assert a is not None and (a.primitive, a.where.rsplit("/", 1)[-1]) == ("sub", planted_line("one-pass variance"))
    assert a.condition is not None and a.condition > 1e5 and a.gain > 1e5
    assert a.pattern.startswith("one-pass variance") and "two passes" in a.remedy


def test_the_short_explanation_leads_with_the_triage_and_the_carrier_in_about_15_lines():
    """The default explanation: the triage first, then the carrier with its share and line, the cause, and
    each fix as its re-run showed it; the tables only with --verbose."""
    from jaxparity.report.terminal import render_text

    case = load_case(f"{CASES}:make_small_ahead_of_matmul")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "f64"]).explain()
    text = render_text(result, width=80)
    assert next(ln for ln in text.splitlines() if ln.startswith(("✗", "✓"))).startswith(
        "✗ jit diverges from eager — excess precision at "), text
    block = text[text.index("✗ jit: "):].splitlines()
    assert "the model's own rounding noise" in block[0], block
    flat = " ".join(" ".join(block).split())
    assert re.search(rf"--> \S*{planted_line('blame matmul')} #\d+ convert_element_type: 100% of the difference", flat)
    assert "fix ✓ jax.jit(fn, compiler_options={'xla_allow_excess_precision': False}): parity on jit" in flat
    assert len([ln for ln in block if ln.strip()]) <= 14, "\n".join(block)
    assert "causes, each tested" not in text and "which semantics reproduce" not in text
    verbose = render_text(result, width=80, verbose=True)
    assert "causes, each tested" in verbose and " ".join(verbose.split()).count("carries 100% of the output") == 1
    # one carrier: the "needed" column would read 0%, so it is left out and the legend says why
    flat = " ".join(verbose.split())
    assert "alone: the share of the output difference reproduced when only" in flat
    assert "loses under 1% of it" in flat and " needed " not in flat.split("what carries the output")[1][:300]


def test_paths_with_the_same_values_share_one_explanation():
    """jit, export and savedmodel give the same values bit for bit: export and savedmodel take jit's
    explanation (no capture or experiment of their own), and each of jit's fixes is said in their terms and
    re-run on them: the compile option as export's, as a flag in savedmodel's serving process."""
    from jaxparity.report.explanation import group_explanations

    case = load_case(f"{CASES}:make_small_ahead_of_matmul")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "export", "savedmodel"]).explain()
    jit, export, saved = result.explanations
    assert export.same_values == saved.same_values == "jit" and jit.same_values is None
    ((shown, same),) = group_explanations(result.explanations)
    assert shown.path == "jit" and [o.path for o in same] == ["export", "savedmodel"]
    assert [(f.spec, f.verified) for f in jit.fixes] == [("jit:xla_allow_excess_precision=false", True),
                                                         ("jit [fixed model]", True)]
    assert [(f.kind, f.spec, f.verified) for f in export.fixes] == [
        ("compile option", "export:xla_allow_excess_precision=false", True), ("model change", "export [fixed model]", True)]
    assert [(f.kind, f.spec, f.verified) for f in saved.fixes] == [
        ("serving flag", "savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false", True),
        ("model change", "savedmodel [fixed model]", True)]
    assert "savedmodel differs from eager in 128 elements" in saved.fixes[0].evidence  # its own re-run's numbers
    assert saved.notes[0].startswith("explained as jit: savedmodel gives jit's values bit for bit")
    assert export.causes == jit.causes and export.localization == jit.localization


def test_a_rerun_is_judged_once_narrows_only_when_nothing_grows():
    """One judgement of a re-run for the cause's status and every sentence: fewer elements but a larger
    distance is no closer (ViT: 5 ULP became 6), never 'narrows'."""
    from jaxparity.explain.measure import NARROWS, narrowing

    assert narrowing((10, 5), (0, 0), True) == ": parity restored"
    assert narrowing((10, 5), (4, 5), True) == NARROWS
    assert narrowing((10, 5), (4, 6), True) == ": no closer"
    assert narrowing((10, 5), (10, 5), False) == ": no change"
    assert narrowing((10, 5), (12, 3), True) == ": no closer"
    # fewer elements and fewer ULP, but the worst element moved to a larger value (ViT under jit with
    # xla_backend_optimization_level=0: 19 -> 17 elements, 107 -> 80 ULP, max abs 1.04e-07 -> 1.79e-07)
    assert narrowing((19, 107, 1.04e-07), (17, 80, 1.79e-07), True) == ": no closer"
    assert narrowing((19, 107, 1.04e-07), (17, 80, 0.9e-07), True) == NARROWS


def test_a_max_ulp_across_zero_is_left_out_of_the_judgement():
    """A largest ULP distance between values on either side of zero counts the float grid down to zero and up
    again: its rise says how small the values are, not that the gap grew. GPT-2 on IREE with float32
    accumulators: 6548 -> 6025 elements, max abs 0.00684 -> 0.00439, max ULP 30153 -> 30192 between values of
    opposite sign, was called "no closer"; it narrows. Where the worst pair has one sign, the ULP still judges."""
    import jax.numpy as jnp
    import numpy as np

    from jaxparity.explain.measure import NARROWS, crosses_zero, narrowing, ulp_comparable

    bf16 = lambda *v: [np.asarray(jnp.asarray(v, jnp.bfloat16))]  # noqa: E731
    base = bf16(4.5e-05, 1.0, 2.0)
    flip, small_flip, near = bf16(-1.4e-04, 1.0, 2.0), bf16(-2e-05, 1.0, 2.0), bf16(4.5e-05, 1.0, 2.0078125)
    assert crosses_zero(flip, base) and crosses_zero(bf16(0.0, 1.0, 2.0), base)
    assert not crosses_zero(near, base) and not crosses_zero(base, base)
    assert not crosses_zero(bf16(-1.4e-04, 1.0, float("nan")), base)  # a NaN mismatch is the worst: no crossing
    # the worst pair decides: a sign flip of a tiny value under a larger same-sign distance elsewhere does not
    assert not crosses_zero(bf16(-1e-38, 1.0, 2.0), bf16(1e-38, 1.0, 2.0 ** 20))
    assert crosses_zero(bf16(-1e-38, 1.0, 2.0), bf16(1e-38, 1.0, 2.0))
    assert ulp_comparable((near, base), (near, base)) and not ulp_comparable((flip, base), (small_flip, base))
    before, after = (6548, 30153, 0.00684), (6025, 30192, 0.00439)
    assert narrowing(before, after, True) == ": no closer"  # both distances judged: the ULP grew
    assert narrowing(before, after, True, ulp=False) == NARROWS
    assert narrowing(before, (6025, 30100, 0.0071), True, ulp=False) == ": no closer"  # max abs grew: never narrows
    assert narrowing((10, 5), (0, 0), True, ulp=False) == ": parity restored"


def test_a_fix_line_leaves_its_run_time_cost_to_verbose_and_json():
    """A fix's cost is a timing: the Keras explain beside two CPU-bound processes said "run time unchanged" where
    the idle run said "+6%". The default text leaves it out (the same on an idle and a loaded machine);
    ``cost_words`` says it for --verbose."""
    import types

    from jaxparity.explain.verdicts import Fix
    from jaxparity.report.brief import cost_words, fix_lines

    fix = Fix("model change", "wrap it", "jit [fixed model]", True, "jit on the fixed model equals eager", cost=0.06)
    e = types.SimpleNamespace(fixes=(fix,), path="jit", baseline="eager")
    (line,) = fix_lines(e)
    assert line.startswith("✓ ") and "run time" not in line and "%" not in line, line
    assert cost_words(fix) == "run time +6% (warm, timed with and without it)"
    assert cost_words(dataclasses.replace(fix, cost=0.0)) == "no measurable cost (warm, within the timing's spread)"
    assert cost_words(dataclasses.replace(fix, cost=None)) == ""


def test_a_fix_sentence_is_written_from_its_rerun_numbers():
    """The fix line reads the re-run's own numbers (``Rerun``): the three distances before and after, and
    its one judgement; ◐ only where it narrows."""
    from jaxparity.explain.verdicts import Fix, Rerun
    from jaxparity.report.brief import _fix_state, rerun_words

    worse = Fix("compile option", "compile with xla_backend_optimization_level=0", "jit:xla_backend_optimization_level=0",
                False, "whatever the text says: narrows, not parity", rerun=Rerun((19, 107, 1.04e-07), (17, 80, 1.79e-07),
                                                                               "no closer"))
    assert rerun_words(worse, "jit", "eager") == ("no closer to eager: 19 → 17 elements differ, max 107 → 80 ULP, "
                                                  "max abs 1.04e-07 → 1.79e-07")
    assert _fix_state(worse) == "✗"
    better = Fix("compile option", "x", "jit:x=1", False, "", rerun=Rerun((19, 107, 1e-07), (17, 80, 9e-08), "narrows"))
    assert rerun_words(better).startswith("narrows, not parity: 19 → 17") and _fix_state(better) == "◐"
    across = Fix("model change", "x", "iree [float32 accumulators]", False, "",
                 rerun=Rerun((6548, 30153, 0.00684), (6025, 30192, 0.00439), "narrows", across_zero=True))
    assert rerun_words(across, "iree", "eager") == (
        "narrows, not parity: 6548 → 6025 elements differ, max 30153 → 30192 ULP (across zero: not a measure of the "
        "gap), max abs 0.00684 → 0.00439")
    # apart from the baseline still, but the path's own error against the ideal halved (vit_jax bf16 on IREE)
    # (flax's ResNet and vit_jax's ViT in bf16 on IREE, a float32 accumulator at the patch embedding)
    accurate = Fix("model change", "x", "iree [float32 accumulator]", False, "", rerun=Rerun(
        (14, 5, 0.00977), (8, 7, 0.0156), "no closer", (0.0151, 0.00956, 0.00958, 0.00958)))
    said = rerun_words(accurate, "iree", "eager")
    assert said.startswith("no closer to eager: 14 → 8") and _fix_state(accurate) == "✗"
    assert "max abs error against the f64 ideal: iree 0.0151 → 0.00956, eager 0.00958" in said
    assert "iree as accurate as eager with it" in said
    vit = Fix("model change", "x", "iree [float32 accumulator]", False, "", rerun=Rerun(
        (20, 15143100, 0.00236), (20, 1075151, 0.00274), "no closer", (0.00506, 0.00169, 0.00339, 0.00339)))
    assert "iree more accurate than eager with it" in rerun_words(vit, "iree", "eager")
    unmoved = Fix("model change", "x", "iree [float32 accumulator]", False, "", rerun=Rerun(
        (14, 5, 0.00977), (14, 6, 0.0100), "no closer", (0.0151, 0.0149, 0.00958, 0.00958)))
    assert "with it" not in rerun_words(unmoved, "iree", "eager")  # nothing gained: nothing claimed


def test_a_fast_variance_layernorm_on_tflite_is_ill_conditioned_and_its_two_pass_form_is_verified_there():
    """flax's LayerNorm(use_fast_variance=True) converted to TFLite: both sides sum within the bound, the
    one-pass variance amplifies it (the amplifier is that subtraction, not x − mean whose elements near zero
    have a large relative difference), and the two-pass form, re-run on TFLite, eager and f64, brings TFLite
    within the rewritten program's own rounding noise: the fix is verified on the path, said in one line."""
    from jaxparity.report.terminal import render_text

    case = load_case(f"{CASES}:make_fast_variance_layernorm")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "tflite", "f64"]).explain()
    (p,) = [p for p in result.paths if p.spec == "tflite"]
    assert p.status == "ok", p.message
    (e,) = result.explanations
    a = e.localization.blame.amplifier
    assert a is not None and a.primitive == "sub" and a.pattern.startswith("one-pass variance")
    assert a.condition > 1e5 and line(e.localization.program[a.index]) == planted_line("fast variance")
    sub_inputs = {o.split(":")[0] for o in e.localization.program[a.index].operands}
    assert [op.primitive for op in e.localization.program if f"op{op.index}" in sub_inputs] == ["div", "square"]
    (cause,) = [c for c in e.causes if c.cause == "ill-conditioned"]
    assert cause.status == "confirmed", cause
    (fix,) = [f for f in e.fixes if f.spec == "tflite [well-conditioned model]"]
    assert fix.verified and "use_fast_variance=False" in fix.description
    before, after = (float(x) for x in re.search(r"falls from (\S+) to (\S+) \(max abs\)", fix.evidence).groups())
    assert after < before / 100, fix.evidence
    text = " ".join(render_text(result, width=80).split())
    assert "✓ compute the variance in two passes" in text and "(proposed; not re-run)" not in text
    assert "half or more of eager's digits are rounding error" in text
    # eager's distance from f64 is the program's rounding made large, not an error of eager's
    assert "an error rather than rounding" not in text and "1× the model's own rounding noise" in text
    assert "report it to the runtime's maintainers" not in text  # neither side is wrong


def test_rounding_noise_is_judged_on_the_divergences_that_carry_it_a_math_library_op_included():
    """On ONNX Runtime a float32 block departs at two sums (other orders, within their bound) and an rsqrt
    (its own math library, 1 ULP): every divergence is rounding, so it is expected rounding noise; before,
    one non-reduction among them left the cause unknown."""
    case = load_case(f"{CASES}:make_rounding_only")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "onnx", "f64"]).explain()
    (e,) = result.explanations
    prims = sorted(d.op.primitive for d in e.localization.local)
    assert "rsqrt" in prims and any(not d.within_noise_bound for d in e.localization.local), prims
    (noise,) = [c for c in e.causes if c.cause == "reduction-order"]
    assert noise.status == "noise", noise
    assert not any(c.cause == "unknown" for c in e.causes)
    # How much of the output difference ORT's 1 ULP rsqrt carries depends on the CPU's kernels (ORT's sums
    # before it): where it carries a share, the verdict says it is its math library's and the title says so;
    # where it carries none, the sums alone are the noise.
    (rsqrt,) = [k for k, d in enumerate(e.localization.local) if d.op.primitive == "rsqrt"]
    if rsqrt in {c.divergence for c in e.localization.blame.carriers}:
        assert re.search(r"#\d+ rsqrt( \(\d+%\))?: both within \d+ ULP of the correctly rounded rsqrt", noise.evidence)
        assert noise.title.startswith("reduction order and math libraries"), noise.title
    else:
        assert rsqrt in e.localization.blame.noise and "each carry under 5% of it alone" in noise.evidence, noise.evidence
        assert "math libraries" not in noise.title, noise.title


def test_of_many_divergences_each_share_is_screened_and_agrees_with_replaying_every_one(monkeypatch):
    """28 divergences (more than are replayed one by one): each one's share alone is measured on the
    compiled screen, checked exactly on the largest; the carriers and their shares are those found by
    replaying every divergence exactly, and several that alone reproduce it are said to overlap."""
    import jax

    from jaxparity.localize import blame as b
    from jaxparity.localize.localizer import localize
    from jaxparity.localize.program import flatten
    from jaxparity.localize.values import op_values
    from jaxparity.report.brief import blame_line

    case = load_case(f"{CASES}:make_deep_bf16_resnet")
    flat = jax.tree_util.tree_leaves(case.args)
    program = flatten(case.fn, case.args)
    base, path = op_values(program, "eager", flat), op_values(program, "jit", flat)
    plain = jax.tree_util.tree_leaves(jax.jit(case.fn)(*case.args))
    loc = localize(program, path, base, flat, "eager")
    assert len(loc.local) > b.MAX_ALONE
    screened = b.blame_localization(program, loc, path, base, flat, plain, base.outputs).blame
    monkeypatch.setattr(b, "MAX_ALONE", 10**6)  # every divergence replayed alone, exactly
    exact = b.blame_localization(program, loc, path, base, flat, plain, base.outputs).blame
    assert exact.screened == 0 and not any(c.screened for c in exact.carriers)
    assert screened.screened >= len(loc.local) - b.SCREEN_CHECKS and screened.screen_gap <= b.SCREEN_AGREES
    assert screened.unmeasured == 0
    assert {c.top_index for c in screened.carriers} == {c.top_index for c in exact.carriers}
    want = {c.top_index: c.alone for c in exact.carriers}
    for c in screened.carriers:
        assert abs(c.alone - want[c.top_index]) <= b.SCREEN_AGREES, (c, want[c.top_index])
    assert screened.lead.alone == max(want.values()) and not screened.lead.screened
    assert set(screened.noise) == set(exact.noise)
    assert screened.overlapping >= 2
    lines = blame_line(dataclasses.replace(loc, blame=screened))
    assert any(f"{len(screened.carriers)} of the {len(loc.local)} divergences each carry 5% or more alone, "
               f"{screened.overlapping} of them half or more" in ln and
               "no one op is the cause" in ln for ln in lines), lines


def test_a_fix_of_one_path_is_said_in_the_terms_of_another():
    """``explain.same.on_path``: XLA options reach export as compile options and savedmodel as flags of its
    serving process; JAX options only a path that takes them; a runtime's own option no other path."""
    from jaxparity.explain.same import on_path
    from jaxparity.paths import make_path

    jit, export, saved = make_path("jit"), make_path("export"), make_path("savedmodel")
    both = "jit:xla_allow_excess_precision=false,xla_backend_optimization_level=0"
    assert on_path(both, jit, saved) == ("savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false "
                                         "--xla_backend_optimization_level=0")
    assert on_path(both, jit, export) == "export:xla_allow_excess_precision=false,xla_backend_optimization_level=0"
    assert on_path("savedmodel:XLA_FLAGS=--xla_cpu_enable_fast_math=true", saved, jit) == \
        "jit:xla_cpu_enable_fast_math=true"
    assert on_path("jit:jax_default_matmul_precision=highest", jit, export) == \
        "export:jax_default_matmul_precision=highest"
    assert on_path("jit:jax_default_matmul_precision=highest", jit, saved) is None  # no JAX where it is served
    assert on_path("tflite:kernels=reference", make_path("tflite"), jit) is None


def test_a_scalar_loss_is_blamed_on_the_op_that_carries_it():
    """A 0-d output (a loss) is one element: blame measures it like any output, and the verdict names the line."""
    case = load_case(f"{CASES}:make_scalar_loss")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit"]).explain()
    (e,) = result.explanations
    assert e.localization.blame is not None, e.notes
    assert not any("could not be measured" in n for n in (*e.notes, *e.localization.notes))
    (v,) = result.verdicts
    assert v.kind == "divergence" and v.carriers and v.carriers[0].line.endswith(planted_line("loss layer"))
    assert "100%" in v.carriers[0].share and not v.stage_errors


def test_a_numpyro_log_density_names_the_distribution_and_the_gradient():
    """Issue 55: NumPyro's ops all sat "in jvp()" at the user's one line. The carrier of a log-density's gradient
    on ONNX (jax2onnx writes log1p as Add → Log) is named by the library call it was created in and the
    transformation in words: "StudentT.log_prob, in the gradient", at the user's line."""
    import inspect

    import jax
    import jax.numpy as jnp
    from numpyro.infer.util import initialize_model

    from cases.numpyro_model import data, student_t

    potential = initialize_model(jax.random.PRNGKey(0), student_t, model_args=(data(),)).potential_fn

    def grad(mu, sigma, nu):
        return jax.grad(potential)({"mu": mu, "sigma": sigma, "nu": nu})

    line = inspect.getsourcelines(grad)[1] + 1
    result = jaxparity.compare(grad, jnp.float32(0.7), jnp.float32(0.3), jnp.float32(1.2),
                               paths=["eager", "onnx"]).explain()
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    c = v.carriers[0]
    assert c.line is not None and c.line.endswith(f"test_blame.py:{line}"), c
    assert c.module == "StudentT.log_prob, in the gradient", c
