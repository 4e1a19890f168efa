"""Compiler evidence: which declared bf16 results XLA keeps in f32, where in the source, and which pass.

The widened ops found here are checked against what really happens on this CPU: the seed case and
the softmax differ between jit and eager, and with ``xla_allow_excess_precision=false`` (eager's
numbers) the evidence must be empty, so these tests can fail in both directions.
"""

import dataclasses
import glob
import json
import os
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from jaxparity.explain.evidence.hlo import (CompilerEvidence, compiler_evidence, lowered_stablehlo, optimized_hlo)

NO_EXCESS = {"xla_allow_excess_precision": False}


class Foo(nn.Module):
    dtype: object = jnp.float32

    @nn.compact
    def __call__(self, h):
        y = nn.Conv(2, kernel_size=(1,), strides=1, padding=0, feature_group_count=2, use_bias=False, dtype=self.dtype)(h)
        return y + h


CONV_LINE = next(n for n, line in enumerate(Path(__file__).read_text().splitlines(), 1)
                 if line.strip().startswith("y = nn.Conv("))


def _seed():
    layer = Foo(dtype=jnp.bfloat16)
    v = {"params": {"Conv_0": {"kernel": jnp.asarray([[[0.25436434, 0.8453059]]])}}}
    x = jax.random.normal(jax.random.key(1729), (2,)).reshape(1, 1, -1)
    return (lambda h: layer.apply(v, h)), (x,)


def _softmax(x):
    return jax.nn.softmax(x.astype(jnp.bfloat16))


SOFTMAX_ARGS = (jax.random.normal(jax.random.key(0), (8, 128)) * 3,)


@pytest.fixture(scope="module")
def seed_evidence() -> CompilerEvidence:
    fn, args = _seed()
    return compiler_evidence(fn, args)


def test_seed_conv_is_widened_at_the_users_line(seed_evidence):
    fn, args = _seed()
    assert not np.array_equal(jax.jit(fn)(*args), fn(*args))  # the divergence being explained
    print(json.dumps(dataclasses.asdict(seed_evidence), indent=1))
    assert seed_evidence.path == "jit" and seed_evidence.declared_narrow_ops >= 2
    [w] = seed_evidence.widened
    assert (w.primitive, w.declared_dtype, w.computed_dtype) == ("conv_general_dilated", "bfloat16", "float32")
    assert w.op_name.endswith("/Foo/Conv_0/conv_general_dilated")
    assert w.source is not None and w.source.endswith(f"test_hlo.py:{CONV_LINE}")  # not flax's line
    assert "f32[" in w.hlo_line and "conv_general_dilated" in w.hlo_line and len(w.hlo_line) <= 240


def test_seed_removing_pass_is_a_real_dumped_pass(seed_evidence, tmp_path):
    [w] = seed_evidence.widened
    print("removed_by_pass:", w.removed_by_pass)
    assert w.removed_by_pass
    fn, args = _seed()
    jax.jit(fn).lower(*args).compile(compiler_options={"xla_dump_to": str(tmp_path), "xla_dump_hlo_pass_re": ".*"})
    assert any(f".after_{w.removed_by_pass}." in p.name for p in tmp_path.iterdir())


def test_without_excess_precision_nothing_is_widened():
    fn, args = _seed()
    compiled = jax.jit(fn).lower(*args).compile(compiler_options=NO_EXCESS)
    np.testing.assert_array_equal(compiled(*args), fn(*args))  # eager's numbers
    evidence = compiler_evidence(fn, args, compiler_options=NO_EXCESS, path="jit:xla_allow_excess_precision=false")
    assert evidence.widened == () and evidence.declared_narrow_ops >= 2
    assert evidence.path == "jit:xla_allow_excess_precision=false"


def test_f32_only_function_declares_nothing_narrow():
    evidence = compiler_evidence(lambda x: jnp.tanh(x) * 2 + x, (jnp.linspace(-1, 1, 16),))
    assert evidence.declared_narrow_ops == 0 and evidence.widened == ()


def test_bf16_softmax_exp_is_widened():
    assert not np.array_equal(jax.jit(_softmax)(*SOFTMAX_ARGS), _softmax(*SOFTMAX_ARGS))
    evidence = compiler_evidence(_softmax, SOFTMAX_ARGS)
    print(json.dumps(dataclasses.asdict(evidence), indent=1))
    assert "exp" in {w.primitive for w in evidence.widened}
    assert all(w.removed_by_pass for w in evidence.widened)
    assert all(w.source and w.source.split(":")[0].endswith("test_hlo.py") for w in evidence.widened)
    assert compiler_evidence(_softmax, SOFTMAX_ARGS, compiler_options=NO_EXCESS).widened == ()


def test_only_the_rounding_that_is_dropped_is_reported():
    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Dense(32, dtype=jnp.bfloat16)(x))  # relu reads the rounded bf16 result
            return nn.Dense(4, dtype=jnp.bfloat16)(x).astype(jnp.float32) + 1.0

    model, x = MLP(), jax.random.normal(jax.random.key(0), (8, 16))
    params = model.init(jax.random.key(1), x)
    evidence = compiler_evidence(lambda x: model.apply(params, x), (x,), passes=False)
    assert [w.op_name.split("/MLP/")[1] for w in evidence.widened] == ["Dense_1/dot_general"]
    assert evidence.widened[0].removed_by_pass is None and any("passes=False" in n for n in evidence.notes)


def test_export_call_gives_the_same_widened_ops_as_jit(seed_evidence):
    fn, args = _seed()
    restored = jax.export.deserialize(jax.export.export(jax.jit(fn))(*args).serialize())
    evidence = compiler_evidence(restored.call, args, path="export")
    assert [w.primitive for w in evidence.widened] == [w.primitive for w in seed_evidence.widened]
    [w] = evidence.widened
    assert "call_exported" in w.op_name and w.op_name.endswith("/Foo/Conv_0/conv_general_dilated")
    assert w.source == seed_evidence.widened[0].source
    assert w.removed_by_pass == seed_evidence.widened[0].removed_by_pass


def test_texts_and_no_leftover_dump_directories():
    fn, args = _seed()
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "jaxparity-hlo-*")))
    compiler_evidence(fn, args)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "jaxparity-hlo-*"))) == before
    assert "loc(" in lowered_stablehlo(fn, args) and "stablehlo.convolution" in lowered_stablehlo(fn, args)
    text = optimized_hlo(fn, args, NO_EXCESS)
    assert 'op_name="jit(' in text and "bf16[" in text
