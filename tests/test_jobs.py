"""One comparison on several cores (issue 13): `--jobs N` runs paths that convert into other runtimes in
their own workers at the same time; results and their order are those of one worker."""

from pathlib import Path

import pytest

from jaxparity.comparison import compare_case
from jaxparity.execution.runners import Runners

CASE = str(Path(__file__).parents[1] / "examples" / "conv_bf16.py")


def test_lanes_put_runtimes_that_convert_side_by_side_and_keep_jax_paths_home():
    r = Runners.__new__(Runners)
    assert Runners.lanes(r, ["eager", "jit", "savedmodel"], 2) == [["eager", "jit", "savedmodel"]]  # one heavy
    assert Runners.lanes(r, ["eager", "jit", "savedmodel", "tflite", "onnx"], 2) == [
        ["eager", "jit", "savedmodel", "onnx"], ["tflite"]]
    # onnx and onnx-ref run one converted model: one lane, where the second reuses the first's conversion
    assert Runners.lanes(r, ["eager", "jit", "savedmodel", "tflite", "onnx", "onnx-ref", "iree"], 2) == [
        ["eager", "jit", "savedmodel", "onnx", "onnx-ref"], ["tflite", "iree"]]
    assert Runners.lanes(r, ["eager", "onnx", "onnx-ref"], 2) == [["eager", "onnx", "onnx-ref"]]
    assert Runners.lanes(r, ["eager", "savedmodel", "tflite"], 1) == [["eager", "savedmodel", "tflite"]]
    assert Runners.lanes(r, ["eager", "jit", "eager@old"], 2) == [["eager", "jit"], ["eager@old"]]


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
