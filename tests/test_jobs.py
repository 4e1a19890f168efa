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
