"""Causes that only exist on a GPU. They run where JAX sees a GPU; on CPU-only machines (CI) there
is no such device to test, which the skip reason says."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxparity

pytestmark = pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU: JAX sees only "
                                f"{jax.default_backend()} here")


def test_tf32_matmul_is_confirmed_as_reduced_matmul_precision():
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((256, 256)).astype(np.float32))
    b = jnp.asarray(rng.standard_normal((256, 256)).astype(np.float32))
    result = jaxparity.compare(lambda a, b: a @ b, a, b, paths=["declared", "jit"], baseline="declared",
                               tolerance=jaxparity.Tolerance(ulp=64)).explain()
    (e,) = result.explanations
    verdict = next(c for c in e.causes if c.cause == "matmul-precision")
    assert verdict.status in ("confirmed", "partly")
    # the re-run is the path's own option a user can run, and its fix is said as its numbers show it: parity only
    # where nothing is left (a float32 matmul summed in another order may still differ by a few ULP)
    fix = next(f for f in e.fixes if f.kind == "compile option")
    assert fix.spec == "jit:jax_default_matmul_precision=highest"
    assert fix.verified == (fix.rerun.after[0] == 0)
    assert "jit is wrong" not in str(result) and "wrong code" not in str(result)  # reduced precision, named


def test_bf16_excess_precision_on_gpu_is_confirmed():
    x = jnp.asarray(np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32))
    result = jaxparity.compare(lambda x: jax.nn.softmax(x.astype(jnp.bfloat16) * 3, axis=-1), x,
                               paths=["eager", "jit"]).explain()
    for e in result.explanations:
        assert any(c.cause == "excess-precision" and c.status == "confirmed" for c in e.causes)
