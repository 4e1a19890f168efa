"""The savedmodel-c path: the savedmodel path's SavedModel served by a C program against TensorFlow's
C API. It runs the same graph in the same TensorFlow runtime, so it equals ``savedmodel`` bit for bit;
arrays cross the process boundary as raw bytes, bit-exactly in every dtype."""

import os
import stat

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxparity
from jaxparity.case import load_case
from jaxparity.paths import PathError
from jaxparity.paths.savedmodel import SavedModelPath
from jaxparity.paths.savedmodel_c import SavedModelCPath, server_binary

EXAMPLES = ["conv_bf16.py", "conv_bf16.py:make_report_input", "mlp_bf16.py", "cnn_bf16.py", "transformer_bf16.py"]


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """The path registered, and a fresh binary cache for this module: the first run builds, the
    others reuse."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(jaxparity.paths.PATHS, "savedmodel-c", SavedModelCPath)
        directory = tmp_path_factory.mktemp("xdg-cache")
        mp.setenv("XDG_CACHE_HOME", str(directory))
        yield directory / "jaxparity" / "bin"


def _bits(tree):
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]
    return [(x.dtype, x.shape, x.tobytes()) for x in leaves]


@pytest.mark.slow
def test_the_binary_is_built_once_and_then_reused(cache):
    x = jnp.ones((2,), jnp.float32)
    first = SavedModelCPath()
    first.run(lambda x: x + 1, (x,))
    binaries = sorted(cache.iterdir())
    assert len(binaries) == 1 and binaries[0].name.startswith("tf_c_serve-")  # no partial build left behind
    if any("built now" in n for n in first.notes):
        os.utime(binaries[0], (1_000_000_000, 1_000_000_000))  # a build would give it a new mtime
    mtime = binaries[0].stat().st_mtime
    second = SavedModelCPath()
    second.run(lambda x: x * 2, (x,))
    assert sorted(cache.iterdir()) == binaries and binaries[0].stat().st_mtime == mtime
    assert not any("built now" in n for n in second.notes)
    assert any(str(binaries[0]) in n for n in second.notes)
    assert any("C API" in n and "TensorFlow 2.21.0" in n and "no Python" in n for n in second.notes)


@pytest.fixture(scope="module")
def seed(examples):
    case = load_case(str(examples / "conv_bf16.py"))
    return jaxparity.compare(case.fn, *case.args, paths=[
        "eager", "savedmodel", "savedmodel-c", "savedmodel-c:XLA_FLAGS=--xla_allow_excess_precision=false"])


@pytest.mark.slow
def test_seed_case_equals_the_savedmodel_path_bitwise_and_differs_from_eager(seed):
    c, py = seed.path("savedmodel-c"), seed.path("savedmodel")
    assert c.status == "ok", c.message
    assert c.verdict == py.verdict == "differs"
    for a, b in zip(c.leaves, py.leaves):
        np.testing.assert_array_equal(np.array(a.values), np.array(b.values))
        assert a.diff.max_ulp == b.diff.max_ulp and a.diff.n_differ == b.diff.n_differ


@pytest.mark.slow
def test_seed_case_without_excess_precision_equals_eager(seed):
    p = seed.path("savedmodel-c:XLA_FLAGS=--xla_allow_excess_precision=false")
    assert p.verdict == "identical", p.message
    assert any("XLA_FLAGS=--xla_allow_excess_precision=false" in n for n in p.notes)


@pytest.mark.slow
def test_special_values_and_every_dtype_cross_bit_exactly():
    bits = np.array([0x3F81, 0x0001, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x4049, 0xC2F7], np.uint16)
    x = bits.view(ml_dtypes.bfloat16)  # 1.0078125, a subnormal, -0, inf, -inf, NaN, 3.14, -123.5
    h = np.array([0x0001, 0x8000, 0x7C00, 0x7E00, 0x3C00], np.uint16).view(np.float16)
    f = np.array([1.4e-45, -0.0, np.inf, np.nan, -np.pi], np.float32)
    n = np.array([2**31 - 1, -(2**31), 0], np.int32)
    u = np.array([0, 255, 7], np.uint8)
    b = np.array([True, False, True])

    def fn(x, h, f, n, u, b):
        return {"bf16": x, "wide": x.astype(jnp.float32), "f16": h, "f32": f, "n": n, "big": n.max(),
                "u8": u, "b": b, "any": b.any(), "neg": ~b}

    args = tuple(map(jnp.asarray, (x, h, f, n, u, b)))
    out = SavedModelCPath().run(fn, args)
    want = fn(*(np.asarray(a) for a in args)) | {"big": np.int32(2**31 - 1), "any": np.bool_(True)}
    for key in want:
        got, exp = np.asarray(out[key]), np.asarray(want[key])
        assert got.dtype == exp.dtype and got.shape == exp.shape, key
        assert got.tobytes() == exp.tobytes(), key  # bit for bit: NaN payloads and -0 included
    assert np.asarray(out["bf16"]).dtype == ml_dtypes.bfloat16


@pytest.mark.slow
def test_scalar_and_empty_inputs_and_outputs():
    def fn(x, s, e):
        return {"total": (x * s).sum(), "empty": e * 2, "shape0": jnp.zeros((0, 3), jnp.bfloat16)}

    args = (jnp.arange(3.0), 2.5, jnp.zeros((2, 0), jnp.float32))
    out = SavedModelCPath().run(fn, args)
    assert np.asarray(out["total"]).shape == () and float(out["total"]) == 7.5
    assert np.asarray(out["empty"]).shape == (2, 0) and np.asarray(out["shape0"]).shape == (0, 3)


@pytest.mark.slow
@pytest.mark.parametrize("spec", EXAMPLES)
def test_every_example_equals_the_savedmodel_path_bitwise(examples, spec):
    case = load_case(str(examples / spec))
    assert _bits(SavedModelCPath().run(case.fn, case.args)) == _bits(SavedModelPath().run(case.fn, case.args))


@pytest.mark.slow
def test_a_bad_xla_flag_is_a_clear_failure():
    spec = "savedmodel-c:XLA_FLAGS=--xla_no_such_flag=1"
    result = jaxparity.compare(lambda x: x + 1, jnp.ones(2), paths=["eager", spec])
    p = result.path(spec)
    assert p.verdict == "error" and "C serving process" in p.message
    assert "xla_no_such_flag" in p.message  # TensorFlow's own words about the unknown flag


@pytest.mark.slow
def test_an_error_inside_the_c_program_is_reported_in_its_own_words(monkeypatch):
    from jaxparity.paths import savedmodel_c

    real = savedmodel_c._signature

    def wrong_output(model_dir):
        inputs, outputs = real(model_dir)
        return inputs, {k: "no_such_op:0" for k in outputs}

    monkeypatch.setattr(savedmodel_c, "_signature", wrong_output)
    with pytest.raises(PathError) as raised:
        SavedModelCPath().run(lambda x: x + 1, (jnp.ones(2),))
    assert str(raised.value) == (
        "the C serving process exited with status 1:\n"
        "tf_c_serve: the model has no operation named 'no_such_op' (tensor no_such_op:0)"
    )


def test_a_failed_build_quotes_the_compiler(tmp_path, monkeypatch):
    fake = tmp_path / "fake-cc"
    fake.write_text("#!/bin/sh\necho 'tf_c_serve.c:1:1: error: planted compiler failure' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(PathError, match="planted compiler failure") as raised:
        server_binary()
    assert "building the C serving program" in str(raised.value)
    assert not any((tmp_path / "cache" / "jaxparity" / "bin").iterdir())  # the partial output is gone


def test_without_a_compiler_the_path_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no gcc, cc or clang
    reason = SavedModelCPath().unavailable_reason()
    assert reason and "C compiler" in reason and "gcc" in reason


def test_the_runtime_and_compiler_are_available_here():
    assert SavedModelCPath().unavailable_reason() is None
