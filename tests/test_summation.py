"""The order a runtime adds a sum in, measured on that runtime (``explain.mechanism.summation``: FPRev's probe):
each usual order is recovered from its own probe, each installed runtime's order is read off its own kernel and
reproduces what it computes on other data, and the ill-conditioned verdict says both sides' orders."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import jaxparity
from jaxparity.case import load_case
from jaxparity.execution.inprocess import run_in_process
from jaxparity.explain.mechanism.summation import _usual, describe, evaluate, order_of, probe, tree_of
from jaxparity.paths import make_path
from conftest import CASES


@pytest.mark.parametrize("n", [3, 6, 37, 100])
def test_every_usual_order_is_recovered_from_its_own_probe(n):
    """The probe's row sums, computed in a known order, give that order's tree back, named as it was built."""
    rows, pairs = probe(n)
    for words, tree in _usual(n):
        back = tree_of(n, evaluate(tree, rows), pairs)
        assert back is not None, words
        assert describe(back, n) == describe(tree, n), words  # the same shape: the first usual order with it


def test_sums_that_are_no_fixed_tree_are_said_so():
    """Row sums accumulated wider (float64 here) keep every one: no tree of rounded additions describes them."""
    rows, pairs = probe(8)
    assert tree_of(8, rows.astype(np.float64).sum(axis=1), pairs) is None


@pytest.mark.parametrize("spec", ["eager", "tflite", "onnx-ref", "iree"])
def test_a_runtimes_order_read_off_its_kernel_reproduces_its_sums_of_other_data(spec):
    """The tree the probe reads off a runtime gives its sums of random rows of mixed magnitudes bit for bit,
    where another order does not (the data tell the orders apart)."""
    n = 37
    order = order_of(spec, n, np.float32)
    assert not isinstance(order, str) and order.tree is not None, order
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((64, n)) * np.exp(rng.uniform(-8, 8, (64, n)))).astype(np.float32)
    r = run_in_process(make_path(spec), lambda v: jnp.sum(v, axis=-1), (x,))
    got = np.asarray(r.outputs[0][1])
    np.testing.assert_array_equal(evaluate(order.tree, x), got)
    others = [t for w, t in _usual(n) if w != order.words]
    assert any(not np.array_equal(evaluate(t, x), got) for t in others)


def test_the_ill_conditioned_verdict_says_how_each_side_adds_the_sum_it_amplifies():
    """flax's one-pass variance on tflite: tflite's SUM adds the 6 terms of a row in 4 lanes then pairwise, eager in
    order; each order, read off the runtime's kernel, gives that side's values of the sum bit for bit."""
    case = load_case(f"{CASES / 'toward.py'}:make_fast_variance_overflow")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "tflite"]).explain()
    (e,) = result.explanations
    (c,) = [c for c in e.causes if c.cause == "ill-conditioned"]
    assert c.status == "confirmed", c.evidence
    assert "tflite adds the 6 terms of each row in 4 interleaved lanes" in c.evidence, c.evidence
    assert "eager adds the 6 terms of each row in order" in c.evidence, c.evidence
    assert c.evidence.count("bit for bit") == 2, c.evidence
