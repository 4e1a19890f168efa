"""Localization inside loops and branches (issue 10): the loop, the iteration, the op inside its body
with its own line, and the cause decided on the op's own captured inputs."""

import fractions
import re
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxparity
from planted_lines import planted_line as planted_line_in
from jaxparity.case import load_case
from jaxparity.localize.semantics import fused_multiply_add

CASES = Path(__file__).parent / "cases" / "loops.py"


def planted(what: str) -> str:
    return planted_line_in(CASES, what)


def short(source: str | None) -> str:
    return re.sub(r".*/", "", source or "")


def explain(factory: str, paths=("eager", "jit"), baseline="eager"):
    case = load_case(f"{CASES}:{factory}")
    result = jaxparity.compare(case.fn, *case.args, paths=list(paths), baseline=baseline)
    return result, result.explain()


def _cases():
    import importlib.util

    spec = importlib.util.spec_from_file_location("loop_cases", CASES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cause(e, cause_id):
    return next(c for c in e.causes if c.cause == cause_id)


# ------------------------------------------------------------ the op-level FMA judge itself (fast)
def _exact_fma(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """a*b + c in exact rational arithmetic, rounded once to float32 (nearest, ties to even)."""
    exact = fractions.Fraction(float(a)) * fractions.Fraction(float(b)) + fractions.Fraction(float(c))
    lo = np.float32(float(exact))  # within one float32 step of the exact value
    cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
    best = min(cands, key=lambda v: (abs(fractions.Fraction(float(v)) - exact),
                                     int(np.array(v).view(np.int32)) & 1))
    return np.float32(best)


def test_fused_multiply_add_is_correctly_rounded_against_exact_rationals():
    rng = np.random.default_rng(7)
    a = rng.standard_normal(3000).astype(np.float32)
    b = rng.standard_normal(3000).astype(np.float32)
    c = (-(a.astype(np.float64) * b)).astype(np.float32)  # heavy cancellation: where rounding decides
    c[::3] = rng.standard_normal(1000).astype(np.float32)
    c[1::3] *= np.float32(1 + 2**-20)
    got = fused_multiply_add(a, b, c, np.dtype(np.float32))
    want = np.array([_exact_fma(x, y, z) for x, y, z in zip(a, b, c)], dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    # and it is not the twice-rounded value, where that differs
    twice = (a * b + c).astype(np.float32)
    assert np.count_nonzero(twice != got) > 0


def test_a_region_of_bf16_outputs_is_compared_not_reproduced_by_default():
    """region_fma on a bf16 region (ml_dtypes: numpy kind 'V'): its outputs are compared with the path's, so
    values the candidate does not give are never said to be reproduced."""
    import jax.numpy as jnp
    import ml_dtypes

    from jaxparity.localize.program import flatten
    from jaxparity.localize.semantics import region_fma

    x, y, z = (jnp.asarray(np.linspace(0.1, 2, 8) * k, jnp.bfloat16) for k in (1, 3, -1))
    program = flatten(lambda x, y, z: x * y + z, (x, y, z))
    declared = np.asarray(x * y + z)
    path = (declared.view(np.uint16) + 1).view(ml_dtypes.bfloat16)  # one ULP off everywhere: nothing reproduces it
    matches = region_fma(program, [np.asarray(v) for v in (x, y, z)], [path], [declared])
    assert matches and not any(m.reproduces_path for m in matches)
    assert all(m.max_ulp_to_path >= 1 for m in matches)


# ------------------------------------------------------------ planted loops (slow)
slow = pytest.mark.slow


@slow
@pytest.mark.parametrize("path", ["jit", "export", "savedmodel"])
def test_fma_inside_a_scan_names_the_loop_the_iteration_the_op_and_its_line(path):
    result, res = explain("make_scan_fma", paths=("eager", path))
    (e,) = [x for x in res.explanations if x.path == path]
    first = e.localization.first
    (frame,) = first.within
    assert frame.kind == "scan" and frame.trips == 16 and frame.iteration == 0
    assert short(frame.op.user_source) == planted("scan loop")
    assert first.op.primitive == "sub" and short(first.op.user_source) == planted("scan fma")
    fma = cause(e, "fma-contraction")
    assert fma.status == "confirmed" and fma.experiment.startswith("fma semantics on the captured inputs")
    assert any(m.name == "fma" and m.reproduces_path for m in first.semantics)
    assert first.declared_side == "baseline"  # eager keeps the declared rounding; jit does not
    assert "iteration 0 of 16" in e.summary and planted("scan fma") in e.summary
    # the whole-program flag is reported as the proof of the fix, verified or not, never as the evidence
    assert fma.proof is not None and "xla_backend_optimization_level=0" in fma.proof.spec


@slow
def test_clean_scan_stays_clean():
    case = load_case(f"{CASES}:make_clean_scan")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit"])
    assert result.path("jit").verdict == "identical"


@slow
def test_excess_precision_from_iteration_k_of_an_nn_scan_stack():
    FIRST_ACTIVE_LAYER = _cases().FIRST_ACTIVE_LAYER
    _, res = explain("make_nn_scan_bf16")
    (e,) = res.explanations
    first = e.localization.first
    (frame,) = first.within
    assert frame.iteration == FIRST_ACTIVE_LAYER and frame.trips == 8
    assert frame.module.endswith("layers") and frame.describe().startswith("layers (scan at")
    assert short(frame.op.user_source) == planted("nn.scan loop")
    lines = {short(first.op.user_source), short(first.unrounded.user_source if first.unrounded else None)}
    assert planted("nn.scan excess precision") in lines
    assert frame.carry_ulp[:FIRST_ACTIVE_LAYER + 1] == (0,) * (FIRST_ACTIVE_LAYER + 1)
    assert max(frame.carry_ulp) > 0
    assert cause(e, "excess-precision").status == "confirmed"
    # Blame per iteration: the scan carries the output difference; each iteration's own error is injected
    # alone into eager's loop. The first 3 blocks are exact copies (zero kernels): they add none.
    c = e.localization.blame.lead
    assert e.localization.local[c.divergence] is first and c.alone >= 0.9
    assert 0 < c.iterations_with_error <= 8 - FIRST_ACTIVE_LAYER and c.iterations_measured == c.iterations_with_error
    assert c.iterations and all(t >= FIRST_ACTIVE_LAYER for t, _ in c.iterations)
    assert sum(v for _, v in c.iterations) >= 0.3, c.iterations
    from jaxparity.report.brief import blame_line

    assert f"by iteration: iteration {c.iterations[0][0]} carries" in " ".join(blame_line(e.localization))


@slow
def test_while_loop_with_a_data_dependent_trip_count():
    _, res = explain("make_while_fma")
    (e,) = res.explanations
    first = e.localization.first
    (frame,) = first.within
    assert frame.kind == "while" and frame.trips == 9 and frame.iteration == 0
    assert short(first.op.user_source) == planted("while fma")
    assert short(frame.op.user_source) == planted("while loop")
    assert cause(e, "fma-contraction").status == "confirmed"
    # blamed iteration by iteration: each of the 9 iterations' own FMA error injected alone into eager's
    # loop (its condition deciding when it stops), the rest of the loop replayed
    (c,) = e.localization.blame.carriers
    assert c.iterations_measured == c.iterations_with_error == 9, c
    assert c.iterations and all(0 <= t < 9 for t, _ in c.iterations)
    assert 0.3 <= sum(v for _, v in c.iterations), c.iterations


@slow
def test_while_loop_beyond_the_capture_budget_says_what_was_not_captured(monkeypatch):
    from jaxparity.localize.loops import capture

    monkeypatch.setattr(capture, "CAPTURE_BYTES", 3 * (4 + 64 * 4))  # three iterations of (int32, float32[64])
    _, res = explain("make_while_fma")
    (e,) = res.explanations
    assert e.localization.first.within[0].iteration == 0
    assert any("ran 9 iterations" in n and "first 3 were captured" in n for n in e.notes), e.notes


@slow
def test_cond_inside_scan_names_the_branch_and_confirms_fma_on_the_fused_region():
    _, res = explain("make_cond_in_scan")
    (e,) = res.explanations
    first = e.localization.first
    kinds = [f.kind for f in first.within] or [first.op.primitive]
    assert kinds[0] == "scan"
    scan = first.within[0]
    assert scan.iteration == 1  # step 0 takes the add-only branch
    # Either the branch is opened (the sub inside it) or, where capturing its values changes the fusion,
    # the cond is the finding and the region's FMA semantics reproduce it.
    if len(first.within) == 2:
        assert first.within[1].kind == "cond" and first.within[1].branch == 1
        assert short(first.op.user_source) == planted("cond fma")
    else:
        assert first.op.primitive == "cond" and short(first.op.user_source) == planted("cond")
        assert any(m.name == "fma" and m.reproduces_path for m in first.semantics)
    assert cause(e, "fma-contraction").status == "confirmed"


@slow
def test_remat_inside_scan():
    _, res = explain("make_remat_scan")
    (e,) = res.explanations
    first = e.localization.first
    assert [f.kind for f in first.within] == ["scan"]
    assert short(first.op.user_source) == planted("remat fma")
    assert cause(e, "fma-contraction").status == "confirmed"


@slow
def test_nested_scans_are_opened_level_by_level():
    _, res = explain("make_nested_scan")
    (e,) = res.explanations
    first = e.localization.first
    assert [(f.kind, f.iteration, f.trips) for f in first.within] == [("scan", 0, 3), ("scan", 0, 4)]
    assert short(first.op.user_source) == planted("nested fma")


@slow
def test_eager_replays_a_loop_op_by_op_not_compiled():
    """Binding a scan primitive under disable_jit compiles the whole loop with XLA (FMA and all);
    eager's replay must run the body op by op as lax.scan does."""
    from jaxparity.localize.localizer import _baseline_replay
    from jaxparity.localize.program import flatten

    case = load_case(f"{CASES}:make_nested_scan")
    program = flatten(case.fn, case.args)
    (scan,) = [op for op in program.ops if op.info.primitive == "scan"]
    replay = _baseline_replay("eager", scan, [np.asarray(a) for a in case.args])
    with jax.disable_jit():
        want = case.fn(*case.args)
    np.testing.assert_array_equal(np.asarray(replay[0]).view(np.int32), np.asarray(want).view(np.int32))


@slow
def test_jit_vs_savedmodel_inside_an_nn_scan():
    """Two compiled paths, the TF side rounding where jit keeps excess precision: the iteration and
    the op are found although TensorFlow cannot replay one op (same-carry comparison)."""
    FIRST_ACTIVE_LAYER = _cases().FIRST_ACTIVE_LAYER
    _, res = explain("make_nn_scan_bf16", paths=("jit", "savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false"),
                     baseline="jit")
    (e,) = res.explanations
    first = e.localization.first
    assert first.within and first.within[0].iteration == FIRST_ACTIVE_LAYER
    lines = {short(first.op.user_source), short(first.unrounded.user_source if first.unrounded else None)}
    assert lines & {planted("nn.scan excess precision"), planted("nn.scan widening")}


@slow
def test_nnx_scan_over_stacked_modules():
    _, res = explain("make_nnx_scan")
    (e,) = res.explanations
    first = e.localization.first
    (frame,) = first.within
    assert frame.kind == "scan" and frame.trips == 6
    assert short(frame.op.user_source) == planted("nnx scan")
    assert short(first.op.user_source) == planted("nnx fma")
    assert cause(e, "fma-contraction").status == "confirmed"


@slow
def test_sampler_fori_loop_carrying_a_prng_key():
    """A key in the carry is kept as its key data and re-wrapped to replay an iteration."""
    _, res = explain("make_sampler")
    (e,) = res.explanations
    first = e.localization.first
    (frame,) = first.within
    assert frame.kind == "scan" and frame.trips == 8 and frame.iteration == 0  # fori_loop with static bounds
    assert short(frame.op.user_source) == planted("sampler loop")
    assert short(first.op.user_source) == planted("sampler fma")
    assert cause(e, "fma-contraction").status == "confirmed"
