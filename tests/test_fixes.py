"""round_like_declared: reduce_precision after every narrow-float result makes compiled paths
equal eager bit for bit, with no XLA flag; write_fixed_case writes that fix as a case file."""

from __future__ import annotations

import importlib.util
import inspect
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn
from jax import lax

from jaxparity.fixes import inserted_roundings, round_like_declared, write_fixed_case
from jaxparity.paths import make_path

bf16, f32 = jnp.bfloat16, jnp.float32


def run(spec, fn, args):
    return make_path(spec).run(fn, tuple(args))


def bits(tree):
    """Each leaf's raw bytes (so -0.0 != 0.0 and NaN payloads count), with shape and dtype."""
    return [(np.asarray(x).dtype, np.asarray(x).shape, np.asarray(x).tobytes())
            for x in jax.tree_util.tree_leaves(tree)]


def same(a, b):
    return jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b) and bits(a) == bits(b)


def primitives(closed):
    """Every primitive name in a jaxpr, nested jaxprs included."""
    names = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            names.append(eqn.primitive.name)
            for v in eqn.params.values():
                for u in v if isinstance(v, tuple) else (v,):
                    if isinstance(u, jax.extend.core.ClosedJaxpr):
                        walk(u.jaxpr)
                    elif isinstance(u, jax.extend.core.Jaxpr):
                        walk(u)

    walk(closed.jaxpr)
    return names


# ---------------------------------------------------------------------------- seed case
class Foo(nn.Module):
    dtype: object = jnp.float32

    @nn.compact
    def __call__(self, h):
        y = nn.Conv(2, kernel_size=(1,), strides=1, padding=0, feature_group_count=2, use_bias=False,
                    dtype=self.dtype)(h)
        return y + h


@pytest.fixture(scope="module")
def seed():
    layer = Foo(dtype=jnp.bfloat16)
    v = {"params": {"Conv_0": {"kernel": jnp.asarray([[[0.25436434, 0.8453059]]])}}}
    x = jax.random.normal(jax.random.key(1729), (2,)).reshape(1, 1, -1)
    eager = run("eager", layer.apply, (v, x))
    return layer.apply, (v, x), eager


def test_seed_original_jit_differs_from_eager(seed):
    fn, args, eager = seed
    # the same on every CPU: one exact bf16 product per output, rounded once, plus one f32 addition
    np.testing.assert_array_equal(np.asarray(eager).ravel(), np.float32([0.23010519, -1.4178724]))
    assert not same(run("jit", fn, args), eager)


@pytest.mark.parametrize("path", ["eager", "jit", "export"])
def test_seed_fixed_equals_original_eager(seed, path):
    fn, args, eager = seed
    assert same(run(path, round_like_declared(fn), args), eager)


@pytest.mark.slow
def test_seed_fixed_savedmodel_equals_original_eager_without_flags(seed, monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # the serving process inherits our environment
    fn, args, eager = seed
    assert not same(run("savedmodel", fn, args), eager)
    assert same(run("savedmodel", round_like_declared(fn), args), eager)


def test_seed_fixed_jaxpr_rounds_the_conv(seed):
    fn, args, _ = seed
    closed = jax.make_jaxpr(round_like_declared(fn))(*args)
    eqns = closed.jaxpr.eqns
    conv = next(i for i, e in enumerate(eqns) if e.primitive.name == "conv_general_dilated")
    rp = eqns[conv + 1]
    assert rp.primitive.name == "reduce_precision"
    assert (rp.params["exponent_bits"], rp.params["mantissa_bits"]) == (8, 7)
    assert rp.invars[0] is eqns[conv].outvars[0]


def test_reduce_precision_survives_xla_with_user_metadata(seed):
    """The compiled CPU program still rounds (XLA does not drop reduce_precision on bf16 values),
    and the rounding's metadata carries the user's name stack and source lines."""
    fn, args, _ = seed
    hlo = jax.jit(round_like_declared(fn)).lower(*args).compile().as_text()
    assert "reduce-precision" in hlo
    assert 'op_name="jit(apply)/Foo/Conv_0/reduce_precision"' in hlo
    assert "test_fixes.py" in hlo  # stack frames of the user's module lines


def test_only_primitive_names(seed):
    fn, args, eager = seed
    assert same(run("jit", round_like_declared(fn, only={"conv_general_dilated"}), args), eager)
    closed = jax.make_jaxpr(round_like_declared(fn, only={"conv_general_dilated"}))(*args)
    assert primitives(closed).count("reduce_precision") == 1


def test_only_empty_inserts_nothing(seed):
    fn, args, _ = seed
    fixed = round_like_declared(fn, only=set())
    assert "reduce_precision" not in primitives(jax.make_jaxpr(fixed)(*args))
    assert same(run("jit", fixed, args), run("jit", fn, args))


def test_only_file_line(seed):
    fn, args, eager = seed
    lines, first = inspect.getsourcelines(Foo)
    line = first + next(i for i, text in enumerate(lines) if "nn.Conv(" in text)
    fixed = round_like_declared(fn, only={f"test_fixes.py:{line}"})
    names = primitives(jax.make_jaxpr(fixed)(*args))
    assert names.count("reduce_precision") == 3  # both converts to bf16 and the conv
    assert same(run("jit", fixed, args), eager)
    assert "reduce_precision" not in primitives(
        jax.make_jaxpr(round_like_declared(fn, only={f"test_fixes.py:{line + 100}"}))(*args))


def test_inserted_roundings_lists_sites(seed):
    fn, args, _ = seed
    sites = inserted_roundings(fn, args)
    assert len(sites) == 3
    assert sites[-1].startswith("conv_general_dilated -> bfloat16[1,1,2] at linear.py:")
    assert "test_fixes.py:" in sites[-1]
    assert inserted_roundings(fn, args, only=set()) == []


# ------------------------------------------------------------------ softmax and MLP
def softmax_args():
    return ((3 * jax.random.normal(jax.random.key(0), (16, 64))).astype(bf16),)


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(64, dtype=jnp.bfloat16)(x)
        x = nn.gelu(x, approximate=False)
        return nn.Dense(8, dtype=jnp.bfloat16)(x)


def mlp_case():
    model, x = MLP(), jax.random.normal(jax.random.key(1), (4, 16))
    return model.apply, (model.init(jax.random.key(2), x), x)


@pytest.mark.parametrize("name", ["softmax", "mlp"])
def test_softmax_and_mlp_fixed_jit_equals_eager(name):
    fn, args = (jax.nn.softmax, softmax_args()) if name == "softmax" else mlp_case()
    eager = run("eager", fn, args)
    assert not same(run("jit", fn, args), eager), "inputs chosen so that the original jit differs"
    fixed = round_like_declared(fn)
    assert same(run("jit", fixed, args), eager)
    assert same(run("eager", fixed, args), eager)


# ------------------------------------------------------------------------- nesting
@jax.jit
def _inner(a):
    return jnp.exp(a.astype(bf16)).astype(f32) * 0.5


def nested(x, w):
    y = _inner(x)  # "jit"
    z = jax.checkpoint(lambda t: jnp.tanh(t.astype(bf16)).astype(f32) + t)(y)  # "remat2"
    g = jax.nn.gelu(z.astype(bf16), approximate=False).astype(f32)
    r = jax.nn.relu(g.astype(bf16)).astype(f32)  # "custom_jvp_call"

    def body(carry, xs):  # bf16 carry
        carry = jnp.sin(carry) * xs.astype(bf16)
        return carry, carry.astype(f32) + xs

    c, ys = lax.scan(body, w.astype(bf16), x)
    q = lax.cond(w[0] > 0, lambda t: jnp.exp(t.astype(bf16)).astype(f32), lambda t: t, g)
    _, ww = lax.while_loop(lambda s: s[0] < 3,
                           lambda s: (s[0] + 1, jnp.cos(s[1]).astype(f32).astype(bf16)),
                           (0, w.astype(bf16)))
    return {"g": g + r, "carry": c.astype(f32), "ys": ys, "cond": q, "while": ww.astype(f32)}


@pytest.fixture(scope="module")
def nested_case():
    x = 2 * jax.random.normal(jax.random.key(3), (6, 32))
    w = jax.random.normal(jax.random.key(4), (32,))
    return nested, (x, w), run("eager", nested, (x, w))


def test_nested_original_differs(nested_case):
    fn, args, eager = nested_case
    jit = run("jit", fn, args)
    assert not same(jit, eager)
    assert not np.array_equal(np.asarray(jit["ys"]), np.asarray(eager["ys"]))  # inside the scan


@pytest.mark.parametrize("path", ["eager", "jit", "export"])
def test_nested_fixed_equals_eager(nested_case, path):
    fn, args, eager = nested_case
    assert same(run(path, round_like_declared(fn), args), eager)


def test_nested_roundings_go_inside(nested_case):
    fn, args, _ = nested_case
    closed = jax.make_jaxpr(round_like_declared(fn))(*args)
    by_name = {e.primitive.name: e for e in closed.jaxpr.eqns}
    for name, key in [("jit", "jaxpr"), ("scan", "jaxpr"), ("while", "body_jaxpr")]:
        assert "reduce_precision" in primitives(by_name[name].params[key]), name
    assert "reduce_precision" in [e.primitive.name for e in by_name["remat2"].params["jaxpr"].eqns]
    assert "reduce_precision" in primitives(by_name["cond"].params["branches"][1])
    assert "custom_jvp_call" in by_name  # kept as a call, with its JVP rule


def test_fixed_is_differentiable(nested_case):
    fn, args, _ = nested_case
    def loss(f):  # the while_loop output is left out: reverse mode does not go through while
        return lambda x, w: sum(jnp.sum(v) for k, v in f(x, w).items() if k != "while")

    g = jax.grad(loss(round_like_declared(fn)), argnums=1)(*args)
    assert g.shape == (32,) and bool(jnp.all(jnp.isfinite(g)))
    np.testing.assert_allclose(g, jax.grad(loss(fn), argnums=1)(*args), rtol=0.05)
    tangents = (jnp.zeros_like(args[0]), jnp.ones_like(args[1]))
    _, t_fixed = jax.jvp(round_like_declared(fn), args, tangents)
    _, t_orig = jax.jvp(fn, args, tangents)
    np.testing.assert_allclose(t_fixed["while"], t_orig["while"], rtol=0.05)


# --------------------------------------------------------------- no narrow floats
def test_f32_function_unchanged():
    def f(x, y):
        return jax.nn.softmax(x @ y) + jnp.tanh(x).sum()

    args = (jax.random.normal(jax.random.key(5), (4, 8)), jax.random.normal(jax.random.key(6), (8, 8)))
    fixed = round_like_declared(f)
    assert "reduce_precision" not in primitives(jax.make_jaxpr(fixed)(*args))
    for path in ("eager", "jit"):
        assert same(run(path, fixed, args), run(path, f, args))
    assert inserted_roundings(f, args) == []


# ------------------------------------------------------------------------ details
def test_dtypes_bits():
    from jaxparity.fixes.rounding import _bits

    assert _bits(jnp.bfloat16) == (8, 7)
    assert _bits(jnp.float16) == (5, 10)
    assert _bits(jnp.float8_e5m2) == (5, 2)
    assert _bits(jnp.float8_e4m3fn) == (5, 3)  # no infinities: one more exponent bit (docs)
    assert _bits(jnp.float32) is None and _bits(jnp.int8) is None and _bits(jnp.bool_) is None


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.float8_e5m2, jnp.float8_e4m3fn])
def test_other_narrow_dtypes(dtype):
    def f(x):
        return (x.astype(dtype) * x.astype(dtype)).astype(f32) + x

    x = jax.random.normal(jax.random.key(7), (64,))
    fixed = round_like_declared(f)
    assert "reduce_precision" in primitives(jax.make_jaxpr(fixed)(x))
    eager = run("eager", f, (x,))
    assert same(run("eager", fixed, (x,)), eager)
    if dtype == jnp.float16:
        assert same(run("jit", fixed, (x,)), eager)


def test_pytrees_kwargs_static_and_cache():
    calls = []

    def f(d, *, scale, flag=True):
        calls.append(1)
        out = (d["a"].astype(bf16) * scale).astype(f32)
        return (out, d["b"]) if flag else out

    fixed = round_like_declared(f)
    d = {"a": jnp.arange(3.0) / 7, "b": jnp.ones(2, jnp.int32)}
    out = fixed(d, scale=3.0)
    assert isinstance(out, tuple) and same(out, f(d, scale=3.0))
    n = len(calls)
    fixed({"a": jnp.arange(3.0), "b": jnp.zeros(2, jnp.int32)}, scale=3.0)
    assert len(calls) == n  # same avals and statics: traced once
    assert same(fixed(d, scale=3.0, flag=False), f(d, scale=3.0, flag=False))
    assert same(jax.jit(fixed, static_argnames="flag")(d, scale=3.0, flag=False),
                jax.jit(f, static_argnames="flag")(d, scale=3.0, flag=False))


def test_inside_jit_with_closure_over_tracer():
    def outer(x, s):
        return round_like_declared(lambda y: (y.astype(bf16) * s.astype(bf16)).astype(f32) + y)(x)

    x, s = jnp.linspace(-1, 1, 16), jnp.float32(1.37)
    with jax.disable_jit():
        eager = outer(x, s)
    assert same(jax.jit(outer)(x, s), eager)
    assert same(jax.jit(outer)(x, s + 1), run("eager", outer, (x, s + 1)))


def test_only_validation():
    with pytest.raises(TypeError):
        round_like_declared(lambda x: x, only={3})


# ------------------------------------------------------------------- fixed case file
def _load(path, factory="make"):
    spec = importlib.util.spec_from_file_location(f"fixed_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, factory)


def test_write_fixed_case(examples, tmp_path):
    original = examples / "conv_bf16.py"
    out = tmp_path / "sub" / "conv_bf16_fixed.py"
    text = write_fixed_case(str(original), str(out),
                            serving_flags="XLA_FLAGS=--xla_allow_excess_precision=false")
    assert out.read_text() == text
    assert "reduce_precision" in text and "excess precision" in text
    assert "XLA_FLAGS=--xla_allow_excess_precision=false" in text
    assert "conv_general_dilated -> bfloat16[1,1,2]" in text and "conv_bf16.py:21" in text
    compile(text, str(out), "exec")

    fn, args = _load(out)()
    orig_fn, orig_args = _load(original)()
    eager = run("eager", orig_fn, orig_args)
    assert not same(run("jit", orig_fn, orig_args), eager)
    assert same(run("jit", fn, args), eager)


def test_write_fixed_case_factory_and_only_with_load_case(examples, tmp_path):
    from jaxparity.case import load_case

    out = tmp_path / "fixed_report_input.py"
    text = write_fixed_case(f"{examples / 'conv_bf16.py'}:make_report_input", out,
                            only={"conv_general_dilated"})
    assert "XLA_FLAGS" not in text and "['conv_general_dilated']" in text
    spec_text = write_fixed_case(str(examples / "conv_bf16.py"), tmp_path / "spec.py",
                                 serving_flags="savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false")
    assert "\n    XLA_FLAGS=--xla_allow_excess_precision=false\n" in spec_text
    case = load_case(str(out))  # runnable as a jaxparity case
    orig = load_case(f"{examples / 'conv_bf16.py'}:make_report_input")
    assert same(run("jit", case.fn, case.args), run("eager", orig.fn, orig.args))


def test_write_fixed_case_errors(tmp_path):
    from jaxparity.case import CaseError

    with pytest.raises(CaseError, match="a case is a Python file"):
        write_fixed_case("model.txt", tmp_path / "x.py")
    with pytest.raises(CaseError, match="no such file"):
        write_fixed_case(str(tmp_path / "missing.py"), tmp_path / "x.py")


# ------------------------------------------------------------------ well_conditioned
def test_well_conditioned_computes_a_one_pass_variance_in_two_passes_under_every_transform():
    """mean(x²) − mean(x)² becomes mean((x − mean(x))²): equal to the two-pass variance eagerly, under
    jit and through jax.export; rewrites() lists the site; ``at`` restricts it to a line."""
    from jaxparity.fixes import rewrites, well_conditioned

    def var(x):
        return jnp.mean(x * x, -1) - jnp.mean(x, -1) ** 2

    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 512)).astype(np.float32) + 1000.0)
    exact = np.var(np.asarray(x, np.float64), -1)
    fixed = well_conditioned(var)
    two_pass = np.asarray(jnp.mean((x - jnp.mean(x, -1, keepdims=True)) ** 2, -1))
    np.testing.assert_array_equal(np.asarray(fixed(x)), two_pass)
    np.testing.assert_array_equal(np.asarray(jax.jit(fixed)(x)), np.asarray(jax.jit(lambda x: jnp.mean(
        (x - jnp.mean(x, -1, keepdims=True)) ** 2, -1))(x)))
    exported = jax.export.export(jax.jit(fixed))(x)
    assert np.abs(np.asarray(exported.call(x)) - exact).max() < 1e-3 < np.abs(np.asarray(var(x)) - exact).max()
    (site,) = rewrites(var, (x,))
    assert site.startswith("one-pass variance at test_fixes.py:")
    here = site.split(" at ")[1]
    assert rewrites(var, (x,), at=[here]) == [site] and rewrites(var, (x,), at=["elsewhere.py:1"]) == []


def test_well_conditioned_shifts_a_log_sum_exp_and_leaves_other_programs_alone():
    """log(Σ exp(x)) overflows at x = 100 in float32; its shifted form does not, and its gradient is the
    softmax. A program with no recognised form computes what it computed."""
    from jaxparity.fixes import rewrites, well_conditioned

    def lse(x):
        return jnp.log(jnp.sum(jnp.exp(x), -1))

    x = jnp.asarray([[100.0, 101.0, 102.0], [1.0, 2.0, 3.0], [-jnp.inf, -jnp.inf, -jnp.inf]])
    assert np.isinf(np.asarray(lse(x))[0])
    got = np.asarray(well_conditioned(lse)(x))
    np.testing.assert_allclose(got, np.asarray(jax.nn.logsumexp(x, -1)), rtol=1e-6)
    g = jax.grad(lambda v: well_conditioned(lse)(v).sum())(x[:2])
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.nn.softmax(x[:2], -1)), rtol=1e-6)
    assert [s.split(" at ")[0] for s in rewrites(lse, (x,))] == ["unshifted log-sum-exp"]

    def plain(x):
        return jnp.tanh(x) * 2.0 - jnp.mean(x)

    assert rewrites(plain, (x[:2],)) == []
    np.testing.assert_array_equal(np.asarray(well_conditioned(plain)(x[:2])), np.asarray(plain(x[:2])))


def test_each_numerically_stable_form_computes_the_same_math_eagerly_and_under_jit():
    """The forms the fix search and the f64 stage rewrite (fixes.conditioning): each is recognised where it is
    written, and its stable form is nearer float64 than the form as written, which overflows, underflows or
    cancels on these inputs."""
    from jaxparity.fixes import REMEDIES, forms_at, well_conditioned

    def softmax(x):
        e = jnp.exp(x)
        return e / jnp.sum(e, axis=-1, keepdims=True)

    cases = [
        (softmax, np.array([[1.0, 2.0, 100.0], [0.5, -3.0, 89.0]], np.float32), "unshifted softmax"),
        (lambda x: jnp.log(jnp.prod(x, axis=-1)), np.full((2, 60), 0.1, np.float32), "log of a product"),
        (lambda x: jnp.log(1 + x), np.array([1e-8, -1e-9, 0.3], np.float32), "log of 1 + x"),
        (lambda x: jnp.exp(x) - 1, np.array([1e-8, -1e-9, 0.3], np.float32), "exp(x) − 1"),
    ]
    for fn, x, form in cases:
        assert forms_at(fn, (x,)) == [form] and form in REMEDIES
        with jax.enable_x64():
            ideal = np.asarray(fn(x.astype(np.float64)))
        written = np.asarray(fn(x), np.float64)
        for fixed in (well_conditioned(fn), jax.jit(well_conditioned(fn))):
            got = np.asarray(fixed(x), np.float64)
            assert np.allclose(got, ideal, rtol=1e-5, atol=1e-30), (form, got, ideal)  # (subnormals flushed)
        assert not np.allclose(written, ideal, rtol=1e-5, atol=1e-30), form  # the form as written is not
