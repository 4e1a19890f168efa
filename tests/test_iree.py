"""The iree path: the case's StableHLO compiled by IREE (llvm-cpu) and run by IREE's runtime.

IREE's CPU pipeline runs ``iree-convert-bf16-arith-to-f32`` on every dispatch, whatever the CPU: each
bf16 value inside a dispatch becomes f32 and is rounded to bf16 only where it is stored to a bf16
buffer. So IREE skips the bf16 roundings that eager performs between fused ops; these tests pin
that down with a model of the arithmetic that does not depend on the processor.
"""

import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import error_bounds as eb
import jaxparity
from jaxparity.case import load_case
from jaxparity.paths import PathError, PathOptionError, make_path
from jaxparity.paths.iree import BF16_PASS, IreePath

needs_iree = pytest.mark.skipif(IreePath().unavailable_reason() is not None, reason="IREE is not installed")
PROMOTE = "iree:flags=--iree-input-promote-bf16-to-f32"  # IREE's own flag: bf16 becomes f32 at import


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    monkeypatch.setitem(jaxparity.paths.PATHS, "iree", IreePath)


def _values(result, spec):
    return np.array(result.path(spec).leaves[0].values, np.float32)


def _bf16(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


@pytest.fixture(scope="module")
def seed(examples):
    case = load_case(str(examples / "conv_bf16.py"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(jaxparity.paths.PATHS, "iree", IreePath)
        result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "iree", PROMOTE])
    return case, result


@needs_iree
@pytest.mark.slow
def test_seed_case_iree_skips_the_bf16_rounding_of_the_conv_output(seed):
    case, result = seed
    x = np.asarray(case.args[1], np.float32).reshape(-1)
    k = np.asarray(case.args[0]["params"]["Conv_0"]["kernel"], np.float32).reshape(-1)
    iree = result.path("iree")
    assert iree.status == "ok" and iree.verdict == "differs", iree.message
    # eager: the depthwise conv's product is rounded to bf16, then the f32 residual is added.
    np.testing.assert_array_equal(_values(result, "eager"), _bf16(_bf16(x) * _bf16(k)) + x)
    # IREE: same bf16 inputs, but the product stays f32 (exact: 8-bit x 8-bit mantissas) until the add.
    np.testing.assert_array_equal(_values(result, "iree"), _bf16(x) * _bf16(k) + x)
    # Both models hold on every CPU: the bf16 product is exact in f32, so an FMA contraction of the
    # add changes nothing. Skipping that rounding brings IREE nearer the f64 ideal. (jit skips the same
    # rounding on the CPUs seen so far and equals IREE bit for bit; IREE's choice does not depend on the CPU.)
    assert iree.leaves[0].closer_to_f64 == "path"
    assert "IREE 3.13.0" in iree.notes[0] and "--iree-llvmcpu-target-cpu=host" in iree.notes[0]


@needs_iree
@pytest.mark.slow
def test_seed_case_with_bf16_promoted_to_f32_iree_gives_the_f64_ideal_rounded(seed):
    _, result = seed
    assert result.path(PROMOTE).status == "ok"
    # x*k + x in f32: with or without FMA contraction, these two values round to the f64 ideal's (checked).
    np.testing.assert_array_equal(_values(result, PROMOTE), _values(result, "f64"))
    assert not np.array_equal(_values(result, PROMOTE), _values(result, "iree"))


@needs_iree
@pytest.mark.slow
def test_evidence_names_the_pass_that_computes_the_seeds_bf16_arithmetic_in_f32(examples):
    case = load_case(str(examples / "conv_bf16.py"))
    lines = IreePath().evidence(case.fn, case.args)
    assert lines[0].startswith(f"1 of 2 dispatches do bf16 arithmetic: 2 of 2 ops computed in f32 by {BF16_PASS}")
    assert lines[1].endswith(f"2 bf16 arithmetic ops (1 arith.mulf, 1 arith.addf) computed in f32 by {BF16_PASS}; "
                             "bf16-rounding ops: 2 -> 0")
    promoted = IreePath({"flags": "--iree-input-promote-bf16-to-f32"}).evidence(case.fn, case.args)
    assert promoted[0].startswith(f"no bf16 arithmetic reached {BF16_PASS}")
    x = jnp.linspace(-1, 1, 64, dtype=jnp.float32).reshape(8, 8)
    assert IreePath().evidence(lambda x: jnp.tanh(x) @ x.T, (x,)) == []  # a float32 model gets no bf16 notes


@needs_iree
def test_evidence_is_read_from_the_runs_own_compile_and_says_what_a_compile_of_its_own_says(examples, tmp_path,
                                                                                               monkeypatch):
    """The module's own compile prints the IR around the bf16 pass (the module's bytes unchanged by it), and
    ``evidence`` reads that print, in the worker that compiled it or from jaxparity's cache, compiling nothing
    more: the same lines as a compile of its own that stops after the pass."""
    from jaxparity.paths import iree

    case = load_case(str(examples / "mlp_bf16.py"))
    path = IreePath()
    text = iree.stablehlo(case.fn, jax.tree_util.tree_map(jnp.asarray, case.args))
    plain, _ = path._compile_text(text)
    printed, stderr = path._compile_text(text, iree._bf16_dump_flags(text))
    assert printed == plain
    assert iree._DUMP.search(stderr) and f"IR Dump After ConvertBf16ArithToF32Pass: {BF16_PASS}" in stderr
    monkeypatch.setenv("JAXPARITY_CACHE", str(tmp_path))
    monkeypatch.delenv("JAXPARITY_NO_CACHE", raising=False)
    iree._BF16_IR.clear()
    path.run(case.fn, case.args)
    compiles = []
    monkeypatch.setattr(IreePath, "_compile_text", lambda self, *a: compiles.append(a) or plain)
    iree._BF16_IR.clear()  # another worker: read from the cache entry
    from_run = IreePath().evidence(case.fn, case.args)
    assert compiles == []
    monkeypatch.undo()
    monkeypatch.setenv("JAXPARITY_NO_CACHE", "1")
    iree._BF16_IR.clear()
    assert IreePath().evidence(case.fn, case.args) == from_run
    assert from_run[0].startswith("3 of 8 dispatches do bf16 arithmetic")


@needs_iree
@pytest.mark.slow
def test_evidence_on_a_bf16_mlp_counts_the_matmul_fmas(examples):
    case = load_case(str(examples / "mlp_bf16.py"))
    lines = IreePath().evidence(case.fn, case.args)
    assert lines[0].startswith("3 of 8 dispatches do bf16 arithmetic")
    assert all("vector.fma" in ln and f"computed in f32 by {BF16_PASS}" in ln for ln in lines[1:])


@needs_iree
@pytest.mark.slow
@pytest.mark.parametrize("spec", ["conv_bf16.py", "conv_bf16.py:make_report_input", "mlp_bf16.py", "cnn_bf16.py",
                                  "transformer_bf16.py"])
def test_every_example_runs_with_the_outputs_of_eager(examples, spec):
    case = load_case(str(examples / spec))
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "iree"])
    iree, eager = result.path("iree"), result.path("eager")
    assert iree.status == "ok", iree.message
    assert [(lf.name, lf.dtype, lf.shape) for lf in iree.leaves] == [(lf.name, lf.dtype, lf.shape)
                                                                    for lf in eager.leaves]
    assert iree.verdict == "differs"  # every example has bf16 arithmetic that IREE keeps in f32


def _outputs(result, spec):
    """A path's raw output arrays by leaf name (the f64 path's are float64)."""
    return {name: np.asarray(v, np.float64) for name, v in result._source["runs"][spec].outputs}


def _f32_function_bounds(x, w, b):
    """The f64 value of each output of the f32 function below and a bound on the error of any float32
    evaluation of it, whatever the summation order, vector width or FMA contraction (tests/error_bounds.py)."""
    x, w, b = (np.asarray(a, np.float64) for a in (x, w, b))
    # h = tanh(x @ w + b): the 33-term sum within gamma_33 * (sum|x_i w_i| + |b|); tanh' = 1 - tanh^2 <= 1
    # (its condition number |z tanh'(z) / tanh(z)| <= 1 everywhere) plus LIB_ULP for the library tanh.
    h = eb.elementwise(eb.dense(eb.Bounded.exact(x), w, b), np.tanh, lipschitz=1.0)
    # softmax over 16: inputs off by at most d move each output by a factor within exp(+-2d); then
    # h_j - max (|.| <= 2: 2u), exp (LIB_ULP ULP) on numerator and every term, the 15 additions of
    # positive terms (gamma_15) and the division, possibly by a reciprocal and a product (gamma_2).
    e = np.exp(h.value - h.value.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    term = (2 + 2 * eb.LIB_ULP) * eb.U32
    rel = np.expm1(2 * h.err.max(-1, keepdims=True)) + 2 * term + eb.gamma(15) + eb.gamma(2)
    softmax = eb.Bounded(s, s * rel * (1 + rel))
    # mean of 128: the mean of the inputs' errors plus the 127 additions (and the exact /128) in any order.
    mean = eb.Bounded(h.value.mean(), h.err.mean() + eb.gamma(128) * h.magnitude.mean())
    exp = eb.elementwise(eb.Bounded.exact(x), np.exp, lipschitz=0.0)  # exact inputs: the library alone
    log1p = eb.elementwise(eb.Bounded.exact(np.abs(x)), np.log1p, lipschitz=0.0)
    return {"out/h": h, "out/softmax": softmax, "out/mean": mean, "out/exp": exp, "out/log1p": log1p}


@needs_iree
def test_f32_functions_agree_with_jit_within_their_error_bounds():
    keys = jax.random.split(jax.random.key(0), 3)
    x, w, b = (jax.random.normal(keys[0], (8, 32)), jax.random.normal(keys[1], (32, 16)) / 6,
               jax.random.normal(keys[2], (16,)))

    def fn(x, w, b):
        h = jnp.tanh(x @ w + b)
        return {"h": h, "softmax": jax.nn.softmax(h, axis=-1), "exp": jnp.exp(x), "log1p": jnp.log1p(jnp.abs(x)),
                "mean": h.mean()}

    result = jaxparity.compare(fn, x, w, b, paths=["jit", "iree"], baseline="jit")
    assert result.path("iree").status == "ok", result.path("iree").message
    # Tiling and summation order follow the CPU (IREE targets the host CPU; on AVX-512 the tanh of a
    # 32-term dot product near 0.0032 differs from jit by 385 ULP, on AVX2 by none), so no ULP count
    # is asserted: each path is within the error bound of the computation from the f64 ideal, and
    # the two paths within the sum of their bounds of each other.
    bounds, ideal = _f32_function_bounds(x, w, b), _outputs(result, "f64")
    jit, iree = _outputs(result, "jit"), _outputs(result, "iree")
    assert set(bounds) == set(ideal) == set(jit) == set(iree)
    for name, bound in bounds.items():
        np.testing.assert_allclose(ideal[name], bound.value, rtol=1e-12, atol=1e-300)  # the f64 path is the ideal
        for spec, got in (("jit", jit), ("iree", iree)):
            eb.assert_within(got[name], ideal[name], bound.err, f"{spec} {name} vs f64")
        eb.assert_within(iree[name], jit[name], 2 * bound.err, f"iree {name} vs jit")
    ulp = {lf.name: lf.diff.max_ulp for lf in result.path("iree").leaves}
    assert not result.path("iree").passed or max(ulp.values()) == 0  # 'differs' whenever a bit differs


@needs_iree
def test_bf16_inputs_and_outputs_cross_bit_exactly_and_nan_from_arithmetic_is_canonical():
    bits = np.array([0x3F81, 0x0001, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x4049, 0xC2F7, 0x7F81, 0xFFC1], np.uint16)
    x = bits.view(ml_dtypes.bfloat16)  # 1.0078125, a subnormal, -0, inf, -inf, NaN, 3.14, -123.5, sNaN, -NaN
    ints = np.array([2**31 - 1, -(2**31)], np.int32)

    def fn(x, n, flags):
        return {"same": x, "wide": x.astype(jnp.float32), "neg": -x, "n": n, "flags": flags}

    out = IreePath().run(fn, (jnp.asarray(x), jnp.asarray(ints), jnp.asarray([True, False])))
    assert np.asarray(out["same"]).dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(np.asarray(out["same"]).view(np.uint16), bits)
    wide = np.asarray(out["wide"]).view(np.uint32)
    np.testing.assert_array_equal(wide[:8], x[:8].astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(np.asarray(out["n"]), ints)
    np.testing.assert_array_equal(np.asarray(out["flags"]), [True, False])
    neg = np.asarray(out["neg"]).view(np.uint16)
    np.testing.assert_array_equal(neg[:5], bits[:5] ^ 0x8000)
    # IREE computes -x in f32 and rounds back with its own truncf, which returns every NaN as +qNaN
    # 0x7FC0 (XLA flips the sign bit: 0xFFC0 for -0x7FC0).
    np.testing.assert_array_equal(neg[[5, 8, 9]], [0x7FC0, 0x7FC0, 0x7FC0])


@needs_iree
def test_unused_arguments_python_scalars_and_prng_keys_reach_main():
    def fn(key, x, unused, scale):
        # uniform, not normal: its draw is exact (random bits as the mantissa of [1, 2), minus 1), so
        # x + u is one rounding and the same bits on every path and CPU; normal's erf_inv is a
        # polynomial whose last bits follow each compiler's FMA contraction.
        return {"noisy": x + jax.random.uniform(key, x.shape), "scaled": x * scale}

    result = jaxparity.compare(fn, jax.random.key(0), jnp.arange(3.0), jnp.ones(2), 2.5, paths=["eager", "iree"])
    iree = result.path("iree")
    assert iree.status == "ok", iree.message  # Shardy's sdy.sharding_constraint on the key was removed
    assert [(lf.name, lf.shape) for lf in iree.leaves] == [("out/noisy", (3,)), ("out/scaled", (3,))]
    assert iree.verdict == "identical", [lf.diff for lf in iree.leaves]  # the same key: the same draw


def test_unavailable_names_the_pip_command(monkeypatch):
    for module in ("iree.compiler", "iree"):
        with monkeypatch.context() as mp:
            mp.setitem(sys.modules, module, None)
            reason = make_path("iree").unavailable_reason()
            assert reason and "pip install 'jaxparity[iree]'" in reason and "iree-base-compiler" in reason
    monkeypatch.setitem(sys.modules, "iree.runtime", None)
    result = jaxparity.compare(lambda x: x + 1, jnp.ones(2), paths=["eager", "iree"])
    assert result.path("iree").status == "unavailable" and "jaxparity[iree]" in result.path("iree").message


@needs_iree
def test_an_op_iree_rejects_is_a_path_error_with_iree_s_diagnostic():
    def fn(x):  # on CPU, JAX lowers cholesky to a LAPACK custom call that only XLA can run
        return jnp.linalg.cholesky(x @ x.T + 3 * jnp.eye(3))

    with pytest.raises(PathError) as info:
        IreePath().run(fn, (jnp.ones((3, 3)),))
    message = str(info.value)
    assert message.startswith("IREE could not compile the case (op stablehlo.custom_call, "
                              "call_target_name lapack_spotrf_ffi)")
    assert "error: failed to legalize operation 'stablehlo.custom_call'" in message
    result = jaxparity.compare(fn, jnp.ones((3, 3)), paths=["eager", "iree"])
    assert result.path("iree").verdict == "error" and "lapack_spotrf_ffi" in result.path("iree").message


# What iree-compile 3.13 wrote when it crashed on diffrax's while loops (benchmarks/models/diffrax_neural_ode.py)
CRASH = """Error invoking IREE compiler tool iree-compile
Error code: -11
Diagnostics:
Please report issues to https://github.com/iree-org/iree/issues and include the crash backtrace.
Stack dump:
0.\tProgram arguments: /venv/iree/compiler/_mlir_libs/iree-compile - --iree-input-type=stablehlo
 #0 0x00007f7427d5a0ab llvm::sys::PrintStackTrace(llvm::raw_ostream&, int) Signals.cpp:0:0
 #4 0x00007f7421f8be44 __memcpy_avx512_unaligned_erms ./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:837:0
 #5 0x00007f742cd892ab mlir::detail::ConversionPatternRewriterImpl::applySignatureConversion(mlir::Block*, \
mlir::TypeConverter const*, mlir::TypeConverter::SignatureConversion&) DialectConversion.cpp:0:0
 #7 0x00007f742a1b36a5 mlir::iree_compiler::(anonymous namespace)::ScfWhileOpConversion::matchAndRewrite(\
mlir::scf::WhileOp, mlir::scf::WhileOpGenericAdaptor<llvm::ArrayRef<mlir::ValueRange> >, \
mlir::ConversionPatternRewriter&) const Patterns.cpp:0:0


Invoked with:
 iree-compile -"""


def test_a_crash_of_iree_compile_names_the_signal_and_iree_s_frame_not_the_stack_dump_header():
    from jaxparity.paths.iree import _diagnostic

    message = _diagnostic(RuntimeError(CRASH))
    assert message.startswith("iree-compile crashed (a segmentation fault) in "
                              "ScfWhileOpConversion::matchAndRewrite (scf.while): a bug of IREE's compiler"), message
    assert "Program arguments" not in message


@needs_iree
def test_flags_and_options_reach_iree_and_bad_ones_are_clear():
    x = jnp.ones((2,), jnp.float32)
    result = jaxparity.compare(lambda x: x + 1, x, paths=["eager", "iree:flags=--iree-no-such-flag",
                                                          "iree:target_cpu=generic,driver=local-sync"])
    bad = result.path("iree:flags=--iree-no-such-flag")
    assert bad.verdict == "error" and "Unknown command line argument '--iree-no-such-flag'" in bad.message
    good = result.path("iree:target_cpu=generic,driver=local-sync")
    assert good.verdict == "identical" and "driver local-sync" in good.notes[0]
    assert "--iree-llvmcpu-target-cpu=generic" in good.notes[0]
    with pytest.raises(PathOptionError, match="no option 'cpu'"):
        make_path("iree:cpu=host")
    path = make_path("iree:cpu_features=+avx2 +fma,flags=-a -b")
    assert path.compile_flags()[2:] == ["--iree-llvmcpu-target-cpu-features=+avx2,+fma", "-a", "-b"]


@needs_iree
@pytest.mark.slow
def test_no_advice_beside_a_model_change_whose_rerun_changed_nothing(examples):
    """round_like_declared re-run on IREE changes nothing (IREE computes bf16 in float32 either way): no cause's
    advice to try it is added after that re-run's own line (it contradicted it, on GPT-2 and here)."""
    case = load_case(str(examples / "transformer_bf16.py"))
    (e,) = jaxparity.compare(case.fn, *case.args, paths=["eager", "iree"]).explain().explanations
    assert any((f.spec or "").endswith("[fixed model]") and f.rerun is not None and f.rerun.outcome == "no change"
               for f in e.fixes), e.fixes
    assert "round_like_declared(fn) was tried and held" not in e.summary, e.summary


def _attention(q, k, v):
    return jax.nn.dot_product_attention(q, k, v)  # the user's line


@needs_iree
def test_a_refused_op_is_named_in_the_users_code_by_its_types():
    """IREE refuses the bf16 dot_general of jax.nn.dot_product_attention (it carries a dot algorithm; found on
    flax's NNX miniGPT): its diagnostic prints the op with its operand and result types, which place it in the
    program as the user's op and line."""
    import re

    x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 16, 4, 8)), jnp.bfloat16)
    result = jaxparity.compare(_attention, x, x, x, paths=["eager", "iree"])
    p = result.path("iree")
    assert p.status == "error" and "stablehlo.dot_general" in p.message, p.message
    said = re.search(r"\(the op IREE refuses, in your code: #(\d+) dot_general at ([^,]+)", p.message)
    assert said and said[2].endswith(f"test_iree.py:{_attention.__code__.co_firstlineno + 1}"), p.message
    from jaxparity.localize.program import flatten

    op = flatten(_attention, (x, x, x)).ops[int(said[1])]
    assert op.info.primitive == "dot_general" and op.eqn.params.get("preferred_element_type") is not None
    # the experiment: the same module without dot algorithms compiles, so the algorithm is what IREE refuses
    assert "carries a dot algorithm (bf16 x bf16 -> f32" in p.message, p.message
    assert "the same module without dot algorithms compiles" in p.message
    assert "BF16_BF16_F32" in str(op.eqn.params["precision"])
