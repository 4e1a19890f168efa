"""A corpus of 14 small data-processing / ML programs pushed to the edges of their domain, each one
found to differ from eager on at least one of tflite, onnx, onnx-ref, iree (jaxparity explain,
--paths eager,jit,tflite,onnx,onnx-ref,iree; see SCORES.md).

Each factory returns (fn, args); its docstring says what public code it mimics and which edge its
inputs push. Inputs are small (<= 64 elements) and fixed (no randomness).
"""

import jax
import jax.numpy as jnp
import numpy as np


def make_clip_lo_gt_hi():
    """Per-feature clipping with learned / configured bounds (gradient clipping, value-range clipping)
    via lax.clamp: some bounds are inverted (lo > hi) and some inputs are NaN."""

    def fn(x, lo, hi):
        return jax.lax.clamp(lo, x, hi)

    x = np.array([0.5, -3.0, 4.0, np.nan, 2.0, -1.0, 0.0, 10.0], np.float32)
    lo = np.array([0.0, 0.0, 0.0, 0.0, 3.0, 1.0, 1.0, 5.0], np.float32)
    hi = np.array([1.0, 1.0, 1.0, 1.0, 1.0, -1.0, 0.5, 2.0], np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(lo), jnp.asarray(hi))


def make_digitize_buckets():
    """Bucketing a numeric feature (pandas.cut / tf.feature_column.bucketized_column) with np.digitize:
    values exactly on a boundary (ties), NaN, +-inf and a repeated boundary."""

    def fn(x):
        bounds = jnp.array([-1.0, 0.0, 0.0, 2.5, 10.0], jnp.float32)
        return jnp.digitize(x, bounds)

    x = np.array([-np.inf, -1.0, -0.0, 0.0, 1e-45, 2.5, 9.999999, 10.0, np.inf, np.nan, -5.0, 3.0], np.float32)
    return fn, (jnp.asarray(x),)


def make_focal_loss():
    """Sigmoid focal loss (RetinaNet, optax.sigmoid_focal_loss): BCE from logits via log_sigmoid, times
    (1 - p_t) ** gamma; logits of +-100, +-inf and exact 0."""

    def fn(logits, labels):
        p = jax.nn.sigmoid(logits)
        ce = -(labels * jax.nn.log_sigmoid(logits) + (1 - labels) * jax.nn.log_sigmoid(-logits))
        p_t = p * labels + (1 - p) * (1 - labels)
        return ce * (1 - p_t) ** 2.0

    logits = np.array([100.0, -100.0, 30.0, -30.0, 0.0, np.inf, -np.inf, 17.0], np.float32)
    labels = np.array([0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0], np.float32)
    return fn, (jnp.asarray(logits), jnp.asarray(labels))


def make_gumbel_max():
    """Categorical sampling by the Gumbel-max trick (jax.random.categorical) with the uniform noise
    given: u = 0 and u = 1 give -inf/+inf Gumbel noise, and -inf (masked) logits make -inf - -inf = NaN."""

    def fn(logits, u):
        g = -jnp.log(-jnp.log(u))
        return jnp.argmax(logits + g, axis=-1)

    logits = np.array([[0.0, 1.0, 2.0, -np.inf],
                       [-np.inf, 0.5, 0.5, 0.0],
                       [1.0, 1.0, 1.0, 1.0],
                       [3.0, -np.inf, 0.0, 0.0]], np.float32)
    u = np.array([[0.5, 0.5, 0.5, 1.0],
                  [1.0, 0.3, 0.3, 0.9],
                  [0.0, 0.0, 0.7, 0.2],
                  [0.5, 0.0, 1.0, 1.0]], np.float32)
    return fn, (jnp.asarray(logits), jnp.asarray(u))


def make_one_hot_labels():
    """Label smoothing over one-hot targets (optax.smooth_labels): jax.nn.one_hot with an ignore label
    -1 and a label == num_classes, both giving an all-zero row."""

    def fn(labels):
        oh = jax.nn.one_hot(labels, 5)
        return oh * 0.9 + 0.1 / 5

    return fn, (jnp.array([0, 4, -1, 5, 2, 7], jnp.int32),)


def make_quantize_uint8():
    """Saving an image as 8 bits (PIL / tf.image.convert_image_dtype without saturate): (x * 255)
    cast to uint8 with values outside [0, 1] (negative, > 1, huge)."""

    def fn(img):
        return (img * 255.0 + 0.5).astype(jnp.uint8)

    img = np.array([0.0, 0.5, 1.0, 1.2, -0.1, -2.0, 3.0, 1e6, 0.999], np.float32)
    return fn, (jnp.asarray(img),)


def make_topk_scores():
    """Top-k ranking of retrieval scores (recall@k, beam search): scores with NaN (a failed score), ties
    and +-0; lax.top_k orders NaN above everything and ties by index."""

    def fn(scores):
        vals, idx = jax.lax.top_k(scores, 4)
        return vals, idx

    s = np.array([[0.5, np.nan, 0.9, 0.9, -0.0, 0.0, 0.1, 0.9],
                  [1.0, 1.0, 1.0, 1.0, 1.0, -np.inf, np.inf, 1.0]], np.float32)
    return fn, (jnp.asarray(s),)


def make_log2_bucket():
    """Exponent bucketing of magnitudes (log-scale histograms, power-of-two size classes):
    floor(log2(x)) at exact powers of two, where a 1-ULP low log2 drops a whole bucket."""

    def fn(x):
        return jnp.floor(jnp.log2(x)).astype(jnp.int32)

    x = np.array([2.0 ** k for k in range(-6, 26, 1)], np.float32)
    return fn, (jnp.asarray(x),)


def make_float_mask_to_bool():
    """An attention mask that arrives as float (HF tokenizers' 0./1. masks) cast to bool, then used to
    fill scores: NaN, -0.0 and 0.5 entries in the mask."""

    def fn(scores, mask):
        return jnp.where(mask.astype(bool), scores, -1e9)

    scores = np.linspace(-1, 1, 8, dtype=np.float32)
    mask = np.array([1.0, 0.0, -0.0, np.nan, 0.5, 1e-40, -1.0, np.inf], np.float32)
    return fn, (jnp.asarray(scores), jnp.asarray(mask))


def make_masked_log_softmax():
    """A policy's log-probabilities over legal actions (masked log_softmax, e.g. in AlphaZero-style
    code): illegal actions set to -inf, one state with no legal action, one with huge logits."""

    def fn(logits, legal):
        z = jnp.where(legal, logits, -jnp.inf)
        return jax.nn.log_softmax(z, axis=-1)

    logits = np.array([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1e30, -1e30, 3e38, 0.0]], np.float32)
    legal = np.array([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]], bool)
    return fn, (jnp.asarray(logits), jnp.asarray(legal))


def make_log1p_counts():
    """log1p transform of counts / rates (feature preprocessing, Poisson losses): log1p of tiny rates
    (1e-10, 1e-7), where log(1 + x) rounds 1 + x to 1 and loses everything, and of -1 (-> -inf)."""

    def fn(x):
        return jnp.log1p(x)

    x = np.array([1e-10, 1e-7, 3e-5, -1e-9, 0.5, 10.0, -1.0, 1e30, 0.0, -0.0], np.float32)
    return fn, (jnp.asarray(x),)


def make_elu_small():
    """The ELU activation (jax.nn.elu, expm1 inside): tiny negative pre-activations where exp(x) - 1
    cancels to 0 or a coarse multiple of 2**-24, plus -inf and -0."""

    def fn(x):
        return jax.nn.elu(x)

    x = np.array([-1e-10, -3e-8, -1e-6, -1e-3, -1.0, -20.0, -np.inf, -0.0, 0.0, 2.0], np.float32)
    return fn, (jnp.asarray(x),)


def make_gelu_tanh():
    """GELU with the tanh approximation (jax.nn.gelu default, BERT/GPT MLPs) on large |x| (±1e4, where
    x**3 overflows the inner polynomial for |x| > 1e13) and NaN."""

    def fn(x):
        return jax.nn.gelu(x, approximate=True)

    x = np.array([-1e4, -20.0, -5.0, -1.0, 0.0, 1.0, 5.0, 1e4, 1e15, -1e15, np.nan, np.inf], np.float32)
    return fn, (jnp.asarray(x),)


def make_center_crop():
    """A crop around a detected center (keypoint / object crop): start = center - size // 2 is computed
    per call, and goes negative or past the end; lax.dynamic_slice wraps a negative start (numpy-style)
    and then clamps it so the whole (6, 6) window fits."""

    def fn(img, center):
        start = center - 3
        return jax.lax.dynamic_slice(img, (start[0], start[1]), (6, 6))

    img = np.arange(64, dtype=np.float32).reshape(8, 8)
    return fn, (jnp.asarray(img), jnp.array([1, 7], jnp.int32))
