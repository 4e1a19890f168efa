"""A NumPyro model for the tests (issue 55): a Student-t regression of 200 heavy-tailed points."""

import jax.numpy as jnp
import numpy as np


def student_t(y):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(5.0))
    nu = numpyro.sample("nu", dist.Gamma(2.0, 0.1))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("obs", dist.StudentT(nu, mu, sigma), obs=y)


def data():
    return jnp.asarray(np.random.default_rng(0).standard_t(3.0, 200).astype(np.float32) * 2 + 1)
