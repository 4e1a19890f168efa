"""Cases whose function misbehaves only when traced (jit, export, savedmodel, references), so
that eager still runs and the failure-isolation tests can check the other paths survive."""

import os
import time

import jax
import jax.numpy as jnp


def _x():
    return (jnp.arange(4, dtype=jnp.float32),)


def _traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def make_raises():
    def fn(x):
        if _traced(x):
            raise RuntimeError("refusing to be traced")
        return x * 2

    return fn, _x()


def make_crashes():
    def fn(x):
        if _traced(x):
            os.abort()  # what a segfault inside a runtime looks like from outside
        return x * 2

    return fn, _x()


def make_hangs():
    def fn(x):
        if _traced(x):
            time.sleep(3600)
        return x * 2

    return fn, _x()


def make_untraceable():
    def fn(x):
        return x * 2 if float(x.sum()) > 0 else x  # concrete value needed: fails under jit

    return fn, _x()


def make_factory_raises():
    raise ValueError("the checkpoint file is missing")


def make_not_a_pair():
    return jnp.ones(3)


def make_crashes_when_rewritten():
    """A bf16 matmul whose jit elides a rounding (excess precision, fixed by a flag), and whose process dies when
    round_like_declared re-traces it: one re-run of the explanation crashes its worker, as a compiler crashing
    under one flag does (jaxlib 0.9.2's CPU compiler segfaults on flax's sst2 BiLSTM in bf16 with
    xla_disable_hlo_passes=algsimp). The explanation must survive it and say so."""
    import inspect
    import signal

    def fn(x, w):
        if any(f.filename.endswith(os.path.join("fixes", "rounding.py")) for f in inspect.stack()):
            os.kill(os.getpid(), signal.SIGSEGV)
        y = (x @ w).astype(jnp.float32)
        return jnp.tanh(y) * 3.0

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    return fn, (jax.random.normal(k1, (4, 64), jnp.bfloat16), jax.random.normal(k2, (64, 8), jnp.bfloat16))


def make_hangs_when_rewritten():
    """As make_crashes_when_rewritten, but the re-traced model never returns: a re-run that hangs (a compiler
    looping on one flag). It must be stopped and said, and the rest explained."""
    import inspect
    import time

    def fn(x, w):
        if any(f.filename.endswith(os.path.join("fixes", "rounding.py")) for f in inspect.stack()):
            time.sleep(3600)
        y = (x @ w).astype(jnp.float32)
        return jnp.tanh(y) * 3.0

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    return fn, (jax.random.normal(k1, (4, 64), jnp.bfloat16), jax.random.normal(k2, (64, 8), jnp.bfloat16))
