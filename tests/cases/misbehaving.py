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
