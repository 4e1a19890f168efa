"""Models in, directly (``jaxparity.cases``): each library's model as a case, its weights one input named by
module path, run as served (no dropout, batch statistics read); the inputs counted by module in the reports."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxparity
from jaxparity.case import load_case
from jaxparity.cases.model import nest, unnest
from jaxparity.pytree import argument_leaves

X = jax.random.normal(jax.random.key(1), (2, 8, 8, 3))


def _names(args) -> list[str]:
    return [n for n, _ in argument_leaves(args)]


def _eager_jit(fn, args):
    result = jaxparity.compare(fn, *args, paths=["eager", "jit"])
    assert {"eager", "jit"} <= {p.spec for p in result.paths} and all(p.status == "ok" for p in result.paths), \
        [p.message for p in result.paths]
    return result


# -- the examples, one per library ----------------------------------------------------------------
EXAMPLES = {
    "flax_linen_cnn.py": ("arg0/params/Conv_0/kernel", "arg0/batch_stats/BatchNorm_1/var"),
    "nnx_mlp.py": ("arg0/hidden/kernel", "arg0/norm/var"),
    "equinox_mlp.py": ("arg0/layers/0/weight", "arg0/layers/2/bias"),
    "haiku_mlp.py": ("arg0/params/linear/w", "arg0/state/batch_norm/~/var_ema/average"),
    "hf_bert.py": ("arg0/encoder/layer/0/attention/self/query/kernel", "arg1/input_ids"),
    "keras_mobilenet.py": ("arg0/conv/kernel", "arg0/conv_bn/moving_variance"),
}
NEEDS = {"haiku_mlp.py": "haiku", "hf_bert.py": "transformers"}


@pytest.mark.parametrize("example", [pytest.param(e, marks=pytest.mark.slow) if e == "keras_mobilenet.py" else e
                                     for e in EXAMPLES])
def test_each_example_runs_eager_and_jit_with_its_weights_named_by_module(examples, example):
    if example in NEEDS:
        pytest.importorskip(NEEDS[example])
    case = load_case(str(examples / example))
    names = _names(case.args)
    for expected in EXAMPLES[example]:
        assert expected in names
    assert case.roles[0].role == "variables"
    result = _eager_jit(case.fn, case.args)
    assert all(np.isfinite(leaf.error_vs_f64.max_abs) for p in result.paths for leaf in p.leaves)


def test_the_command_line_counts_a_models_inputs_by_module(examples):
    from conftest import run_cli

    run = run_cli("compare", str(examples / "flax_linen_cnn.py"), "--paths", "eager,jit", "--verbose")
    assert run.returncode == 0, run.stderr
    assert ("inputs   arg0/batch_stats/… 4 arrays in 2 modules (48 float32 values), arg0/params/… 10 arrays in 5 "
            "modules (4,010 float32 values), arg1 float32[2,16,16,3]") in run.stdout


# -- Flax linen ---------------------------------------------------------------------------------------
def _linen():
    import flax.linen as nn

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, mask=None, train: bool = True):
            x = nn.BatchNorm(use_running_average=not train)(nn.Conv(4, (3, 3))(x))
            x = nn.Dropout(0.5, deterministic=not train)(x)
            x = x if mask is None else x * mask
            return nn.Dense(3)(x.mean(axis=(1, 2)))

    return Net(), Net().init(jax.random.key(0), X, train=False)


def test_flax_runs_the_module_in_inference_mode_unless_told_otherwise():
    from jaxparity.cases import from_flax

    module, variables = _linen()
    fn, args = from_flax(module, variables, X)  # train defaults to True in the module: dropout would need a key
    assert _names(args)[:2] == ["arg0/batch_stats/BatchNorm_0/mean", "arg0/batch_stats/BatchNorm_0/var"]
    np.testing.assert_array_equal(fn(*args), module.apply(variables, X, train=False))
    with pytest.raises(Exception, match="immutable|PRNG"):  # batch statistics updated, dropout drawn
        from_flax(module, variables, X, train=True).fn(variables, X)  # what the user says wins
    assert fn.__name__ == "Net"


def test_flax_keyword_arrays_are_a_last_input_named_by_keyword():
    from jaxparity.cases import from_flax

    module, variables = _linen()
    mask = jnp.zeros((2, 8, 8, 1))
    fn, args = from_flax(module, variables, X, mask=mask)
    assert _names(args)[-2:] == ["arg1", "arg2/mask"]
    np.testing.assert_array_equal(fn(*args), module.apply(variables, X, mask=mask, train=False))
    _eager_jit(fn, args)


# -- Flax NNX -----------------------------------------------------------------------------------------
def test_nnx_runs_a_copy_in_eval_mode_and_leaves_the_model_as_it_was():
    from flax import nnx

    from jaxparity.cases import from_nnx

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.hidden = nnx.Linear(3, 8, rngs=rngs)
            self.norm = nnx.BatchNorm(8, rngs=rngs)
            self.dropout = nnx.Dropout(0.5, rngs=rngs)

        def __call__(self, x):
            return self.dropout(self.norm(self.hidden(x)))

    model = Net(nnx.Rngs(0))
    fn, args = from_nnx(model, X)
    assert not model.dropout.deterministic and not model.norm.use_running_average  # still training
    assert _names(args) == ["arg0/hidden/bias", "arg0/hidden/kernel", "arg0/norm/bias", "arg0/norm/mean",
                            "arg0/norm/scale", "arg0/norm/var", "arg1"]  # the Rngs bound in, not an input
    model.eval()
    np.testing.assert_array_equal(fn(*args), model(X))
    np.testing.assert_array_equal(fn(*args), jax.jit(fn)(*args))  # no tracer left behind in the template
    _eager_jit(fn, args)
    # each layer computes under its attribute path, as linen's modules do; the classes are as they were after
    stacks = {e.primitive.name: str(e.source_info.name_stack) for e in jax.make_jaxpr(fn)(*args).eqns}
    assert stacks["dot_general"] == "hidden" and stacks["rsqrt"] == "norm", stacks
    assert not hasattr(nnx.Linear.__call__, "__wrapped__") and not hasattr(Net.__call__, "__wrapped__")


# -- Equinox ------------------------------------------------------------------------------------------
def test_equinox_weights_are_named_by_attribute_and_dropout_is_off():
    import equinox as eqx

    from jaxparity.cases import from_equinox

    model = eqx.nn.Sequential([eqx.nn.Linear(3, 8, key=jax.random.key(0)), eqx.nn.Dropout(0.5),
                               eqx.nn.Lambda(jax.nn.gelu), eqx.nn.Linear(8, 2, key=jax.random.key(1))])
    x = X.reshape(-1, 3)
    fn, args = from_equinox(model, x, vmap=True)
    assert _names(args) == ["arg0/layers/0/weight", "arg0/layers/0/bias", "arg0/layers/3/weight",
                            "arg0/layers/3/bias", "arg1"]
    np.testing.assert_array_equal(fn(*args), jax.vmap(eqx.nn.inference_mode(model))(x))
    _eager_jit(fn, args)


# -- Keras --------------------------------------------------------------------------------------------
def test_keras_variables_are_grouped_by_layer_and_run_with_training_false():
    import keras

    from jaxparity.cases import from_keras

    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, name="conv"),
                              keras.layers.BatchNormalization(name="bn"), keras.layers.Dropout(0.5),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(2, name="head")])
    fn, args = from_keras(model, X)
    assert _names(args) == ["arg0/bn/beta", "arg0/bn/gamma", "arg0/bn/moving_mean", "arg0/bn/moving_variance",
                            "arg0/conv/bias", "arg0/conv/kernel", "arg0/head/bias", "arg0/head/kernel", "arg1"]
    np.testing.assert_array_equal(fn(*args), model(X, training=False))  # the dropout's seed state bound in
    new = jax.tree.map(lambda v: v + 1, args[0])
    np.testing.assert_array_equal(fn(new, X), fn(new, X))
    assert not np.array_equal(fn(new, X), fn(*args))  # the input, not the model's own variables, is computed on
    _eager_jit(fn, args)


# -- Haiku and Hugging Face (when installed) ----------------------------------------------------------
def test_haiku_without_state_and_the_state_it_needs():
    hk = pytest.importorskip("haiku")
    from jaxparity.cases import from_haiku

    def forward(x):
        return hk.nets.MLP([8, 3])(x)

    model = hk.transform(forward)
    params = model.init(jax.random.key(0), X)
    fn, args = from_haiku(model, params, X)
    assert _names(args)[:2] == ["arg0/params/mlp/~/linear_0/b", "arg0/params/mlp/~/linear_0/w"]
    assert fn.__name__.endswith("forward")
    np.testing.assert_array_equal(fn(*args), model.apply(params, None, X))
    with pytest.raises(ValueError, match="state= is for hk.transform_with_state"):
        from_haiku(model, params, X, state={})


def test_hf_takes_the_inputs_by_keyword_and_static_flags_bound_in():
    pytest.importorskip("transformers")
    from transformers import BertConfig, FlaxBertModel

    from jaxparity.cases import from_hf

    model = FlaxBertModel(BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=8), seed=0)
    ids = jnp.arange(8).reshape(1, 8)
    fn, args = from_hf(model, input_ids=ids, output_hidden_states=True)
    assert _names(args)[-1] == "arg1/input_ids"
    out = fn(*args)
    assert len(out.hidden_states) == 2  # output_hidden_states=True bound in
    np.testing.assert_array_equal(out.last_hidden_state, model(ids, train=False).last_hidden_state)


# -- what the helpers share ---------------------------------------------------------------------------
def test_nest_and_unnest_round_trip_also_when_a_variable_is_named_like_a_layer():
    flat = {"block/conv/kernel": 1, "block/conv/bias": 2, "head": 3, "head/kernel": 4}
    tree = nest(flat)
    assert tree == {"block": {"conv": {"kernel": 1, "bias": 2}}, "head": 3, "head/kernel": 4}
    assert unnest(tree) == flat
    with pytest.raises(ValueError, match="'head' names a variable and a module"):
        nest({"head/kernel": 4, "head": 3})


def test_many_inputs_are_counted_by_module_as_deep_as_fits_one_line():
    from jaxparity.report.format import arrays_line, module_lines
    from jaxparity.result import ArrayInfo

    keras_like = [ArrayInfo(f"arg0/layer_{i}/{v}", "float32", (4,)) for i in range(50) for v in ("gamma", "beta")]
    x = ArrayInfo("arg1", "float32", (1, 8))
    assert arrays_line(keras_like + [x]) == "arg0/… 100 arrays in 50 modules (400 float32 values), arg1 float32[1,8]"
    lines = module_lines(keras_like[:4] + [x])
    assert lines == ["arg0/layer_0: gamma float32[4], beta float32[4]",
                     "arg0/layer_1: gamma float32[4], beta float32[4]", "arg1 float32[1,8]"]


def test_keras_on_another_backend_is_told_how_to_choose_jax():
    import os
    import subprocess
    import sys

    script = ("import keras\nfrom jaxparity.cases import from_keras\n"
              "from_keras(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), None)\n")
    env = dict(os.environ, KERAS_BACKEND="numpy")  # Keras's numpy backend: no TensorFlow to import
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 1
    assert "Keras is on 'numpy': set KERAS_BACKEND=jax before keras is first imported" in run.stderr


def test_a_numpyro_model_names_its_sites():
    """Issue 55: a NumPyro log-density's ops sat "in jvp()" at one line. ``from_numpyro`` runs the potential with each
    site's log-probability under a name scope of the site's name; the gradient's ops are "in obs", "in sigma"..., and
    a divergence's carrier says so ("obs, in the gradient")."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import jaxparity
    from cases.numpyro_model import data, student_t
    from jaxparity.cases.numpyro import from_numpyro
    from jaxparity.localize.program import flatten

    model, y = student_t, data()
    assert set(from_numpyro(model, y).args[0]) == {"mu", "sigma", "nu"}  # NumPyro's initial values
    at = {"mu": jnp.float32(0.7), "sigma": jnp.float32(0.3), "nu": jnp.float32(1.2)}
    fn, args = from_numpyro(model, y, params=at, grad=True)
    stacks = {op.info.name_stack for op in flatten(fn, args).ops}
    assert {"transpose(jvp(obs))", "transpose(jvp(sigma))"} <= stacks, stacks
    np.testing.assert_allclose(float(jax.jit(fn)(*args)["mu"]), float(fn(*args)["mu"]), rtol=1e-5)
    result = jaxparity.compare(fn, *args, paths=["eager", "onnx"]).explain()  # jax2onnx writes log1p as Add → Log
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    assert any(c.module == "obs, in the gradient" for c in v.carriers), v.carriers
