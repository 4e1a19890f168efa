"""Which parameter of the carrying op a converter loses, by ablation (``explain.mechanism.ablation``): JAX's op
re-bound with each parameter changed alone, on the op's captured inputs, against the path's own values."""

from __future__ import annotations

import numpy as np
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


def test_a_fix_rerun_on_the_program_bound_plainly_says_so_and_an_output_no_carrier_reaches_is_said():
    """glu's product flushed by eager (DAZ) carries out/0; out/1 differs too (jax2onnx's whole-call LogSoftmax on
    onnx.reference), and no carrier reaches it: the verdict says so. The flush fix is re-run as the program bound
    primitive by primitive, which converts log_softmax op by op, so the re-run also measured that: the fix says
    both changes, and a compare of the case with both made agrees."""
    import jax

    case = load_case(f"{CASES / 'converters.py'}:make_glu_and_log_softmax")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "onnx-ref"]).explain()
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    assert set(v.outputs) == {"out/0", "out/1"}, v.outputs
    (also,) = [n for n in v.notes if n.startswith("also differs")]
    assert "out/1: 3 of 16 elements" in also and "out/0" not in also, also
    held = [f for f in v.fixes if f.outcome == "parity"]
    assert held and "with the library calls at" in held[0].change and "written out from JAX's own primitives too" \
        in held[0].change, held

    def both_changes(x, z):  # the flush at glu's product, and log_softmax from JAX's own primitives
        a, g = jax.numpy.split(x, 2, axis=-1)
        s = jax.nn.sigmoid(g)
        s = jax.numpy.where(jax.numpy.abs(s) < np.finfo(np.float32).tiny, 0.0, s)
        shifted = z - jax.lax.stop_gradient(z.max(axis=-1, keepdims=True))
        return a * s, shifted - jax.numpy.log(jax.numpy.sum(jax.numpy.exp(shifted), axis=-1, keepdims=True))

    again = jaxparity.compare(both_changes, *case.args, paths=["eager", "onnx-ref"])
    assert not [v for v in again.verdicts if v.kind == "divergence" and "onnx-ref" in v.paths], again.verdicts


def test_a_call_lowered_whole_whose_primitives_do_not_convert_is_still_named_by_its_arguments():
    """jax2onnx converts jnp.digitize whole and cannot convert its primitives (a scan), so no per-op view and no
    from-primitives fix: the call's own arguments, with NaN read as −inf, give onnx's values bit for bit, and the
    verdict says so instead of "another lowering or kernel"."""
    case = load_case(f"{CASES / 'converters.py'}:make_digitize_nan")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "onnx"]).explain()
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    assert v.title == "a call the converter lowers whole, otherwise", (v.title, v.mechanism)
    assert "NaN in x read as -inf" in v.mechanism and "bit for bit" in v.mechanism, v.mechanism
    # by hand: JAX's call with NaN replaced by -inf gives onnx's values
    import jax.numpy as jnp

    from jaxparity.execution.inprocess import run_in_process
    from jaxparity.paths import make_path

    (x,) = case.args
    by_hand = np.asarray(case.fn(jnp.where(jnp.isnan(x), -jnp.inf, x)))
    onnx = np.asarray(run_in_process(make_path("onnx"), case.fn, case.args).outputs[0][1])
    np.testing.assert_array_equal(by_hand, onnx)
    assert not np.array_equal(np.asarray(case.fn(x)), onnx)
