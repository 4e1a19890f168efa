"""A corpus of small programs that nobody on the project wrote: each calls one function of an installed
public library (optax, numpyro, flax, equinox, jax.nn, jax.scipy) on inputs pushed to the edges of its
domain. Not filtered for differing: every program written is kept
(python benchmarks/bench_uncatalogued.py --corpus benchmarks/uncatalogued/public.py).

Each factory returns (fn, args); its docstring names the library function and the edge its inputs push.
Inputs are small (<= 64 elements) and fixed (no randomness).
"""

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import jax.scipy.stats as jst
import numpy as np
import numpyro.distributions as dist
import optax


def make_optax_softmax_xent():
    """optax.softmax_cross_entropy on logits of +-100, 3e38 and -inf (masked classes) with one-hot and
    smoothed labels: a label of 0 on a -inf logit, a huge spread inside one row."""

    def fn(logits, labels):
        return optax.softmax_cross_entropy(logits, labels)

    logits = np.array([[100.0, -100.0, 0.0, 1.0],
                       [0.0, -np.inf, 1.0, 2.0],
                       [3e38, -3e38, 0.0, 1e30],
                       [1e-40, -0.0, 0.0, 1e-40]], np.float32)
    labels = np.array([[0.0, 1.0, 0.0, 0.0],
                       [0.25, 0.0, 0.25, 0.5],
                       [0.0, 0.0, 0.0, 1.0],
                       [0.7, 0.1, 0.1, 0.1]], np.float32)
    return fn, (jnp.asarray(logits), jnp.asarray(labels))


def make_optax_sigmoid_bce():
    """optax.sigmoid_binary_cross_entropy on logits of +-100, +-inf, 1e30, exact 0 and -0, and labels at
    0, 1 and soft (0.5): log_sigmoid far into its saturated tails."""

    def fn(logits, labels):
        return optax.sigmoid_binary_cross_entropy(logits, labels)

    logits = np.array([100.0, -100.0, 100.0, -100.0, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 17.0, -88.0],
                      np.float32)
    labels = np.array([1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.0, 1.0], np.float32)
    return fn, (jnp.asarray(logits), jnp.asarray(labels))


def make_optax_huber():
    """optax.huber_loss (delta=1) with errors exactly at delta, tiny (1e-40), huge (1e20, 3e38: 0.5*err**2
    overflows on the quadratic side only if picked), +-inf and NaN."""

    def fn(pred, target):
        return optax.huber_loss(pred, target, delta=1.0)

    pred = np.array([1.0, -1.0, 1e-40, 1e20, 3e38, -3e38, np.inf, np.nan, 0.5, 1.0000001, 0.0, 2.0], np.float32)
    target = np.zeros(12, np.float32)
    return fn, (jnp.asarray(pred), jnp.asarray(target))


def make_optax_log_cosh():
    """optax.log_cosh (logaddexp(e, -e) - log 2) on errors of 0, tiny, subnormal, +-100, 1e30 and +-inf,
    where log(cosh(e)) ~ e**2 / 2 underflows and |e| - log 2 should hold for large e."""

    def fn(pred, target):
        return optax.log_cosh(pred, target)

    pred = np.array([0.0, 1e-3, 1e-20, 1e-40, 100.0, -100.0, 1e30, np.inf, -np.inf, 0.5], np.float32)
    target = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5], np.float32)
    return fn, (jnp.asarray(pred), jnp.asarray(target))


def make_optax_kl_divergence():
    """optax.kl_divergence(log_predictions, targets) with targets of exact 0 (the where-guarded log),
    subnormal targets (1e-40) and log_predictions of -inf and -1e30."""

    def fn(log_pred, targets):
        return optax.kl_divergence(log_pred, targets)

    log_pred = np.log(np.array([[0.25, 0.25, 0.25, 0.25],
                                [0.5, 0.5, 1e-45, 0.0],
                                [0.7, 0.1, 0.1, 0.1],
                                [1.0, 0.0, 0.0, 0.0]], np.float64)).astype(np.float32)
    log_pred[3, 1] = -1e30
    targets = np.array([[1.0, 0.0, 0.0, 0.0],
                        [0.5, 0.5, 0.0, 0.0],
                        [1e-40, 1e-40, 0.5, 0.5],
                        [1.0, 0.0, 0.0, 0.0]], np.float32)
    return fn, (jnp.asarray(log_pred), jnp.asarray(targets))


def make_optax_cosine_similarity():
    """optax.cosine_similarity on vectors of zeros (epsilon clip), subnormals, 1e20 components (squared
    norm overflows to inf) and nearly parallel vectors (result near 1)."""

    def fn(a, b):
        return optax.cosine_similarity(a, b, epsilon=1e-8)

    a = np.array([[0.0, 0.0, 0.0, 0.0],
                  [1e-40, 2e-40, 0.0, 1e-40],
                  [1e20, 1e20, 0.0, 1.0],
                  [1.0, 1.0, 1.0, 1.0000001],
                  [3.0, 4.0, 0.0, 0.0]], np.float32)
    b = np.array([[1.0, 2.0, 3.0, 4.0],
                  [1e-40, 2e-40, 0.0, 1e-40],
                  [1e20, -1e20, 1.0, 0.0],
                  [1.0, 1.0, 1.0, 1.0],
                  [-3.0, -4.0, 0.0, 0.0]], np.float32)
    return fn, (jnp.asarray(a), jnp.asarray(b))


def make_optax_safe_norm():
    """optax.safe_norm(x, min_norm=1e-6, axis=-1) on rows of subnormals (norm below min_norm), 1e20 and
    3e38 entries (the squared sum overflows), and a row whose norm equals min_norm."""

    def fn(x):
        return optax.safe_norm(x, 1e-6, axis=-1)

    x = np.array([[1e-40, 1e-40, 0.0, 0.0],
                  [1e20, 1e20, 1e20, 1e20],
                  [3e38, 0.0, 0.0, 0.0],
                  [1e-6, 0.0, 0.0, 0.0],
                  [3.0, 4.0, 0.0, 0.0],
                  [1e-20, 1e-20, 1e-20, 1e-20]], np.float32)
    return fn, (jnp.asarray(x),)


def make_optax_smooth_labels():
    """optax.smooth_labels(labels, alpha) on one-hot rows with alpha 0.1 and the edge alphas 0 and 1,
    plus a row of an all-zero label and one with a NaN label."""

    def fn(labels):
        return optax.smooth_labels(labels, 0.1), optax.smooth_labels(labels, 1.0)

    labels = np.array([[1.0, 0.0, 0.0, 0.0, 0.0],
                       [0.0, 0.0, 0.0, 0.0, 0.0],
                       [0.0, np.nan, 1.0, 0.0, 0.0],
                       [0.2, 0.2, 0.2, 0.2, 0.2]], np.float32)
    return fn, (jnp.asarray(labels),)


def make_numpyro_gamma_logprob():
    """numpyro.distributions.Gamma(concentration, rate).log_prob at x = 0 (concentration < 1, = 1, > 1),
    subnormal x, huge x (1e30) and huge concentration (1e6): xlogy and gammaln at their edges."""

    def fn(x, conc, rate):
        return dist.Gamma(conc, rate).log_prob(x)

    x = np.array([0.0, 0.0, 0.0, 1e-40, 1e30, 1e6, 1.0, 3e38], np.float32)
    conc = np.array([0.5, 1.0, 2.0, 0.5, 2.0, 1e6, 1e-3, 1.0], np.float32)
    rate = np.array([1.0, 1.0, 1.0, 1.0, 1e-30, 1.0, 1.0, 1e-30], np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(conc), jnp.asarray(rate))


def make_numpyro_beta_logprob():
    """numpyro.distributions.Beta(a, b).log_prob at the support's boundary x = 0 and 1, subnormal x,
    1 - 1ulp, and concentrations of 1, < 1 and huge (1e4): log1p(-x) and betaln."""

    def fn(x, a, b):
        return dist.Beta(a, b).log_prob(x)

    x = np.array([0.0, 1.0, 0.0, 1.0, 1e-40, 0.99999994, 0.5, 0.5], np.float32)
    a = np.array([1.0, 1.0, 0.5, 2.0, 0.5, 2.0, 1e4, 1e-3], np.float32)
    b = np.array([1.0, 1.0, 2.0, 0.5, 1.0, 0.5, 1e4, 1e-3], np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(a), jnp.asarray(b))


def make_numpyro_studentt_logprob():
    """numpyro.distributions.StudentT(df, loc, scale).log_prob with df huge (1e8, near-normal: lgamma
    differences cancel), df tiny (1e-3), x of 1e30 and +-inf, and a tiny scale (1e-30)."""

    def fn(x, df, scale):
        return dist.StudentT(df, 0.0, scale).log_prob(x)

    x = np.array([0.0, 1.0, 1e30, np.inf, -np.inf, 1.0, 1e-30, 5.0], np.float32)
    df = np.array([1e8, 1e8, 3.0, 3.0, 1e-3, 1e-3, 1.0, 1e30], np.float32)
    scale = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1e-30, 1.0], np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(df), jnp.asarray(scale))


def make_numpyro_vonmises_logprob():
    """numpyro.distributions.VonMises(loc, concentration).log_prob with concentration tiny (1e-20, 1e-30), large
    (1e4, 1e30: log i0e and the cos(x - loc) - 1 cancellation) at x = loc and x = loc + pi."""

    def fn(x, conc):
        return dist.VonMises(0.0, conc).log_prob(x)

    x = np.array([0.0, np.pi, 0.0, np.pi, 0.0, 1e-4, 0.0, -np.pi], np.float32)
    conc = np.array([1e-20, 1e-20, 1e-30, 1e4, 1e4, 1e4, 1e30, 50.0], np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(conc))


def make_numpyro_binomial_logprob():
    """numpyro.distributions.Binomial(total_count, probs).log_prob with probs exactly 0 and 1 (k = 0 and
    k = n), probs of 1e-40 and 1 - 1ulp, and a large total_count (1e6)."""

    def fn(k, n, p):
        return dist.Binomial(n, probs=p).log_prob(k)

    k = np.array([0.0, 10.0, 5.0, 0.0, 10.0, 1.0, 5e5, 3.0], np.float32)
    n = np.array([10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 1e6, 3.0], np.float32)
    p = np.array([0.0, 1.0, 0.0, 1e-40, 0.99999994, 1e-7, 0.5, 1.0], np.float32)
    return fn, (jnp.asarray(k), jnp.asarray(n), jnp.asarray(p))


def make_scipy_logsumexp():
    """jax.scipy.special.logsumexp with signed weights b (return_sign): rows of all -inf, a +inf, NaN, 3e38
    pairs (the max-shift), and weights that cancel exactly (result log 0 = -inf)."""

    def fn(a, b):
        return jsp.logsumexp(a, axis=-1, b=b, return_sign=True)

    a = np.array([[-np.inf, -np.inf, -np.inf, -np.inf],
                  [np.inf, 0.0, 1.0, 2.0],
                  [3e38, 3e38, 0.0, -3e38],
                  [1.0, 1.0, 2.0, 2.0],
                  [np.nan, 0.0, 0.0, 0.0],
                  [-100.0, -101.0, -1e30, 0.0]], np.float32)
    b = np.array([[1.0, 1.0, 1.0, 1.0],
                  [1.0, 1.0, 1.0, 1.0],
                  [1.0, 1.0, 1.0, 1.0],
                  [1.0, -1.0, 1.0, -1.0],
                  [1.0, 1.0, 1.0, 1.0],
                  [1.0, 1.0, 1.0, 0.0]], np.float32)
    return fn, (jnp.asarray(a), jnp.asarray(b))


def make_scipy_gammaln():
    """jax.scipy.special.gammaln at its zeros x = 1 and 2 (and 1 +- 1ulp), at poles 0, -0, -1, subnormal x,
    negative non-integers, and huge x (1e30, 3e38: x log x overflows)."""

    def fn(x):
        return jsp.gammaln(x)

    x = np.array([1.0, 2.0, 1.0000001, 0.99999994, 0.0, -0.0, -1.0, 1e-40, -0.5, -2.5, 1e30, 3e38, 0.5,
                  np.inf], np.float32)
    return fn, (jnp.asarray(x),)


def make_scipy_xlogy_i0e_erfinv():
    """jax.scipy.special.xlogy at x = 0 (y = 0, y = -1, y = inf), i0e at 0, huge and negative x, and erfinv
    at +-1, 1 - 1ulp, subnormals and just beyond 1."""

    def fn(x, y, z, w):
        return jsp.xlogy(x, y), jsp.i0e(z), jsp.erfinv(w)

    x = np.array([0.0, 0.0, 0.0, 1e-40, 1.0, -0.0, 2.0, 1e30], np.float32)
    y = np.array([0.0, -1.0, np.inf, 1e-40, 0.0, 0.0, 1e30, 1e-30], np.float32)
    z = np.array([0.0, 1e-40, 1e4, -1e4, 1e30, 700.0, -3.0, np.inf], np.float32)
    w = np.array([1.0, -1.0, 0.99999994, -0.99999994, 1e-40, 0.0, 1.0000001, 0.5], np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(y), jnp.asarray(z), jnp.asarray(w))


def make_scipy_norm_logcdf():
    """jax.scipy.stats.norm.logcdf in the far left tail (-10, -40, -1e4, -1e20: log of a cdf far below
    the float32 range, needing the asymptotic series), at 0, the right tail and +-inf."""

    def fn(x):
        return jst.norm.logcdf(x)

    x = np.array([-10.0, -20.0, -38.0, -40.0, -1e4, -1e20, 0.0, 5.0, 10.0, np.inf, -np.inf, np.nan],
                 np.float32)
    return fn, (jnp.asarray(x),)


def make_nn_softplus_bf16():
    """jax.nn.softplus in bfloat16 on +-100, +-inf, the threshold region near 20-30, tiny and exact 0:
    log1p(exp(-|x|)) + max(x, 0) at bf16 resolution."""

    def fn(x):
        return jax.nn.softplus(x)

    x = np.array([-100.0, 100.0, np.inf, -np.inf, 0.0, -0.0, 1e-3, 20.0, 30.0, -20.0, -88.0, 3e38], np.float32)
    return fn, (jnp.asarray(x, jnp.bfloat16),)


def make_nn_standardize():
    """jax.nn.standardize (mean 0, var 1, epsilon 1e-5) on a constant row (variance 0), a row of 1e20
    (variance overflows), one with 1e30 spread, subnormals, and a row with +inf."""

    def fn(x):
        return jax.nn.standardize(x, axis=-1)

    x = np.array([[3.0, 3.0, 3.0, 3.0],
                  [1e20, -1e20, 1e20, -1e20],
                  [1e30, 0.0, 0.0, 0.0],
                  [1e-40, 2e-40, 3e-40, 4e-40],
                  [np.inf, 0.0, 1.0, 2.0],
                  [1.0, 1.0, 1.0, 1.0000001]], np.float32)
    return fn, (jnp.asarray(x),)


def make_nn_glu_log_softmax():
    """jax.nn.glu (x * sigmoid(gate)) with gates of +-100, +-inf and NaN, and jax.nn.log_softmax on a row of
    all -inf, a row with +inf and a row spread over 1e30."""

    def fn(x, z):
        return jax.nn.glu(x, axis=-1), jax.nn.log_softmax(z, axis=-1)

    x = np.array([[1.0, 2.0, 100.0, -100.0],
                  [np.inf, 1.0, -100.0, 100.0],
                  [0.0, 1e30, np.inf, -np.inf],
                  [-1.0, np.nan, 0.0, 1e-40]], np.float32)
    z = np.array([[-np.inf, -np.inf, -np.inf, -np.inf],
                  [np.inf, 0.0, 1.0, 2.0],
                  [1e30, -1e30, 0.0, 1.0],
                  [1e-40, 0.0, -0.0, 1e-40]], np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(z))


def make_flax_layernorm():
    """flax.linen.LayerNorm (params from init: scale 1, bias 0) on a constant row (variance 0, epsilon
    only), a row of 1e20 (E[x^2] overflows), a 1e6-offset row (E[x^2] - E[x]^2 cancels) and subnormals."""

    model = nn.LayerNorm()
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 6), jnp.float32))

    def fn(x):
        return model.apply(params, x)

    x = np.array([[2.0, 2.0, 2.0, 2.0, 2.0, 2.0],
                  [1e20, -1e20, 1e20, -1e20, 0.0, 0.0],
                  [1e6, 1e6 + 1, 1e6 + 2, 1e6 + 3, 1e6 + 4, 1e6 + 5],
                  [1e-40, 2e-40, 0.0, -1e-40, 0.0, 0.0]], np.float32)
    return fn, (jnp.asarray(x),)


def make_flax_rmsnorm_bf16():
    """flax.linen.RMSNorm in bfloat16 (param_dtype float32) on a zero row (epsilon only), a row of 1e20
    (mean square overflows bf16's float32-sized range at 1e38), small values near epsilon, and a huge spread."""

    model = nn.RMSNorm(dtype=jnp.bfloat16)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.bfloat16))

    def fn(x):
        return model.apply(params, x)

    x = np.array([[0.0] * 8,
                  [1e20, 1e20, -1e20, 1e20, 0.0, 0.0, 1.0, 1.0],
                  [1e-3, 2e-3, -1e-3, 0.0, 1e-3, 1e-3, 0.0, 0.0],
                  [1e4, 1.0, 1e-4, 0.0, -1e4, 3.0, 7.0, 1e-2]], np.float32)
    return fn, (jnp.asarray(x, jnp.bfloat16),)


def make_flax_groupnorm():
    """flax.linen.GroupNorm(num_groups=2) on an NHWC tensor whose first group is constant (variance 0)
    and whose second group is a 1e4 offset plus small steps (E[x^2] - E[x]^2 cancellation)."""

    model = nn.GroupNorm(num_groups=2)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 2, 2, 4), jnp.float32))

    def fn(x):
        return model.apply(params, x)

    x = np.zeros((2, 2, 2, 4), np.float32)
    x[0, ..., :2] = 5.0
    x[0, ..., 2:] = 1e4 + np.arange(8, dtype=np.float32).reshape(2, 2, 2) * 1e-1
    x[1, ..., :2] = np.array([1e-40, -1e-40], np.float32)
    x[1, ..., 2:] = np.array([1e19, -1e19], np.float32)
    return fn, (jnp.asarray(x),)


def make_eqx_layernorm():
    """equinox.nn.LayerNorm(shape=6) applied per row (vmap) on a constant row, a 1e7-offset row (the
    variance cancels under float32), a row containing +inf, and a row of 1e-40 subnormals."""

    ln = eqx.nn.LayerNorm(6)

    def fn(x):
        return jax.vmap(ln)(x)

    x = np.array([[7.0] * 6,
                  [1e7, 1e7 + 1, 1e7 + 2, 1e7 + 3, 1e7 + 4, 1e7 + 5],
                  [np.inf, 0.0, 1.0, 2.0, 3.0, 4.0],
                  [1e-40, 0.0, -1e-40, 1e-40, 0.0, 0.0]], np.float32)
    return fn, (jnp.asarray(x),)
