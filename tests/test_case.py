"""Loading cases and replacing their inputs from files, bit-exactly."""

import ml_dtypes
import numpy as np
import pytest

from jaxparity.arrayio import ArrayFileError, load_arrays, save_arrays
from jaxparity.case import CaseError, load_case

BF16_CASE = """
import jax.numpy as jnp

def make():
    return (lambda w, x: w * x), ({"w": jnp.ones((2,), jnp.bfloat16)}, jnp.zeros((2,), jnp.float32))
"""


@pytest.fixture
def bf16_case(tmp_path):
    path = tmp_path / "bf16_case.py"
    path.write_text(BF16_CASE)
    return str(path)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_files_round_trip_every_bit(tmp_path, suffix):
    arrays = {"a": np.array([0x3F81, 0x0001, 0x7FC1], np.uint16).view(ml_dtypes.bfloat16),
              "b": np.arange(6, dtype=np.int32).reshape(2, 3), "c": np.array([-0.0, 1e-45], np.float32),
              "scalar": np.array(0x7F80, np.uint16).view(ml_dtypes.bfloat16),  # 0-d bf16 (an intermediate)
              "empty": np.zeros((0, 3), ml_dtypes.bfloat16)}
    save_arrays(tmp_path / f"x{suffix}", arrays)
    back = load_arrays(tmp_path / f"x{suffix}")
    for k, v in arrays.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape
        assert back[k].tobytes() == v.tobytes()


def test_override_by_name_from_safetensors_keeps_bf16_bits(tmp_path, bf16_case):
    w = np.array([0x3F81, 0x0001], np.uint16).view(ml_dtypes.bfloat16)
    save_arrays(tmp_path / "w.safetensors", {"arg0/w": w})
    case = load_case(bf16_case, tmp_path / "w.safetensors")
    assert np.asarray(case.args[0]["w"]).view(np.uint16).tolist() == [0x3F81, 0x0001]
    np.testing.assert_array_equal(np.asarray(case.args[1]), np.zeros(2, np.float32))  # untouched
    assert "w.safetensors (arg0/w)" in case.input_source


def test_override_by_position(tmp_path, bf16_case):
    np.savez(tmp_path / "p.npz", np.ones(2, ml_dtypes.bfloat16) * 3, np.full(2, 7, np.float32))
    case = load_case(bf16_case, tmp_path / "p.npz")
    assert np.asarray(case.args[0]["w"]).tolist() == [3, 3] and np.asarray(case.args[1]).tolist() == [7, 7]


def test_unreadable_files_are_named(tmp_path, bf16_case):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip file")
    with pytest.raises(ArrayFileError, match="junk.npz: not a readable"):
        load_arrays(junk)
    with pytest.raises(CaseError, match="junk.npz: not a readable"):
        load_case(bf16_case, junk)


def test_case_that_fails_to_import_points_at_the_users_line(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import jax\n\nx = 1 / 0\n")
    with pytest.raises(CaseError, match=r"importing the case failed: ZeroDivisionError: division by zero at broken.py:3"):
        load_case(str(bad))
