"""The conformance suite: its independent oracle, and a stratified sample of JAX's harness corpus.

The sample holds one harness of every (group, dtype) pair of the corpus (the whole corpus runs in
``benchmarks/conformance.py``), in two worker processes. It fails on
any tool error (declared not correctly rounded, or failing where eager runs) and on any false
``equal`` (a verdict of identical/equal where the oracle finds a differing element). Nothing here
depends on the CPU's own numerics: only those two counts are asserted.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from jaxparity.conformance import oracle


def test_oracle_int64_above_2_53_differ() -> None:
    a, b = np.array([2**62], np.int64), np.array([2**62 + 1], np.int64)
    assert oracle.count_differ(a, b) == 1  # equal once squeezed through float64
    assert oracle.ulp_distance(a, b)[0] == 1
    u = np.array([2**64 - 1], np.uint64)
    assert oracle.count_differ(u, u - np.uint64(1)) == 1


def test_oracle_complex_per_component() -> None:
    a = np.array([1.5 + 2j, 1 + 1j], np.complex64)
    b = np.array([1.25 + 7j, 1 + 1j], np.complex64)
    assert oracle.same_values(a, b).tolist() == [False, True]
    assert oracle.count_differ(np.array([1 + 2j]), np.array([1 + 3j])) == 1  # same real part


def test_oracle_zero_signs_and_nans_agree() -> None:
    z = np.array([0.0, np.nan], ml_dtypes.bfloat16)
    assert oracle.same_values(z, np.array([-0.0, np.nan], ml_dtypes.bfloat16)).all()
    assert oracle.count_differ(np.array([np.nan, 1.0], np.float32), np.array([1.0, np.nan], np.float32)) == 2
    assert oracle.same_values(np.array([complex(np.nan, 0)]), np.array([complex(np.nan, 0)])).all()


def test_oracle_ulp_counts_steps_across_zero_and_binades() -> None:
    f32 = np.float32
    tiny = np.array([np.finfo(f32).smallest_subnormal], f32)
    assert oracle.ulp_distance(tiny, -tiny)[0] == 2
    assert oracle.ulp_distance(np.array([1.0], f32), np.array([np.nextafter(f32(1), f32(0))], f32))[0] == 1
    assert oracle.ulp_distance(np.array([np.inf], f32), np.array([np.finfo(f32).max], f32))[0] == 1
    assert oracle.ulp_distance(np.array([1.0], ml_dtypes.bfloat16), np.array([2.0], ml_dtypes.bfloat16))[0] == 128


def test_oracle_rounds_once() -> None:
    # ml_dtypes rounds float64 to bfloat16 through float32: 1 + 2**-8 + 2**-30 becomes 1.0 there.
    assert float(oracle.round_to(np.array([1 + 2**-8 + 2**-30]), ml_dtypes.bfloat16)[0]) == 1 + 2**-7
    assert float(oracle.round_to(np.array([1 + 2**-8]), ml_dtypes.bfloat16)[0]) == 1.0  # tie: to even
    assert float(oracle.round_to(np.array([65520.0]), np.float16)[0]) == np.inf
    assert float(oracle.round_to(np.array([65519.0]), np.float16)[0]) == 65504.0


def test_an_op_without_a_tolerance_of_its_own_gets_jaxs_default() -> None:
    # cholesky, fft, cumsum...: lax_ops() gives them no tolerance, default_tolerance() does (the bar was
    # an AttributeError, and the harness's row "the suite's own classification failed").
    from jaxparity.conformance.accuracy import documented_bar
    from jaxparity.jaxcompat import public_test_util

    bar = documented_bar("no_such_primitive", np.dtype(np.float32))
    assert bar.tol == float(public_test_util().default_tolerance()[np.dtype(np.float32)])
    assert bar.source == "default_tolerance()[float32]"


@pytest.mark.slow
def test_stratified_sample_has_no_tool_error_and_no_false_equal() -> None:
    from jaxparity.conformance import load_corpus, run_suite, stratified, totals
    from jaxparity.conformance.classify import TOOL
    from jaxparity.conformance.corpus import dtype_name

    corpus = load_corpus()
    sample = stratified(corpus)  # one harness per (group, dtype): ~870 of the 5,483
    assert {(h.group_name, dtype_name(h)) for h in sample} == {(h.group_name, dtype_name(h)) for h in corpus}
    outcomes = run_suite(sample, jobs=2)
    t = totals(outcomes)
    tool = [f"{o.fullname}: {o.detail}" for o in outcomes if o.declared == TOOL]
    false_equal = [f"{o.fullname} ({', '.join(o.false_equal)})" for o in outcomes if o.false_equal]
    assert not tool and not false_equal, (
        f"{t.tool_errors} tool error(s):\n  " + "\n  ".join(tool)
        + f"\n{t.false_equal} false equal(s):\n  " + "\n  ".join(false_equal))
