"""One comparison on several cores (issue 13): `--jobs N` runs paths that convert into other runtimes in
their own workers at the same time; results and their order are those of one worker."""

from pathlib import Path

import numpy as np
import pytest

from jaxparity.comparison import compare_case
from jaxparity.execution.runners import Runners

CASE = str(Path(__file__).parents[1] / "examples" / "conv_bf16.py")


def test_lanes_put_runtimes_that_convert_side_by_side_and_keep_jax_paths_home():
    """JAX's paths stay in the first worker, which runs the baseline; the converted ones go, costliest first
    (``Path.cost``), to the worker with the least to do, so that both finish together."""
    r = Runners.__new__(Runners)
    assert Runners.lanes(r, ["eager", "jit", "savedmodel"], 2) == [["eager", "jit", "savedmodel"]]  # one heavy
    assert Runners.lanes(r, ["eager", "jit", "savedmodel", "tflite", "onnx"], 2) == [
        ["eager", "jit"], ["savedmodel", "tflite", "onnx"]]
    # onnx and onnx-ref run one converted model: one lane, where the second reuses the first's conversion
    assert Runners.lanes(r, ["eager", "jit", "export", "f64", "savedmodel", "tflite", "onnx", "onnx-ref", "iree"],
                         2) == [["eager", "jit", "export", "f64", "tflite"], ["savedmodel", "onnx", "onnx-ref", "iree"]]
    assert Runners.lanes(r, ["eager", "onnx", "onnx-ref"], 2) == [["eager", "onnx", "onnx-ref"]]
    assert Runners.lanes(r, ["eager", "savedmodel", "tflite"], 1) == [["eager", "savedmodel", "tflite"]]
    assert Runners.lanes(r, ["eager", "jit", "eager@old"], 2) == [["eager", "jit"], ["eager@old"]]
    # three workers: each converted runtime where the least is queued
    assert Runners.lanes(r, ["eager", "savedmodel", "tflite", "onnx", "iree"], 3) == [
        ["eager"], ["onnx", "iree"], ["savedmodel", "tflite"]]


class _Worker:
    """A worker that runs nothing: it records which specs it was given, a spec of ``gates`` waiting until its
    condition holds, so that the test decides which worker is busy when."""

    def __init__(self, name, ran, gates):
        self.name, self.ran, self.gates = name, ran, gates

    def load(self):
        return None

    def arrays(self):
        return {"x": np.zeros(2)}

    def run(self, spec, timeout):
        from jaxparity.execution.runs import PathRun

        import time

        waited = time.monotonic()
        while spec in self.gates and not self.gates[spec]():
            assert time.monotonic() - waited < 10, f"{spec} waited 10 s"
            time.sleep(0.005)
        self.ran.append((self.name, spec))
        return PathRun(spec, "ok")


class _Runners:
    """``Runners`` as ``_run_lanes`` uses it, with two workers of this environment (``_Worker``)."""

    def __init__(self, gates):
        self.ran, self.twins = [], []
        self.home, self.second = _Worker("first", self.ran, gates), _Worker("second", self.ran, gates)
        self.units = Runners.units

    def extra_runner(self, lane):
        return self.second

    def load(self):
        return None

    def run(self, spec, timeout):
        return self.home.run(spec, timeout)


def test_converted_paths_go_to_whichever_worker_is_free_costliest_first():
    """The lanes are a plan: a worker that is free takes the costliest converted path left. While the first
    worker runs a slow baseline the second takes them all; once the first is free it takes the next one."""
    from jaxparity.comparison import _run_lanes

    specs = ["eager", "jit", "savedmodel", "tflite", "onnx", "onnx-ref", "iree"]
    plan = Runners.lanes(Runners.__new__(Runners), specs, 2)
    assert plan[0] == ["eager", "jit", "onnx", "onnx-ref"]  # planned for the first worker
    # the baseline runs until the second worker has run every converted path
    slow = _Runners({"eager": lambda: sum(w == "second" for w, _ in slow.ran) == 5})
    _, runs = _run_lanes(slow, specs, plan, None, None)
    assert list(runs) == specs
    assert [s for w, s in slow.ran if w == "second"] == ["iree", "savedmodel", "onnx", "onnx-ref", "tflite"]
    assert [s for w, s in slow.ran if w == "first"] == ["eager", "jit"]
    # the second holds iree until the first has run a converted path: the next costliest
    busy = _Runners({"iree": lambda: any(w == "first" and s not in ("eager", "jit") for w, s in busy.ran)})
    _run_lanes(busy, specs, plan, None, None)
    assert ("first", "savedmodel") in busy.ran and ("second", "iree") in busy.ran


def test_explanations_split_over_the_workers_that_ran_beside_the_first():
    """The paths XLA compiles stay in the first worker (one may take another's explanation); converted runtimes,
    by family, go to the twins first, then to whichever worker has the fewest."""
    r = Runners.__new__(Runners)
    r._runners, r.twins = {None: "home"}, ["twin"]
    specs = ["jit", "export", "savedmodel", "tflite", "onnx", "onnx-ref", "iree"]
    assert Runners.explain_lanes(r, specs, "cpu") == [
        ("home", ["jit", "export", "savedmodel", "iree"]), ("twin", ["tflite", "onnx", "onnx-ref"])]
    assert Runners.explain_lanes(r, ["jit", "iree"], "cpu") == [("home", ["jit"]), ("twin", ["iree"])]
    assert Runners.explain_lanes(r, ["onnx", "iree"], None) == [("home", ["iree"]), ("twin", ["onnx"])]
    # a baseline on an accelerator is captured there: a twin holds the host only
    assert Runners.explain_lanes(r, ["jit", "iree"], "tpu") == [("home", ["jit", "iree"])]
    r.twins = []
    assert Runners.explain_lanes(r, ["jit", "iree"], "cpu") == [("home", ["jit", "iree"])]


@pytest.mark.slow
def test_explanations_in_two_workers_are_those_of_one():
    """Explained over two workers (the converted path in the second), every explanation is the one a single
    worker gives, and a fix found on one path is still re-run on the others (``every_path``)."""
    paths = "eager,jit,savedmodel,tflite,iree"
    one = compare_case(CASE, paths=paths, jobs=1, explain=True)
    two = compare_case(CASE, paths=paths, jobs=2, explain=True)

    def said(e):
        notes = [n for n in e.notes if "jaxparity's cache" not in n and "compiled in" not in n]
        return (e.path, e.summary, [(c.cause, c.status) for c in e.causes], [(f.spec, f.verified, f.evidence)
                                                                              for f in e.fixes], e.same_values, notes)

    assert [e.path for e in two.explanations] == [e.path for e in one.explanations] != []
    assert "iree" in [e.path for e in two.explanations]  # explained by the second worker
    assert [said(e) for e in two.explanations] == [said(e) for e in one.explanations]


@pytest.mark.slow
def test_two_workers_give_the_same_result_in_the_same_order():
    paths = "eager,jit,savedmodel,tflite"
    one = compare_case(CASE, paths=paths, jobs=1)
    two = compare_case(CASE, paths=paths, jobs=2)
    assert [p.spec for p in one.paths] == [p.spec for p in two.paths]
    for a, b in zip(one.paths, two.paths):
        assert (a.status, a.verdict) == (b.status, b.verdict), a.spec
        assert [lf.diff.max_ulp if lf.diff else None for lf in a.leaves] == \
            [lf.diff.max_ulp if lf.diff else None for lf in b.leaves], a.spec


def test_a_case_that_draws_other_inputs_each_load_runs_at_home_and_says_so(tmp_path):
    """Weights drawn without a seed differ between the two workers: the second lane runs in the first worker
    (one set of inputs for every path), and the report says the same command would report on other values."""
    case = tmp_path / "unseeded.py"
    case.write_text("import jax.numpy as jnp\nimport numpy as np\n\n\ndef make():\n"
                    "    w = np.random.default_rng().normal(size=(8, 4)).astype(np.float32)\n"
                    "    return (lambda w, x: jnp.tanh(x @ w)), (w, np.ones((2, 8), np.float32))\n")
    result = compare_case(str(case), paths="eager,jit,tflite,onnx-ref", jobs=2)
    assert all(p.status == "ok" for p in result.paths)
    (note,) = [n for n in result.paths[0].notes if "when loaded again" in n]
    assert note.startswith("the case drew other values for arg0 when loaded again"), note
    seeded = compare_case(CASE, paths="eager,jit,tflite,onnx-ref", jobs=2)
    assert not any("when loaded again" in n for n in seeded.paths[0].notes)
