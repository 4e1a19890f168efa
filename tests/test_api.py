"""The Python API as a notebook user calls it."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxparity


def test_compare_a_function_in_process_and_render_it_everywhere():
    def f(x):
        return jnp.tanh(x.astype(jnp.bfloat16)).astype(jnp.float32) * 2 + x

    x = jnp.linspace(-3, 3, 9, dtype=jnp.float32)
    result = jaxparity.compare(f, x, paths=["eager", "jit", "declared"])
    assert [p.spec for p in result.paths] == ["eager", "jit", "declared", "f64"]
    assert isinstance(result, jaxparity.ComparisonResult)
    assert result.path("eager").verdict == "baseline"
    text = str(result)
    assert "jaxparity compare" in text and "jit" in text and result.path("jit").verdict in text.lower()
    html = result._repr_html_()
    assert html.startswith("<div>") and "<table>" in html and "f64" in html
    assert result.to_dict()["paths"][0]["spec"] == "eager"


def test_tolerance_object_and_baseline_choice():
    def f(x):
        return (x * 3.0).astype(jnp.bfloat16)

    x = jnp.arange(5, dtype=jnp.float32) / 7
    result = jaxparity.compare(f, x, paths=["jit", "declared"], baseline="declared",
                               tolerance=jaxparity.Tolerance(ulp=1))
    assert result.baseline == "declared" and result.path("declared").verdict == "baseline"
    assert result.path("jit").gated and result.passed == result.path("jit").passed


def test_html_escapes_user_strings():
    def f(x):
        return x + 1

    f.__qualname__ = "<script>alert(1)</script>"
    result = jaxparity.compare(f, np.float32(1), paths=["eager", "jit"])
    assert "<script>" not in result._repr_html_()


def test_a_failing_baseline_fails_the_run():
    def f(x):
        if not isinstance(x, jax.core.Tracer):
            raise ValueError("eager is broken here")
        return x + 1

    result = jaxparity.compare(f, jnp.ones(2), paths=["eager", "jit"])
    assert result.path("eager").verdict == "error" and "eager is broken here" in result.path("eager").message
    assert result.path("jit").verdict == "error" and "baseline eager failed" in result.path("jit").message
    assert not result.passed and result.exit_code == 1
