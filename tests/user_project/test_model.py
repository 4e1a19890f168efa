"""The parity tests a user writes: one fails (jit is not bit-identical to eager), one passes."""

from model import example_input, softmax_bf16

from jaxparity.testing import assert_parity


def test_softmax_jit_matches_eager_exactly():
    assert_parity(softmax_bf16, example_input(), paths=("eager", "jit"))


def test_softmax_jit_without_excess_precision_matches_eager():
    assert_parity(softmax_bf16, example_input(), paths=("eager", "jit:xla_allow_excess_precision=false"))
