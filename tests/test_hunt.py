"""jaxparity hunt: the domain, the search, and planted divergences that only show in a small region of
the inputs (cases/hunt.py), each found on the path where it really happens."""

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from conftest import CASES, run_cli
from jaxparity.arrayio import load_arrays
from jaxparity.hunt import hunt_case
from jaxparity.hunt.domain import DomainError, parse_domain

HUNT = CASES / "hunt.py"


# -- the domain -------------------------------------------------------------------------------------

def test_the_derived_domain_varies_the_data_within_its_range_widened_and_keeps_a_sign():
    example = {"arg0/w": np.ones(3, np.float32), "arg1": np.array([0.2, 0.6, 1.0], np.float32),
               "arg2": np.array([-3.0, 1.0], np.float32), "arg3": np.array([2, 9], np.int32)}
    d = parse_domain([], example, ["arg1", "arg2", "arg3"])
    assert d.names == ["arg1", "arg2", "arg3"]  # the model's variables are not among them
    lo, hi = d.bounds("arg1")
    assert float(lo[0]) == 0.0 and np.isclose(float(hi[0]), 1.4)  # pixels stay non-negative
    lo, hi = d.bounds("arg2")
    assert np.isclose(float(lo[0]), -5.0) and np.isclose(float(hi[0]), 3.0)
    lo, hi = d.bounds("arg3")
    assert (int(lo[0]), int(hi[0])) == (2, 9)


def test_stated_bounds_are_values_of_the_leaf_dtype_inside_what_was_stated():
    example = {"arg0": np.zeros(4, ml_dtypes.bfloat16)}
    d = parse_domain(["arg0=-0.1:0.1"], example, ["arg0"])
    lo, hi = d.bounds("arg0")
    assert lo.dtype == ml_dtypes.bfloat16 and float(hi[0]) <= 0.1 and float(lo[0]) >= -0.1
    assert float(hi[0]) > 0.099  # the largest bfloat16 value under 0.1, not one further in
    inside = d.project({"arg0": np.array([5, -5, 0.1, np.nan], np.float64)})
    assert d.contains(inside) == 0
    assert float(inside["arg0"][0]) == float(hi[0]) and float(inside["arg0"][3]) == 0.0  # NaN: the center's


def test_balls_fixed_vary_min_max_and_real_inputs(tmp_path):
    from jaxparity.arrayio import save_arrays

    example = {"arg0/params/w": np.ones(2, np.float32), "arg1": np.array([1.0, 2.0], np.float32),
               "arg2": np.array([True, False])}
    d = parse_domain(["arg1=ball:0.5", "arg0=vary"], example, ["arg1"])
    assert d.names == ["arg0/params/w", "arg1"]
    lo, hi = d.bounds("arg1")
    assert lo.tolist() == [0.5, 1.5] and hi.tolist() == [1.5, 2.5]
    assert parse_domain(["arg1=fixed", "arg0=vary"], example, ["arg1"]).names == ["arg0/params/w"]
    assert float(parse_domain(["arg1=min:max"], example, ["arg1"]).bounds("arg1")[1][0]) == np.finfo(np.float32).max
    for i, v in enumerate(([0.0, 0.0], [10.0, 10.0])):
        save_arrays(tmp_path / f"{i}.npz", {"arg1": np.array(v, np.float32)})
    around = parse_domain([f"around={tmp_path}", "ball=1"], example, ["arg1"])
    assert len(around.centers) == 2
    assert around.contains({"arg1": np.array([9.5, 10.5], np.float32)}) == 1
    assert around.contains({"arg1": np.array([5.0, 5.0], np.float32)}) is None  # between the balls: outside


@pytest.mark.parametrize("items,words", [(["argl=0:1"], "did you mean arg1"), (["arg1=1:0"], "above the high"),
                                         (["arg1=a:b"], "is not a number"), (["arg1"], "write NAME=LO:HI"),
                                         (["arg1=fixed"], "varies nothing")])
def test_a_domain_that_cannot_be_used_says_why(items, words):
    with pytest.raises(DomainError, match=words):
        parse_domain(items, {"arg1": np.ones(2, np.float32)}, ["arg1"])


# -- the search -------------------------------------------------------------------------------------

def _kinds(result):
    return {(f.output, f.kind) for f in result.findings}


def test_an_argmax_tie_on_jit_is_found_where_random_samples_of_the_same_budget_find_nothing(tmp_path):
    """x * w + b is one fused multiply-add under jit: the class flips only where the two best scores are
    within a ULP (no flip in 2 million random rows); the hunt aims Newton steps at the argmax's tie."""
    from jaxparity.comparison import compare_samples

    r = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=96, out_dir=str(tmp_path), explain=0)
    assert not r.passed and ("out", "beyond rounding") in _kinds(r)
    worst = r.findings[0]
    assert worst.reached and "tie of #4 argmax" in worst.reached[0]
    assert r.first_found is not None and r.first_found <= 96
    sampled = compare_samples(f"{HUNT}:make_argmax_tie", samples=96, paths=["eager", "jit"])
    assert sampled.path("jit").samples.diverging == 0  # the same budget of --samples sees nothing
    # the input file reproduces it, and lies in the domain
    arrays = load_arrays(worst.inputs_file)
    assert set(arrays) == {"arg1"}
    lo, hi = -4.39767, 4.18958  # the derived domain (the example's range widened by half each side)
    assert float(arrays["arg1"].min()) >= lo and float(arrays["arg1"].max()) <= hi
    assert any("arg1 in [-4.39767, 4.18958]" in line for line in r.domain)


def test_an_op_in_a_scans_body_is_aimed_at_iteration_by_iteration(tmp_path):
    """The bucketizer's floor inside a lax.scan: a site of its own ("scan #1: #2 floor"), its measure stacked
    by iteration, driven to its threshold and found on jit."""
    r = hunt_case(f"{HUNT}:make_floor_in_scan", paths="eager,jit", budget=96, out_dir=str(tmp_path), explain=0)
    floor = [s for s in r.sites if s.primitive == "floor"]
    assert floor and floor[0].loop is not None and floor[0].reached > 0
    assert not r.passed and any(f.kind == "beyond rounding" and any("scan #" in s and "floor" in s for s in f.reached)
                                for f in r.findings), [(f.kind, f.reached) for f in r.findings]


def test_the_same_seed_repeats_the_search_and_another_seed_searches_otherwise(tmp_path):
    a = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=48, seed=3, explain=0)
    b = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=48, seed=3, explain=0)
    c = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=48, seed=4, explain=0)
    key = lambda r: [(f.evaluation, f.origin, f.path_value, f.baseline_value) for f in r.findings]  # noqa: E731
    assert key(a) == key(b) and [p[:3] for p in a.progress] == [p[:3] for p in b.progress]
    assert a.operators == b.operators
    assert key(a) != key(c)


def test_a_larger_budget_evaluates_the_same_inputs_first_and_never_finds_less():
    small = hunt_case(f"{HUNT}:make_floor_threshold", paths="eager,jit", budget=40, explain=0)
    large = hunt_case(f"{HUNT}:make_floor_threshold", paths="eager,jit", budget=80, explain=0)
    common = {p[0] for p in small.progress} & {p[0] for p in large.progress}  # after each round both ran
    assert len(common) >= 1
    assert [p[:3] for p in small.progress if p[0] in common] == [p[:3] for p in large.progress if p[0] in common]
    rank = lambda f: (f.breaks, f.kind != "rounding", f.scaled)  # noqa: E731
    assert max(map(rank, large.findings)) >= max(map(rank, small.findings))


def test_nothing_outside_a_stated_domain_is_evaluated_or_reported(tmp_path):
    """A box that holds no tie of the argmax and no flip: the hunt reports none, and each input it saved
    lies in the box."""
    r = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=48, domain=["arg1=0.25:0.5"],
                  out_dir=str(tmp_path), explain=0)
    for f in r.findings:
        x = load_arrays(f.inputs_file)["arg1"]
        assert 0.25 <= float(x.min()) and float(x.max()) <= 0.5
    assert r.domain_source == "stated: --domain arg1=0.25:0.5"


def test_paths_that_agree_pass_the_gate_and_a_tolerance_is_the_gate(tmp_path):
    r = hunt_case(f"{HUNT}:make_periodic", paths="eager,jit", budget=24, explain=0)
    assert r.passed and not r.findings and "agree bit for bit on every one" in r.summary()
    tie = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=48, explain=0, tolerance=None)
    from jaxparity.metrics import Tolerance

    wide = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=48, explain=0,
                     tolerance=Tolerance(atol=16.0))
    assert not tie.passed and wide.passed and "within the tolerance" in wide.summary()


# -- each planted region, on the path where it happens ----------------------------------------------

PLANTED = [
    ("make_floor_threshold", "savedmodel", [], "beyond rounding", "threshold of #2 floor"),
    ("make_masked_row", "tflite", [], "NaN or inf on one side", None),
    ("make_logsumexp_overflow", "tflite", ["arg0=-90:90"], "NaN or inf on one side", "overflow of #0 exp"),
    ("make_log_subnormal", "onnx", [], None, None),
    ("make_periodic", "iree", ["arg0=0:100000"], "beyond rounding", "large argument of #0 sin"),
]


@pytest.mark.slow
@pytest.mark.parametrize("factory,path,domain,kind,site", PLANTED)
def test_a_divergence_in_a_small_region_is_found_on_its_path(factory, path, domain, kind, site, tmp_path):
    r = hunt_case(f"{HUNT}:{factory}", paths=f"eager,{path}", budget=96, domain=domain, out_dir=str(tmp_path),
                  explain=0)
    kinds = {f.kind for f in r.findings}
    if kind is None:  # log of a subnormal: XLA flushes it (-inf or -103.97), ONNX Runtime computes it
        assert kinds & {"beyond rounding", "NaN or inf on one side"}
        worst = load_arrays(r.findings[0].inputs_file)["arg0"].astype(np.float64)
        assert ((worst > 0) & (worst < np.finfo(np.float32).tiny)).any()  # a subnormal input
    else:
        assert kind in kinds, r.summary()
    if site is not None:
        assert any(site in s for f in r.findings for s in f.reached), [f.reached for f in r.findings]
        assert any(s.reached for s in r.sites if site.endswith(f"#{s.op} {s.primitive}"))


@pytest.mark.slow
def test_the_worst_input_is_explained_as_explain_inputs_would(tmp_path):
    """floor after a fused multiply-add in TensorFlow's XLA: the explanation names the add and FMA, with the
    serving flag its re-run verified."""
    r = hunt_case(f"{HUNT}:make_floor_threshold", paths="eager,savedmodel", budget=48, out_dir=str(tmp_path),
                  explain=1)
    f = r.findings[0]
    assert f.lead is not None and f.lead.startswith("#1 add")
    assert f.cause is not None and f.cause.startswith("FMA contraction")
    assert f.fix is not None and "savedmodel:XLA_FLAGS=" in f.fix


# -- the command line -------------------------------------------------------------------------------

@pytest.mark.parametrize("args,words", [
    (["--paths", "eager"], "two paths"),
    (["--paths", "eager,jitt"], "did you mean jit"),
    (["--paths", "eager,jit", "--domain", "argl=0:1"], "did you mean arg1"),
    (["--paths", "eager,jit", "--budget", "0"], "at least 1"),
    (["--paths", "eager,jit", "--domain", "arg1=ball:-1"], "arg1=ball:-1: a radius must not be negative"),
    (["--paths", "eager,jit", "--domain", "arg1=nan:1"], "is not a finite number"),
    (["--paths", "eager,jit", "--domain", "arg1=1e40:1e41"], "is beyond what float32 holds"),
    (["--paths", "eager,jit", "--domain", "arg1=-1:1,arg1=0:2"], "give each input once"),
])
def test_usage_errors_exit_2_with_one_line(args, words):
    p = run_cli("hunt", f"{HUNT}:make_argmax_tie", *args)
    assert p.returncode == 2, p.stderr
    assert words in p.stderr and "Traceback" not in p.stderr


def test_the_command_writes_the_input_json_and_html_and_exits_1_when_an_input_breaks_the_gate(tmp_path):
    p = run_cli("hunt", f"{HUNT}:make_argmax_tie", "--paths", "eager,jit", "--budget", "64", "--explain", "0",
                "-o", str(tmp_path / "found"), "--json", str(tmp_path / "h.json"), "--html", str(tmp_path / "h.html"))
    assert p.returncode == 1, p.stderr
    assert "found 1 kind of divergence" in p.stdout and "tie of #4 argmax" in p.stdout
    assert "an input breaks the tolerance (exact)" in p.stdout
    assert all(len(line) <= 80 for line in p.stdout.splitlines()), p.stdout
    data = json.loads((tmp_path / "h.json").read_text())
    assert data["passed"] is False and data["findings"][0]["inputs_file"].startswith(str(tmp_path / "found"))
    assert Path(data["findings"][0]["inputs_file"]).exists()
    html = (tmp_path / "h.html").read_text()
    assert 'class="progress-line"' in html and "tie of #4 argmax" in html
    quiet = run_cli("hunt", f"{HUNT}:make_argmax_tie", "--paths", "eager,jit", "--budget", "8", "-q",
                    "--explain", "0", "-o", str(tmp_path / "q"), "--domain", "arg1=0.25:0.5")
    assert quiet.returncode in (0, 1) and len(quiet.stdout.strip().splitlines()) <= 3


# -- islands ----------------------------------------------------------------------------------------

def test_a_budget_split_over_islands_on_a_local_pool_is_one_merged_hunt(tmp_path):
    r = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=96, jobs=2, out_dir=str(tmp_path), explain=0)
    assert r.islands == 2 and r.evaluations == 96
    assert not r.passed and ("out", "beyond rounding") in _kinds(r)
    assert Path(r.findings[0].inputs_file).exists() and r.findings[0].island in (0, 1)
    assert [p[0] for p in r.progress] == sorted(p[0] for p in r.progress) and r.progress[-1][0] == 96
    assert any("2 islands" in n for n in r.notes)
    again = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=96, jobs=2, explain=0)
    assert [(f.island, f.evaluation, f.path_value) for f in again.findings] == \
        [(f.island, f.evaluation, f.path_value) for f in r.findings]


@pytest.mark.slow
def test_islands_on_ray(tmp_path):
    import ray

    try:
        r = hunt_case(f"{HUNT}:make_argmax_tie", paths="eager,jit", budget=64, executor="ray", jobs=2,
                      out_dir=str(tmp_path), explain=0)
    finally:
        ray.shutdown()
    assert r.islands == 2 and r.evaluations == 64 and not r.passed


def test_the_python_api_returns_a_result_that_prints_as_the_command_does():
    import jaxparity

    r = jaxparity.hunt_case(f"{HUNT}:make_argmax_tie", paths=["eager", "jit"], budget=24, explain=0)
    assert str(r).startswith("jaxparity hunt hunt.py:make_argmax_tie: jit against eager")
    assert " ".join(r.summary().split()) in " ".join(str(r).split())  # the closing line, as wrapped
    assert "<h1 id=header>jaxparity hunt" in r._repr_html_()
    assert json.loads(r.to_json())["evaluations"] == 24
