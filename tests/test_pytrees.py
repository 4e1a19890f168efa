"""Any registered pytree in and out (an NNX module argument, dicts, NamedTuples) on every path:
serializing paths work on the flat leaves and restore the structure."""

import pytest

from conftest import CASES

import jaxparity

EVERY_PATH = ["eager", "jit", "export", "savedmodel", "savedmodel-c", "iree", "onnx", "onnx-ref", "tflite",
              "declared"]


@pytest.mark.slow
def test_nnx_module_argument_through_every_path():
    r = jaxparity.compare_case(str(CASES / "nnx_pytree.py"), paths=EVERY_PATH)
    for p in r.paths:
        assert p.status == "ok", (p.spec, p.message)
        assert [lf.name for lf in p.leaves] == ["out/y", "out/extra/b", "out/extra/norm"], p.spec
    # integer outputs are exact on every path; float ones within the runtimes' own rounding
    assert all(p.leaves[1].diff is None or p.leaves[1].diff.n_differ == 0 for p in r.paths)
    assert r.path("jit").leaves[0].diff.max_abs < 1e-5 and r.path("export").verdict == r.path("jit").verdict
