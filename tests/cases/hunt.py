"""Divergences that only show in a small region of the input space, each on the path where it really
happens (the hunt's planted cases: tests/test_hunt.py, benchmarks/bench_hunt.py). Each factory's
docstring says the region, the path, the kind of divergence and the domain to search."""

import jax
import jax.numpy as jnp
import numpy as np


def _rng(seed=0):
    return np.random.default_rng(seed)


def make_argmax_tie():
    """jit: ``x * w + b`` is one fused multiply-add under jit and two roundings op by op; the class flips where
    the two largest scores are within a ULP of each other (exact ties before argmax). Derived domain.
    Kind: beyond rounding (an integer output that changed)."""
    r = _rng(1)
    params = {"w": r.standard_normal(16).astype(np.float32), "b": r.standard_normal(16).astype(np.float32)}

    def classify(params, x):
        return jnp.argmax(x * params["w"] + params["b"], axis=-1)

    return classify, (params, r.standard_normal((4, 16)).astype(np.float32))


def make_floor_threshold():
    """savedmodel: ``floor(x * s + t)`` (a bucketizer); TensorFlow's XLA fuses the multiply-add, eager rounds
    twice, and the bucket differs only where ``x * s + t`` is within a ULP of an integer. Derived domain.
    Kind: beyond rounding."""
    r = _rng(2)
    params = {"s": np.float32(7.3), "t": np.float32(0.1)}

    def bucket(params, x):
        return jnp.floor(x * params["s"] + params["t"])

    return bucket, (params, r.uniform(0, 10, (8,)).astype(np.float32))


def make_masked_row():
    """tflite: a softmax over scores masked by a threshold on the data; a row whose every score is masked is
    NaN in JAX (-inf - -inf) and uniform on TFLite, whose converter stores -inf as -FLT_MAX. Only a row
    with all 16 scores under 0.5 shows it (2**-16 of uniform rows). Derived domain. Kind: NaN or inf on
    one side."""
    r = _rng(3)

    def attend(x):
        return jax.nn.softmax(jnp.where(x > 0.5, x, -jnp.inf), axis=-1)

    return attend, (r.uniform(0, 1, (4, 16)).astype(np.float32),)


def make_logsumexp_overflow():
    """tflite: log(sum(exp(x))) written naively; TFLite's exp gives inf from x = 88.38, XLA's only past 88.72,
    so the result is inf on TFLite where the largest x lies in that third of a unit. Domain x in [-90, 90].
    Kind: NaN or inf on one side."""
    r = _rng(4)

    def logsumexp(x):
        return jnp.log(jnp.sum(jnp.exp(x), axis=-1))

    return logsumexp, (r.normal(0, 3, (4, 8)).astype(np.float32),)


def make_log_subnormal():
    """onnx: the log of a probability; XLA:CPU reads a subnormal input as the smallest normal's neighbour
    (log gives -103.97 for every subnormal), ONNX Runtime computes it (-92.1 at 1e-40). Only inputs under
    1.2e-38 show it. Derived domain (probabilities in [0, 1]). Kind: beyond rounding."""
    r = _rng(5)

    def log_likelihood(p):
        return jnp.log(p)

    return log_likelihood, (r.uniform(0.05, 1, (16,)).astype(np.float32),)


def make_periodic():
    """iree: a sinusoidal encoding of a position; IREE's sin reduces large arguments with less precision than
    XLA's (0.0385 against 0.0357 at 1e5). Positions in the example are small; domain t in [0, 100000].
    Kind: beyond rounding (a relative difference of 2**-7 and more from |t| near 3e4)."""
    r = _rng(6)

    def encode(t):
        return jnp.sin(t)

    return encode, (r.uniform(0, 100, (8,)).astype(np.float32),)


def make_floor_in_scan():
    """jit: the bucketizer of make_floor_threshold applied step by step in a ``lax.scan`` (a running sum of
    the buckets): the floor sits in the loop's body, where the hunt aims at it iteration by iteration.
    Derived domain. Kind: beyond rounding."""
    r = _rng(7)
    params = {"s": np.float32(7.3), "t": np.float32(0.1)}

    def buckets(params, xs):
        def step(total, x):
            b = jnp.floor(x * params["s"] + params["t"])
            return total + b, b

        return jax.lax.scan(step, jnp.zeros(xs.shape[1:], jnp.float32), xs)

    return buckets, (params, r.uniform(0, 10, (6, 4)).astype(np.float32))
