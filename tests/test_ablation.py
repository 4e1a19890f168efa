"""Which parameter of the carrying op a converter loses, by ablation (``explain.mechanism.ablation``): JAX's op
re-bound with each parameter changed alone, on the op's captured inputs, against the path's own values."""

from __future__ import annotations

from jax import lax

import jaxparity
from jaxparity.case import load_case
from jaxparity.explain.mechanism.ablation import variants
from conftest import CASES


def test_each_kind_of_parameter_has_its_other_values():
    assert list(variants("reverse", False, 2)) == [True]
    rounding = list(variants("rounding_method", lax.RoundingMethod.AWAY_FROM_ZERO, 1))
    assert lax.RoundingMethod.TO_NEAREST_EVEN in rounding and lax.RoundingMethod.AWAY_FROM_ZERO not in rounding
    assert list(variants("axes", (1,), 3)) == [(), (0, 1, 2)]
    assert list(variants("jaxpr", None, 1)) == [] and list(variants("new_dtype", None, 1)) == []


def test_a_rounding_method_the_converter_loses_is_named_with_the_value_it_computes():
    case = load_case(f"{CASES / 'converters.py'}:make_round")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "onnx"]).explain()
    (e,) = result.explanations
    (c,) = [c for c in e.causes if c.cause == "parameter-ignored"]
    assert c.status == "confirmed" and c.layer == "converter", c
    assert c.evidence.startswith("jax2onnx ignores rounding_method of round: JAX's round with "
                                 "rounding_method=TO_NEAREST_EVEN gives onnx's values"), c.evidence
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    assert v.layer == "converter" and v.holding, v
