import pytest

from jaxparity.comparison import plan_paths
from jaxparity.paths import DEFAULT_PATHS, PATHS, PathOptionError, make_path, parse_spec
from jaxparity.paths.base import parse_option_value


def test_parse_spec_splits_options_at_the_first_equals():
    assert parse_spec("jit") == ("jit", {})
    assert parse_spec("jit:xla_allow_excess_precision=false") == ("jit", {"xla_allow_excess_precision": "false"})
    assert parse_spec("savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false,keep=/tmp/m") == (
        "savedmodel", {"XLA_FLAGS": "--xla_allow_excess_precision=false", "keep": "/tmp/m"})
    with pytest.raises(PathOptionError, match="key=value"):
        parse_spec("jit:novalue")


@pytest.mark.parametrize("text,value", [("false", False), ("True", True), ("3", 3), ("0.5", 0.5), ("abc", "abc")])
def test_option_values_become_python_types(text, value):
    assert parse_option_value(text) == value and type(parse_option_value(text)) is type(value)


def test_unknown_path_and_option_are_named():
    with pytest.raises(PathOptionError, match="unknown path 'jti'.*known paths: eager, jit"):
        make_path("jti")
    with pytest.raises(PathOptionError, match="path 'eager' has no option 'foo'"):
        make_path("eager:foo=1")
    with pytest.raises(PathOptionError, match="path 'savedmodel' has no option 'xla_flags'"):
        make_path("savedmodel:xla_flags=1")  # env vars are written in capitals
    with pytest.raises(PathOptionError, match="path 'tflite' has no option 'thread'; did you mean threads\\?"):
        make_path("tflite:thread=2")


def test_plan_paths_orders_baseline_first_and_always_measures_f64():
    specs, requested = plan_paths("jit:xla_allow_excess_precision=false,xla_cpu_enable_fast_math=false,export",
                                  "eager")
    assert specs == ["eager", "jit:xla_allow_excess_precision=false,xla_cpu_enable_fast_math=false", "export", "f64"]
    assert requested == {"eager", specs[1], "export"}
    specs, requested = plan_paths(None, "declared")
    assert specs[0] == "declared" and set(specs) == set(DEFAULT_PATHS) and requested == {"declared"}


def test_every_registered_path_describes_itself():
    for name, cls in PATHS.items():
        path = cls()
        assert path.spec == name and cls.summary
        assert path.unavailable_reason() is None  # every runtime is installed in the test environment


def test_a_runtime_that_is_not_installed_is_named_and_does_not_stop_the_others(monkeypatch):
    import sys

    import jax.numpy as jnp

    import jaxparity

    monkeypatch.setitem(sys.modules, "tensorflow", None)  # how Python marks a module as not importable
    reason = make_path("savedmodel").unavailable_reason()
    assert reason and "TensorFlow is not installed" in reason and "pip install" in reason

    x = jnp.ones(3)
    asked = jaxparity.compare(lambda x: x * 2, x, paths=["eager", "jit", "savedmodel"])
    assert asked.path("savedmodel").verdict == "unavailable" and asked.path("jit").verdict == "identical"
    assert not asked.passed  # explicitly requested and not run: cannot vouch for it
    default = jaxparity.compare(lambda x: x * 2, x)  # savedmodel only by default: shown, not gated
    assert default.path("savedmodel").status == "unavailable" and not default.path("savedmodel").gated
    assert default.passed


def test_compiled_paths_share_one_trace_of_the_case():
    """jit, export and savedmodel trace the user's function once between them (paths/staging.py), and
    each still gives the output's own structure, for every argument shape."""
    import jax.numpy as jnp
    import numpy as np

    from jaxparity.execution.inprocess import run_in_process

    calls = []

    def fn(x):
        calls.append(x.shape)
        return {"double": x * 2, "parts": (jnp.sin(x), x.sum())}

    x = jnp.arange(4.0, dtype=jnp.float32)
    runs = [run_in_process(make_path(spec), fn, (x,)) for spec in ("jit", "export", "savedmodel")]
    assert [r.status for r in runs] == ["ok"] * 3, [r.message for r in runs]
    assert calls == [(4,)]  # one trace for the three paths
    for r in runs:
        assert [n for n, _ in r.outputs] == ["out/double", "out/parts/0", "out/parts/1"]
        np.testing.assert_array_equal(dict(r.outputs)["out/double"], np.arange(4.0, dtype=np.float32) * 2)
    # Another shape traces again and gets its own outputs; the first shape is still known.
    short = run_in_process(make_path("jit"), fn, (x[:3],))
    again = run_in_process(make_path("export"), fn, (x,))
    assert calls == [(4,), (3,)]
    assert dict(short.outputs)["out/double"].shape == (3,) and dict(again.outputs)["out/double"].shape == (4,)


def test_compile_once_reuses_per_jax_configuration_never_across():
    """Within compile_once (many-inputs mode, a sweep worker) a path compiles once per function, shapes
    and JAX configuration: an experiment that re-runs the same function on the same shapes under
    another configuration (explain's matmul-precision experiment) gets its own trace and compile."""
    import jax
    import jax.numpy as jnp

    from jaxparity.execution.inprocess import run_in_process
    from jaxparity.paths.staging import compile_once

    calls = []

    def fn(a, b):
        calls.append(1)
        return jnp.dot(a, b)

    a = jnp.ones((4, 4), jnp.float32)
    with compile_once():
        for _ in range(3):
            assert run_in_process(make_path("jit"), fn, (a, a)).status == "ok"
        assert len(calls) == 1  # one trace and compile for the three runs
        with jax.default_matmul_precision("highest"):
            assert run_in_process(make_path("jit"), fn, (a, a)).status == "ok"
        assert len(calls) == 2  # another configuration: traced and compiled again
        assert run_in_process(make_path("jit"), fn, (a, a)).status == "ok"
        assert len(calls) == 2  # back to the first: its executable


def test_a_jax_option_that_does_not_exist_is_named_and_the_paths_own_attribute_error_is_not_taken_for_one():
    from jaxparity.paths.base import PathOptionError, jax_config

    with pytest.raises(PathOptionError, match="no JAX config option 'jax_no_such_option'"):
        with jax_config({"jax_no_such_option": "1"}):
            pass
    with pytest.raises(AttributeError, match="typeof"):  # raised inside the path: its own error, unchanged
        with jax_config({"jax_enable_checks": "false"}):
            raise AttributeError("module 'jax' has no attribute 'typeof'")


def test_a_path_answers_what_it_can_do_and_causes_ask_for_capabilities_paths_have():
    from jaxparity.explain.causes import CAUSES
    from jaxparity.paths import CAPABILITIES, PATHS, xla_twin

    for cls in PATHS.values():
        assert cls.capabilities and cls.capabilities <= set(CAPABILITIES), cls.name
    assert set().union(*(cls.capabilities for cls in PATHS.values())) == set(CAPABILITIES)
    for cause in CAUSES:
        assert cause.runs_on and set(cause.runs_on) <= set(CAPABILITIES), cause.id
    with pytest.raises(KeyError, match="unknown path capability"):
        make_path("jit").has("takes_xla_option")
    # how an XLA option reaches each runtime, and the jit that compiles its program the same way
    assert make_path("jit:xla_a=1").with_xla_option("xla_b", "false").spec == "jit:xla_a=1,xla_b=false"
    served = make_path("savedmodel:XLA_FLAGS=--xla_a=1").with_xla_option("xla_b", "false")
    assert served.spec == "savedmodel:XLA_FLAGS=--xla_a=1 --xla_b=false"
    assert xla_twin(served).spec == "jit:xla_a=1,xla_b=false"
    assert xla_twin("export:load_env=old,xla_c=0").spec == "jit:xla_c=0"
    with pytest.raises(PathOptionError, match="no XLA option reaches tflite"):
        make_path("tflite").with_xla_option("xla_b", "false")
    assert [n for n, c in PATHS.items() if make_path(n).replayable] == ["eager", "jit", "export", "declared", "f64"]
    assert not make_path("jit@old").replayable  # another environment's worker replays it, not this process
