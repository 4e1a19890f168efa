"""Element evidence at a diverging op: what the differing elements share, and who is right,
measured against references computed here independently (numpy float64, exact rationals)."""

import fractions
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

from jaxparity.localize.elements import _ties, element_evidence


def op(name):
    return SimpleNamespace(info=SimpleNamespace(primitive=name))


def correctly_rounded(values64, dtype=np.float32):
    return np.asarray(values64, np.float64).astype(dtype)  # float64 -> float32 is one rounding


def test_log_of_subnormals_names_the_inputs_and_the_wrong_side():
    x = np.array([1e-40, 3e-42, 2.0, 1e-39], np.float32)  # three subnormal float32 inputs
    xla = np.asarray(jax.jit(jnp.log)(x))  # XLA on CPU treats subnormal inputs as zero or worse
    right = correctly_rounded(np.log(x.astype(np.float64)))
    ev = element_evidence(op("log"), [x], xla, right, right, np.log(x.astype(np.float64)))
    names = {c.name: c.count for c in ev.classes}
    differing = int(np.count_nonzero(xla != right))
    if differing:  # on a CPU whose XLA log handles subnormals there is nothing to explain
        assert names.get("subnormal inputs") == differing
        assert ev.baseline_ulp == 0 and ev.path_ulp > 1 and ev.wrong_side() == "path"
        assert ev.path_ulp < 2**10 or "path is wrong" in ev.describe("path", "baseline")


def test_float_to_int_outside_the_range_is_named():
    x = np.array([np.nan, np.inf, -3e9, 1.5], np.float32)
    xla = np.asarray(jax.jit(lambda v: v.astype(jnp.int32))(x))
    other = np.array([np.iinfo(np.int32).max] * 3 + [1], np.int32)  # what TFLite gives
    ev = element_evidence(op("convert_element_type"), [x], other, xla, None, None)
    names = {c.name: c.count for c in ev.classes}
    assert names["outside the range of int32 (NaN, inf or too large)"] == int(np.count_nonzero(other != xla)) > 0
    assert ev.exact_op


def test_exact_rounding_ties_against_exact_rationals():
    rng = np.random.default_rng(3)
    a = rng.uniform(1, 2, 4000).astype(np.float32)  # ulp 2**-23
    b = rng.uniform(3, 4, 4000).astype(np.float32)  # ulp 2**-22: b - a in (1, 3] is a multiple of 2**-23
    exact = a.astype(np.float64) - b.astype(np.float64)  # exact in float64
    got = _ties(exact, np.dtype(np.float32))

    def is_tie(v):
        r = np.float32(v)
        lo, hi = sorted([np.nextafter(r, np.float32(-np.inf)), np.nextafter(r, np.float32(np.inf))])
        f = fractions.Fraction(v)
        return any(f == (fractions.Fraction(float(r)) + fractions.Fraction(float(n))) / 2 for n in (lo, hi))

    want = np.array([is_tie(float(v)) for v in exact])
    np.testing.assert_array_equal(got, want)
    assert want.any()


def test_cancellation_and_example_element():
    a = np.array([1.0, 1e8, 3.0], np.float32)
    b = np.array([1.0 + 2**-20, 1.0, 1.0], np.float32)
    exact = a.astype(np.float64) - b.astype(np.float64)
    right = correctly_rounded(exact)
    off = right.copy()
    off[0] = np.nextafter(off[0], np.float32(1))  # one element one ULP off
    ev = element_evidence(op("sub"), [a, b], off, right, right, exact)
    assert [(c.name, c.count) for c in ev.classes] == [("cancellation (|result| << |operands|)", 1)]
    assert ev.example.index == (0,) and ev.example.inputs == (1.0, float(b[0]))
    assert ev.path_ulp == 1 and ev.baseline_ulp == 0


def test_an_exact_op_that_differs_is_wrong_code():
    x = np.array([1, 2, 3], np.int32)
    ev = element_evidence(op("add"), [x, x], np.array([2, 4, 7], np.int32), np.array([2, 4, 6], np.int32),
                          np.array([2, 4, 6], np.int32), None)
    assert ev.exact_op and ev.wrong_side() == "path"
    assert "wrong code" in ev.describe("jit", "eager")


def test_a_loop_is_judged_by_each_side_error_against_its_exact_result_not_by_ulp_from_its_declared_one():
    """A scan's declared result rounds every op of its body: a side thousands of ULP from it near zero (after
    cancellation) may be the more accurate one. Each side's error against the loop's exact float64 result
    decides; "correctly rounded" and "is wrong" are never said of it (flax sst2's BiLSTM on IREE)."""
    def body(c, x):
        c = jnp.tanh(c * 0.9 + x) - 0.3 * c
        return c, c

    xs = np.linspace(-1, 1, 12, dtype=np.float32).reshape(6, 2)
    c0 = np.zeros(2, np.float32)
    f64 = np.asarray(jax.lax.scan(body, c0, xs)[1], np.float64)  # float32, op by op: the declared rounding
    with jax.enable_x64():
        exact = np.asarray(jax.lax.scan(body, jnp.asarray(c0, jnp.float64), jnp.asarray(xs, jnp.float64))[1])
    declared = f64.astype(np.float32)
    near = (exact + 3e-8).astype(np.float32)  # both within a few float32 roundings of the exact result
    other = (exact - 4e-8).astype(np.float32)
    ev = element_evidence(op("scan"), [c0, xs], near, other, declared, exact)
    assert ev.composite and ev.wrong_side() is None and ev.as_accurate()
    said = ev.describe("iree", "eager")
    assert "against the exact result of the whole op" in said and "as accurate as each other" in said
    assert "correctly rounded" not in said and "wrong" not in said.replace("neither is wrong", "")
    far = (exact + 5e-4).astype(np.float32)  # the path's loop far less accurate than the baseline's
    ev = element_evidence(op("scan"), [c0, xs], far, other, declared, exact)
    assert ev.as_accurate() is False and "iree is the less accurate" in ev.describe("iree", "eager")
    # an op of its own keeps the ULP judgement
    assert element_evidence(op("tanh"), [xs], near, other, declared, exact).as_accurate() is None


def test_an_elementary_function_a_few_ulp_off_is_its_math_library_not_a_departure_from_declared_rounding():
    """No implementation of tanh is required to round it correctly: 3 ULP off is its math library's own
    (flax sst2's LSTM on TFLite), said so; the same few ULP on a multiply is a departure from its rounding."""
    x = np.linspace(0.1, 2, 16, dtype=np.float32)
    right = correctly_rounded(np.tanh(x.astype(np.float64)))
    off = right.copy()
    off[3] = np.nextafter(np.nextafter(np.nextafter(right[3], np.inf), np.inf), np.inf)  # 3 ULP up
    said = element_evidence(op("tanh"), [x], off, right, right, np.tanh(x.astype(np.float64))).describe("tflite", "eager")
    assert "tflite's math library rounds it otherwise, eager's correctly" in said, said
    said = element_evidence(op("mul"), [x, x], off, right, right, None).describe("tflite", "eager")
    assert "departs from the op's declared rounding" in said, said


def test_a_dot_example_names_whose_inputs_and_shows_no_input_elements():
    a = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    b = np.arange(6, dtype=np.float32).reshape(3, 2) / 3
    exact = a.astype(np.float64) @ b.astype(np.float64)
    right = correctly_rounded(exact)
    off = right.copy()
    off[1, 0] = np.nextafter(off[1, 0], np.float32(np.inf))
    ev = element_evidence(op("dot_general"), [a, b], off, right, right, exact)
    assert ev.example.index == (1, 0) and ev.example.inputs == (None, None)  # no one element of a or b gives it
    words = ev.describe("iree", "eager")
    assert "inputs (" not in words, words
    assert words.startswith("on iree's inputs to this op, iree is up to 1 ULP from the correctly rounded result "
                            "and eager 0 ULP"), words
    assert f"e.g. element [1, 0]: iree {off[1, 0]:.9g}" in words, words


def test_a_sum_is_judged_by_its_error_bound_not_by_ulp():
    """A float32 dot of 64 terms summed in order is within Higham's bound everywhere (a correct order) yet
    thousands of ULP from the correctly rounded result where it cancels; a dot of bfloat16-rounded inputs
    (one TPU pass) is far beyond it. The words name the second alone, not "both are far from it"."""
    import ml_dtypes

    r = np.random.default_rng(0)
    a, b = (r.normal(size=(64, 64)).astype(np.float32) for _ in range(2))  # square: a has the output's shape

    def in_order(x, y):
        out = np.zeros((64, 64), np.float32)
        for k in range(64):
            out = (out + x[:, k:k + 1] * y[k:k + 1, :]).astype(np.float32)
        return out

    def bf16(x):
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)

    exact = a.astype(np.float64) @ b.astype(np.float64)
    u = 2.0**-24
    bound = 64 * u / (1 - 64 * u) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) + u * np.abs(exact)
    cpu, tpu = in_order(a, b), in_order(bf16(a), bf16(b))
    assert np.all(np.abs(cpu - exact) <= bound)  # Higham: any order of the sum is within it
    ev = element_evidence(op("dot_general"), [a, b], cpu, tpu, correctly_rounded(exact), exact, 0, bound)
    assert ev.path_ulp > 2**10 and ev.baseline_ulp > 2**10  # by ULP alone both look far off
    assert ev.example.inputs == (None, None) and ev.trigger is None  # a's element is not the output's
    words = ev.describe("jit:device=cpu", "eager")
    assert "both are far" not in words, words
    assert "eager is" in words and "beyond the error bound of this sum, jit:device=cpu within it" in words, words
