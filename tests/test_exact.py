"""An exact program miscompiled (issue 56, item 4): integer arithmetic has one right answer, so where jit gives
other values than eager and the exact reference, it is wrong code in the compiler, the pass whose removal
restores the values named as what sets it off, and the reproducer goes to the compiler's maintainers."""

from __future__ import annotations

import jaxparity
from jaxparity.case import load_case
from conftest import CASES


def test_an_int8_select_dropped_by_the_algebraic_simplifier_is_wrong_code_set_off_by_that_pass():
    case = load_case(f"{CASES / 'exact.py'}:make_int8_square")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "f64"]).explain()
    assert result.path("f64").verdict == "identical"  # eager is the exact reference's values
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    assert v.paths == ("jit",) and v.cause == "wrong-code" and v.layer == "compiler", v
    assert "set off by XLA's algsimp pass" in v.mechanism, v.mechanism
    assert v.right == "eager" or "eager is right" in (v.right_words or ""), (v.right, v.right_words)
    (fix,) = v.holding
    assert "algsimp" in fix.change and fix.outcome == "parity"
    assert v.advice is not None and "report it" in v.advice and "reproducer" in v.advice
    assert not any("algebraic rewrite" in (v.title or "") for v in result.verdicts)
