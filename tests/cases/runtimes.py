"""Divergences between runtimes that are not XLA's flags: each culprit line carries a
`# planted: <what>` comment (issue 11)."""

import jax
import jax.numpy as jnp
import numpy as np


def make_log_subnormal():
    """log of subnormal float32 inputs: XLA on CPU treats them as zero (DAZ); the true log is finite."""

    def fn(x):
        return jnp.log(x) * 0.5  # planted: log subnormal

    x = np.array([1e-40, 3e-42, 2.5e-39, 0.5, 2.0, 7.0], np.float32)
    return fn, (jnp.asarray(x),)


def make_nan_to_int():
    """Casting NaN, inf and out-of-range floats to int32: implementation-defined."""

    def fn(x):
        return (x * 2.0).astype(jnp.int32)  # planted: float to int

    return fn, (jnp.asarray(np.array([np.nan, np.inf, -np.inf, 3e9, 1.25, -7.5], np.float32)),)


def make_floor_tan():
    """A 1-ULP difference in tan that floor turns into a whole integer."""

    def fn(x):
        t = jnp.tan(x)  # planted: tan
        return jnp.floor(t * 8.0)  # planted: floor

    # tan(x) * 8 lands next to an integer: a 1-ULP difference in tan decides which side floor takes.
    base = np.arctan(np.concatenate([np.arange(-80, 0), np.arange(1, 81)]) / 8.0).astype(np.float32)
    x = np.concatenate([base + k * np.spacing(base) for k in range(-3, 4)]).astype(np.float32)
    return fn, (jnp.asarray(x),)


def make_sort_ties():
    """Sorting values with ties and ±0: the order among equal keys belongs to the implementation."""

    def fn(x, payload):
        order = jnp.argsort(x)  # planted: argsort ties
        return payload[order]

    x = np.array([0.0, -0.0, 1.0, 1.0, -3.0, 0.0, 2.0, 1.0], np.float32)
    return fn, (jnp.asarray(x), jnp.arange(8, dtype=jnp.float32))


# Real-world reports, reproduced on this machine's runtimes (issue 11: "how it will be checked").


def make_atan2_miscompile():
    """openxla/xla#44705 (jax#38681): xor(b, b) is folded to 0 and atan2(0, 0) is then constant-folded
    to NaN under jit, where IEEE 754 (and eager) give +0: wrong code in the compiler."""

    def fn(a):
        b = jax.lax.ne(a, 0)
        c = jax.lax.ne(a, 0)
        e = jax.lax.convert_element_type(jax.lax.bitwise_xor(b, c), jnp.float32)
        return jax.lax.atan2(e, e)  # planted: atan2 miscompile

    return fn, (jnp.arange(5),)


def make_max_nan():
    """tensorflow#120298: max and min of a row with a NaN. JAX propagates the NaN; TensorFlow's XLA
    (a jax2tf SavedModel) compiles with fast min/max on by default and drops it."""

    def fn(v):
        return jnp.max(v, axis=-1)  # planted: max nan

    return fn, (jnp.asarray(np.array([[7.0, np.nan, 4.0, 9.0, 2.0]], np.float32)),)


def make_round_half():
    """jax#4952: lax.round rounds half away from zero; a converter that maps it to a half-to-even
    Round (ONNX's, tf.round) changes every x.5. jax2onnx 0.17 does: onnx-ref agrees with onnxruntime."""

    def fn(x):
        return jax.lax.round(x)  # planted: round half

    return fn, (jnp.asarray(np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, 3.7], np.float32)),)


def make_argsort_subnormal():
    """jax#24280: argsort of keys with ±0 and the subnormal 1.4e-45. XLA on CPU compares the subnormal
    as zero (DAZ), so eager ties it with 0.0; ONNX Runtime orders it after the zeros, as IEEE does."""

    def fn(x):
        return jnp.argsort(x)  # planted: argsort subnormal

    x = np.array([-0.0, 1.401298464324817e-45, 1.1, -0.0, 5.960464477539063e-08, -2.00001, 1e6, 722801.375,
                  0.0, -1.1], np.float32)
    return fn, (jnp.asarray(x),)


def make_negated_zero_atan2():
    """atan2 of a negated zero: -(+0) is -0, and atan2(-0, -1) is -π where atan2(+0, -1) is π. TFLite's
    NEG gives +0 (0 - x); ±0 compare equal, so only its sign shows the divergence (issue 20)."""

    def fn(x, y):
        return jnp.arctan2(-x, y)  # planted: negated zero

    x = np.array([0.0, 0.0, 1.0, -0.0, 2.0], np.float32)
    y = np.array([-1.0, -2.0, -1.0, -1.0, 3.0], np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(y))


def make_masked_fill():
    """A -inf mask fill (attention-style): TFLite's converter stores the -inf constant as -3.4028235e38,
    so a row masked everywhere gives -FLT_MAX where eager gives -inf (issue 20)."""

    def fn(s, m):
        z = jnp.where(m, s, -jnp.inf)  # planted: mask fill
        return jax.nn.logsumexp(z, axis=-1), z.max(axis=-1)

    s = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    m = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 1]], bool)
    return fn, (jnp.asarray(s), jnp.asarray(m))


def make_average_pool():
    """A 3x3 window sum divided by 9: TFLite's converter fuses the two into one AVERAGE_POOL_2D, which
    sums in its own order; the division alone would be exact (issue 20)."""

    def fn(x):
        s = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "VALID")
        return s / 9.0  # planted: average pool

    x = np.random.default_rng(0).normal(size=(1, 8, 8, 2)).astype(np.float32)
    return fn, (jnp.asarray(x),)


def make_bf16_matmul():
    """A bf16 matmul: IREE's llvm-cpu matmul accumulates into its bf16 output, a vector reduction tile at a
    time in float32, so the running sum is rounded to bf16 between tiles; eager accumulates in float32 and
    rounds once (issue 20)."""

    def fn(a, b):
        return jnp.dot(a, b)  # planted: bf16 matmul

    rng = np.random.default_rng(0)
    a = rng.normal(size=(32, 64)).astype(jnp.bfloat16)
    b = rng.normal(size=(64, 64)).astype(jnp.bfloat16)
    return fn, (jnp.asarray(a), jnp.asarray(b))


def make_bf16_flax_dense():
    """A flax linen Dense in bf16: its dot accumulates in the bf16 output on IREE as a plain matmul does; the
    fix says how to hand the layer a dot_general with a float32 accumulator."""
    from flax import linen as nn

    layer = nn.Dense(64, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, use_bias=False)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(32, 64)), jnp.bfloat16)
    params = layer.init(jax.random.PRNGKey(0), x)
    return (lambda p, x: layer.apply(p, x)), (params, x)  # planted: flax dense


def make_two_bf16_matmuls():
    """Two bf16 matmuls in a row (lm1b's query and output projections): IREE accumulates both into their bf16
    outputs, so a float32 accumulator on the one that carries most of the difference leaves the other's
    rounding in; on both, the paths agree again (issue 20, found on flax's lm1b and ResNet)."""

    def fn(a, b, c):
        h = jnp.dot(a, b)  # planted: first bf16 matmul
        return jnp.dot(h, c)  # planted: second bf16 matmul

    rng = np.random.default_rng(0)
    a, b, c = (rng.normal(size=s).astype(jnp.bfloat16) for s in ((16, 64), (64, 64), (64, 32)))
    return fn, (jnp.asarray(a), jnp.asarray(b), jnp.asarray(c))


def make_bf16_patch_conv():
    """vit_jax's patch embedding in bf16 (an 8x8 stride-8 convolution of 3 channels): IREE adds the 3
    channels of each window position in float32 and rounds the running sum to bf16 between positions (its
    vector_reduction = [0, 0, 0, 0, 1, 1, 3]); eager accumulates all 192 in float32 and rounds once."""

    def fn(x, w):
        return jax.lax.conv_general_dilated(x, w, (8, 8), "VALID",  # planted: patch conv
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    rng = np.random.default_rng(0)
    return fn, (jnp.asarray(rng.normal(size=(2, 32, 32, 3)), jnp.bfloat16),
                jnp.asarray(rng.normal(size=(8, 8, 3, 64)) * 0.1, jnp.bfloat16))


def make_erfc():
    """erfc for inputs up to 6: jax2onnx writes it as 1 - Erf(x), which cancels where erf(x) rounds to 1 in
    float32 (erfc(4) = 1.5e-8 becomes 0); onnx and onnx-ref alike: the converter (issue 20)."""

    def fn(x):
        return jax.scipy.special.erfc(x)  # planted: erfc

    return fn, (jnp.asarray(np.linspace(0.5, 6.0, 12, dtype=np.float32)),)


def make_cubic_resize():
    """A cubic upsampling: jax2onnx maps jax.image.resize to one ONNX Resize with exclude_outside=0 (the
    default), where JAX renormalizes the weights inside the image (exclude_outside=1): 0.06 apart at the
    border. Returning every intermediate converts JAX's own ops instead, whose values agree: a perturbed
    capture (issue 20)."""

    def fn(x):
        return jax.image.resize(x, (1, 12, 12, 1), "cubic", antialias=False)  # planted: cubic resize

    return fn, (jnp.asarray(np.random.default_rng(0).normal(size=(1, 5, 5, 1)).astype(np.float32)),)


def make_logical_shift():
    """shift_right_logical of negative int32: TFLite shifts arithmetically, (-1, 16) gives -1 where 65535 is
    declared (issue 20)."""

    def fn(x, s):
        return jax.lax.shift_right_logical(x, s)  # planted: logical shift

    return fn, (jnp.array([-1, -16, 255, -1, 40], jnp.int32), jnp.array([16, 2, 1, 31, 3], jnp.int32))


def make_integer_rem():
    """lax.rem truncates (the sign of the dividend); TFLite's FLOOR_MOD floors: rem(-7, 2) is -1, TFLite 1."""

    def fn(x, y):
        return jax.lax.rem(x, y)  # planted: remainder

    return fn, (jnp.array([-7, 7, -7, 5, 9], jnp.int32), jnp.array([2, -2, 3, 3, 4], jnp.int32))


def make_tiny_sigmoid():
    """sigmoid of large negative inputs: ONNX Runtime's is accurate in absolute terms only, 0 at -20 where the
    result is 2.06e-9."""

    def fn(x):
        return jax.nn.sigmoid(x)  # planted: sigmoid

    return fn, (jnp.array([-20.0, -30.0, -1.0, 0.5, 3.0], jnp.float32),)


def make_fp8_overflow():
    """A cast to float8_e4m3fn beyond its range: JAX gives NaN (the format has no inf), ONNX Runtime saturates
    at 448."""

    def fn(x):
        return x.astype(jnp.float8_e4m3fn).astype(jnp.float32)  # planted: fp8 cast

    return fn, (jnp.array([500.0, 1000.0, -1e5, 448.0, 3.3], jnp.float32),)


def make_integer_division_by_zero():
    """An integer x / 0: StableHLO leaves it to the implementation. XLA gives -1, ONNX's reference evaluator 0
    (numpy's), ONNX Runtime and TFLite refuse to run; neither value is "exact" (issue 20)."""

    def fn(x, y):
        return jax.lax.div(x, y)  # planted: division by zero

    return fn, (jnp.array([7, -7, 5, 0, -3, 9], jnp.int32), jnp.array([2, 2, 0, 0, 0, -2], jnp.int32))


def make_gather_out_of_bounds():
    """Indexing past the end: StableHLO's gather clamps start indices into bounds (XLA gives the last row);
    IREE's single-index lowering drops the clamp and reads whatever memory holds (iree-org/iree#24881)."""

    def fn(x, i):
        return x[i]  # planted: gather out of bounds

    return fn, (100.0 + 1.5 * jnp.arange(8, dtype=jnp.float32), jnp.array([0, 3, 7, 8, 11, 2, 30], jnp.int32))


def make_maximum_nan():
    """jnp.maximum propagates a NaN of either operand; TFLite's MAXIMUM is x > y ? x : y, which keeps only the
    second operand's: maximum(nan, 2) is 2 on TFLite (both kernel sets)."""

    def fn(x, y):
        return jnp.maximum(x, y)  # planted: maximum nan

    return fn, (jnp.array([1.0, np.nan, 3.0, np.nan, -2.0], jnp.float32),
                jnp.array([np.nan, 2.0, 1.0, np.nan, 5.0], jnp.float32))


def make_complex_abs():
    """|z| of complex64 values near the ends of float32's range: JAX scales (hypot); IREE computes
    sqrt(re² + im²) and gives inf for 3e30 + 4e30j and 0 for 1e-30 + 1e-30j."""

    def fn(z):
        return jnp.abs(z)  # planted: complex abs

    return fn, (jnp.array([3e30 + 4e30j, 1e-30 + 1e-30j, 3 + 4j, -2e25 + 1e25j], jnp.complex64),)


def make_negative_base_pow():
    """lax.pow with a negative base and integer exponents: IREE computes exp(y · log x) and gives NaN for
    (-2) ** 3, where the power is -8 (issue 20: "explicit products for IREE's pow")."""

    def fn(x, y):
        return jax.lax.pow(x, y)  # planted: pow

    x = np.array([-2.0, -1.5, 0.0, 2.0, 1e-3, 3.7, -3.0, 10.0], np.float32)
    y = np.array([3.0, 2.0, 2.0, 0.5, 2.0, 2.5, 2.0, 7.0], np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(y))


def make_conv_then_pool():
    """flax's mnist CNN in small: a convolution (TFLite sums in another order), then a 2x2 average pool that
    TFLite runs as one AVERAGE_POOL_2D on inputs that already differ: each side is judged on the same inputs,
    and everything is rounding (issue 20, found on flax's examples/mnist)."""

    def fn(x, w, v):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        y = jax.lax.reduce_window(y, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0  # planted: pool
        return y.reshape(y.shape[0], -1) @ v

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 12, 12, 1)).astype(np.float32)
    w = (rng.normal(size=(3, 3, 1, 8)) / 3).astype(np.float32)
    v = (rng.normal(size=(6 * 6 * 8, 10)) / 17).astype(np.float32)
    return fn, (jnp.asarray(x), jnp.asarray(w), jnp.asarray(v))


def make_two_pools():
    """flax's mnist CNN without its dense layers: conv → relu → 2x2 average pool, twice. TFLite fuses each
    relu into its conv and each window sum with its division into an AVERAGE_POOL_2D, and names the tensors
    after JAX's ops ("jit(fn)/div", "jit(fn)/div1", "max;...conv_general_dilated1"): the served model's
    tensors are found by name where their values are not the capture's (issue 20)."""

    def pool(y):
        return jax.lax.reduce_window(y, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0

    def fn(x, w1, w2):
        y = pool(jax.nn.relu(jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME",
                                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))))
        return pool(jax.nn.relu(jax.lax.conv_general_dilated(y, w2, (1, 1), "SAME",
                                                           dimension_numbers=("NHWC", "HWIO", "NHWC"))))

    rng = np.random.default_rng(1)
    return fn, (jnp.asarray(rng.normal(size=(2, 12, 12, 1)).astype(np.float32)),
                jnp.asarray((rng.normal(size=(3, 3, 1, 8)) / 3).astype(np.float32)),
                jnp.asarray((rng.normal(size=(3, 3, 8, 16)) / 8).astype(np.float32)))


def make_flax_max_pool():
    """A flax conv → relu → max_pool → avg_pool → dense. jax2onnx converts ``nn.max_pool`` whole into a
    MaxPool both ONNX runtimes run; the program that returns every intermediate is converted primitive by
    primitive into a MaxPool neither can run (issue 20): no per-op values, said, explained from the outputs."""
    import flax.linen as nn

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(8, (3, 3))(x))
            x = nn.max_pool(x, window_shape=(3, 3), strides=(2, 2), padding="SAME")
            x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
            return nn.Dense(4)(x.reshape(x.shape[0], -1))

    x = jnp.asarray(np.random.default_rng(0).normal(size=(1, 8, 8, 3)).astype(np.float32))
    params = Net().init(jax.random.PRNGKey(0), x)
    return Net().apply, (params, x)
