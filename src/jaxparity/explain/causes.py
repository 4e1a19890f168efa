"""The known causes of divergence, as data: what each is, where it can happen, the experiment that
confirms or refutes it, and the fix. The ``mechanism`` stage runs the experiments (``mechanism.rules``, a rule
per kind); nothing here guesses.

Each cause names the kind of experiment that decides it (``Cause.experiment``): the kinds, and the rule that runs
each, are in ``mechanism.rules``.

A cause with an ``op_check`` is first decided on the diverging op itself: the candidate semantics of
``localize.semantics`` applied to the op's own captured inputs. Where that evidence exists it decides;
the whole-program experiment then only proves (or fails to prove) the fix, since one flag can change
several things at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..localize.elements import UNARY_MATH
from ..localize.program import RANDOM_PRIMITIVES
from ..paths import CAPABILITIES

__all__ = ["CAUSES", "Cause"]

# Where a cause can occur, named by what a path can do (``paths.CAPABILITIES``), never by a path's name: a path
# runs a cause's experiment where it has one of them.
XLA = ("takes_xla_options",)  # XLA compiles the whole program, and its options reach it
CONVERTED = ("other_compiler",)  # another runtime compiles its own artifact: no XLA options to flip
EVERY = tuple(CAPABILITIES)  # any path


@dataclass(frozen=True, kw_only=True)
class Cause:
    id: str
    title: str
    description: str
    runs_on: tuple[str, ...]  # path capabilities under which the cause can occur and its experiment run
    experiment: str  # its kind (``mechanism.rules``)
    primitives: tuple[str, ...] | None = None  # where it shows (None: any op)
    dtypes: tuple[str, ...] | None = None  # declared dtypes it affects (None: any float)
    devices: tuple[str, ...] = ("cpu", "gpu", "tpu")  # platforms where it happens
    options: tuple[tuple[str, str], ...] = ()  # XLA options the recompile experiment sets
    candidates: tuple[str, ...] = ()  # interpreter candidates for a fingerprint experiment
    fix: str = ""
    op_check: str | None = None  # candidate semantics checked on the diverging op's inputs ("fma")
    # The fix where the path is another runtime (TFLite, ONNX, IREE): XLA's flags do nothing there.
    runtime_fix: str = ""
    # Correct implementations may show it (a sum's order, an FMA, an accurate math library): within the ops'
    # error bounds it is rounding noise (``explain.noise``), not a fault.
    rounding: bool = False
    # It holds on elements of its own (subnormal ones, rows that cancel) and can stand beside another mechanism in
    # the same difference: said as "also" where another cause leads.
    beside: bool = False


CAUSES: tuple[Cause, ...] = (
    Cause(
        id="excess-precision",
        title="elided bf16/f16 rounding (excess precision)",
        description="XLA computes bf16/f16 ops in float32 and, allowed to keep 'excess precision', drops "
        "the rounding back to the declared narrow dtype between ops, so values the program declares "
        "as bf16 carry float32 precision into the next op.",
        dtypes=("bfloat16", "float16"),
        runs_on=XLA,
        experiment="recompile",
        options=(("xla_allow_excess_precision", "false"),),
        op_check="widened",
        fix="compile with xla_allow_excess_precision=false (jit/export: compiler_options; TensorFlow "
        "Serving: XLA_FLAGS=--xla_allow_excess_precision=false in the server's environment), or "
        "make the model round where it declares: jaxparity.fixes.round_like_declared(fn)",
    ),
    Cause(
        id="narrow-rounding-skipped",
        title="bf16/f16 rounding skipped by the system that produced these outputs",
        description="Outputs of a runtime with no XLA options to flip (IREE, ONNX, TFLite) or read from a "
        "file are matched against candidate semantics: keeping a narrow result in float32 where it is immediately widened is what XLA's "
        "excess precision does; computing every bf16 value in float32 is what a runtime without bf16 "
        "arithmetic, or one that skips the rounding of inputs too, does.",
        dtypes=("bfloat16", "float16"),
        runs_on=("observed",) + CONVERTED,
        experiment="fingerprint",
        candidates=("skip-widened", "f32-everywhere"),
        op_check="kept-wide",
        fix="on the serving system: XLA_FLAGS=--xla_allow_excess_precision=false (TensorFlow Serving) or "
        "compiler_options={'xla_allow_excess_precision': False}; or make the model round where it declares "
        "with jaxparity.fixes.round_like_declared(fn), which no runtime can skip",
        runtime_fix="no flag of XLA's reaches this runtime: it computes bf16/f16 arithmetic in float32 (IREE: "
        "iree-convert-bf16-arith-to-f32); compute that part of the model in float32 on every path, or compare "
        "with a tolerance; the explanation says whether round_like_declared(fn) was tried and held",
    ),
    Cause(
        id="algebraic-rewrite",
        title="algebraic rewrite by the HLO simplifier (e.g. x / c -> x * (1/c))",
        description="XLA's algebraic simplifier rewrites expressions into forms that are equal in exact "
        "arithmetic but round differently, such as division by a constant into multiplication by its "
        "reciprocal.",
        primitives=("div", "rsqrt", "sqrt", "pow", "exp", "log", "sub", "add", "mul", "reduce_sum"),
        runs_on=XLA,
        experiment="recompile",
        options=(("xla_disable_hlo_passes", "algsimp"),),
        fix="write the cheaper form in the model (x * (1/c)) so every path computes it, or compile with "
        "xla_disable_hlo_passes=algsimp (slower)",
        rounding=True,
    ),
    Cause(
        id="fma-contraction",
        title="FMA contraction and other backend (LLVM) optimizations",
        description="The CPU/GPU backend fuses a multiply and an add into one fused multiply-add, which "
        "rounds once instead of twice, or reassociates arithmetic inside a fusion.",
        primitives=("add", "sub", "mul", "reduce_sum", "dot_general"),
        dtypes=("float32", "float64"),
        devices=("cpu", "gpu"),
        runs_on=XLA,
        experiment="recompile",
        options=(("xla_backend_optimization_level", "0"),),
        candidates=("fma-contraction",),
        op_check="fma",
        fix="compile with xla_backend_optimization_level=0 (much slower), or, where the path is the side nearer "
        "the f64 ideal (a fused multiply-add rounds once), accept it within a tolerance",
        rounding=True,
    ),
    Cause(
        id="fast-math",
        title="fast math",
        description="Fast-math code generation lets the backend ignore NaN/inf and reassociate floating "
        "point arithmetic.",
        devices=("cpu",),
        runs_on=XLA,
        experiment="recompile",
        options=(("xla_cpu_enable_fast_math", "false"),),
        fix="compile with xla_cpu_enable_fast_math=false",
    ),
    Cause(
        id="fast-min-max",
        title="fast min/max that drops NaN",
        description="XLA on CPU may compute max and min without propagating NaN (a comparison and a select: "
        "max(NaN, x) gives x). JAX compiles with it off; TensorFlow's XLA (a jax2tf SavedModel in TF "
        "Serving) turns it on by default.",
        primitives=("max", "min", "reduce_max", "reduce_min", "argmax", "argmin", "clamp"),
        devices=("cpu",),
        runs_on=XLA,
        experiment="recompile",
        options=(("xla_cpu_enable_fast_min_max", "false"),),
        fix="compile with xla_cpu_enable_fast_min_max=false (TensorFlow Serving: "
        "XLA_FLAGS=--xla_cpu_enable_fast_min_max=false in the server's environment), or keep NaN out of max/min",
    ),
    Cause(
        id="device-arithmetic",
        title="the accelerator's own arithmetic (float32 products as bfloat16 passes, approximate functions)",
        description="A TPU computes float32 matrix products from bfloat16 products (1 pass by default, 3 at HIGH, "
        "6 at HIGHEST) and tanh, log, expm1... to hundreds of ULP (BENCHMARKS.md); the host to a few. Decided on "
        "the carrying op alone on the device, against host emulations of the passes and the exact result.",
        primitives=None, dtypes=None, devices=("cpu", "gpu", "tpu"), runs_on=EVERY,  # the experiment finds the side
        experiment="device-arithmetic",
        fix="set the matmul precision to highest on the accelerator's side; compute the function another way",
    ),
    Cause(
        id="matmul-precision",
        title="reduced matmul precision (TF32 or bf16 passes)",
        description="On GPUs and TPUs, float32 matmuls and convolutions run by default with TF32 or "
        "bf16 inputs unless the precision is set to highest.",
        primitives=("dot_general", "conv_general_dilated"),
        dtypes=("float32",),
        devices=("gpu", "tpu"),
        runs_on=("compiled_in_process",),
        experiment="matmul-precision",
        fix="jax.default_matmul_precision('highest'), or precision=lax.Precision.HIGHEST on the op",
    ),
    Cause(
        id="partitioned-reduction",
        title="a reduction split across devices (partial sums combined by a collective)",
        description="Sharded over a mesh, a sum over a split dimension is computed as one partial sum per "
        "device, combined by an all-reduce or reduce-scatter: another order of additions than one device's.",
        primitives=("reduce_sum", "dot_general", "conv_general_dilated", "cumsum", "reduce_window_sum"),
        runs_on=("compiled_in_process",),
        experiment="partition",
        fix="nothing is wrong where the difference is within the reduction's error bound: compare sharded and "
        "unsharded runs with a tolerance; or keep the reduced dimension unsplit (shard another dimension)",
        rounding=True,
    ),
    Cause(
        id="stored-constant",
        title="a constant stored otherwise by the converter (e.g. -inf as the largest finite float)",
        description="The op computes a constant (no input of the case reaches it), and the runtime's own artifact "
        "holds another value for it: the converter folded or stored the constant its own way (TFLite stores a "
        "-inf mask fill as -3.4028235e38). The runtime is not wrong; the model it runs is not the one declared.",
        runs_on=CONVERTED,
        experiment="artifact",
        fix="write the constant in the model as the runtime stores it (a finite fill such as "
        "jnp.finfo(jnp.float32).min in place of -jnp.inf), so every path computes with the same value",
    ),
    Cause(
        id="narrow-accumulation",
        title="a narrow dot or convolution accumulated in its narrow output (the running sum rounded between "
        "blocks)",
        description="The runtime adds a bf16/f16 dot's or convolution's products in float32 a block at a time and "
        "stores the running sum in the narrow output between blocks, rounding it each time (IREE's llvm-cpu "
        "matmul and convolution accumulate into their bf16 output, tiled by their vector reduction size); XLA "
        "accumulates every term in float32 and rounds once.",
        primitives=("dot_general", "conv_general_dilated"),
        dtypes=("bfloat16", "float16"),
        runs_on=CONVERTED,
        experiment="artifact",
        fix="accumulate in float32 on every path: preferred_element_type=jnp.float32 on the dot, then cast to "
        "the narrow dtype",
    ),
    Cause(
        id="converter-decomposition",
        title="a converter's decomposition of one op into several kernels",
        description="The converter writes one JAX op as several kernels of the runtime (jax2onnx computes erfc "
        "as 1 - Erf(x), which cancels where erf(x) rounds to 1), which can lose the accuracy the op declares.",
        runs_on=CONVERTED,
        experiment="artifact",
        fix="report the decomposition to the converter's maintainers with this report (jaxparity reduce writes a "
        "standalone reproducer); until then keep the op's inputs where the decomposition is accurate, or compute "
        "that function another way in the model",
    ),
    Cause(
        id="kernel-attribute",
        title="a kernel attribute the converter chose otherwise (another semantics of the op)",
        description="The converter maps a JAX op to a kernel whose attributes select among semantics (ONNX "
        "Resize's exclude_outside, cubic_coeff_a, coordinate_transformation_mode) and chooses one that is not "
        "JAX's: jax.image.resize renormalizes its cubic weights inside the image, Resize with exclude_outside=0 "
        "does not.",
        runs_on=CONVERTED,
        experiment="artifact",
        fix="set the attribute on the converted model's node, and report the converter's choice to its maintainers",
    ),
    Cause(
        id="fused-kernel",
        title="several ops computed by one kernel of the runtime (its own order of operations)",
        description="The runtime's artifact computes several JAX ops as one kernel (TFLite turns a reduce_window "
        "sum and a division into one AVERAGE_POOL_2D), which sums and scales in its own order. The region run "
        "alone on the runtime must reproduce the path's values; within the error bound of its sums neither "
        "side is wrong.",
        runs_on=CONVERTED,
        experiment="artifact",
        fix="nothing is wrong where both sides are within the bound: compare with a tolerance (the smallest "
        "passing --ulp / --atol is printed)",
        rounding=True,
    ),
    Cause(
        id="reduction-order",
        title="reduction order (expected rounding noise)",
        description="Sums, dot products and convolutions add their terms in an implementation-chosen "
        "order; different orders give results that differ within a known error bound.",
        primitives=("reduce_sum", "dot_general", "conv_general_dilated", "cumsum", "reduce_window_sum"),
        runs_on=XLA + CONVERTED + ("op_by_op", "declared", "observed"),
        experiment="noise-bound",
        fix="nothing is wrong: compare with a tolerance (the smallest passing --ulp / --atol is printed)",
        rounding=True,
    ),
    Cause(
        id="denormal-flush",
        title="subnormals flushed to zero (or not handled)",
        description="The runtime flushes subnormal inputs or results to zero (FTZ/DAZ), as XLA does on CPU.",
        devices=("cpu", "gpu"),
        runs_on=XLA + CONVERTED + ("op_by_op", "observed"),
        experiment="fingerprint",
        candidates=("ftz",),
        op_check="subnormal",
        beside=True,
        fix="keep values out of the subnormal range (rescale), or accept it: no XLA option restores subnormals",
    ),
    Cause(
        id="signed-zero",
        title="a zero of the other sign (a -0 dropped, or made)",
        description="One side gives +0 where the op declares -0 (or the reverse): equal as numbers, 0 ULP apart, "
        "but atan2, 1/x and copysign downstream give another result (π against −π, +inf against −inf). Kernels "
        "that compute -x as 0 - x, or a converter's decomposition, drop the sign.",
        runs_on=EVERY,
        experiment="op-evidence",
        op_check="signed-zero",
        fix="where the sign of a zero decides a result, make it explicit in the model so every runtime agrees "
        "(e.g. jnp.where(x == 0, 0.0, x) before the atan2 or the division, if +0 is meant), and report the "
        "dropped sign to the maintainers of the side that drops it",
    ),
    Cause(
        id="parameter-ignored",
        title="a parameter of the op ignored (by ablation)",
        description="A converter or compiler computes a primitive as if a parameter (a rounding method, a "
        "gather's mode, a flag, the axes) had another value: ablation on the op's captured inputs names it.",
        runs_on=EVERY,
        experiment="ablation",
        fix="report it to the maintainers of the path's converter or compiler; until then, write the op in a form "
        "that does not depend on that parameter",
    ),
    Cause(
        id="semantic-variant",
        title="another known semantics of the op (e.g. an arithmetic shift where a logical one is declared)",
        description="Implementations compute some primitives in known other ways: a right shift arithmetic or "
        "logical, a remainder truncated or floored, an integer x / 0 as 0 or -1, a sigmoid accurate in absolute "
        "terms only, a cast to an 8-bit float that saturates, a gather that does not clamp its indices, max and min "
        "as a comparison that drops a NaN, halves rounded to even, pow as exp(y·log x), an unscaled complex "
        "magnitude (interpreter/variants.py). The variant that reproduces the path's values on the op's own inputs "
        "is the mechanism; a rewrite that gives one result under every variant is the fix.",
        runs_on=EVERY,
        experiment="variants",
        fix="rewrite the op so every implementation computes it alike (the explanation says how, verified by a "
        "re-run)",
    ),
    Cause(
        id="implementation-defined-conversion",
        title="implementation-defined conversion (NaN, inf or out-of-range float to integer)",
        description="Casting NaN, inf or a float outside the integer type's range has no defined result: XLA "
        "gives 0 or saturates, TFLite gives INT_MAX, others differ again. Neither side is wrong.",
        primitives=("convert_element_type",),
        runs_on=EVERY,
        experiment="op-evidence",
        op_check="conversion",
        fix="make the cast defined before it: jnp.nan_to_num(x) and jnp.clip(x, lo, hi) to the target range, "
        "then .astype(int)",
    ),
    Cause(
        id="tie-ordering",
        title="order of equal keys and ±0 (sort, argsort, argmax/argmin, top_k)",
        description="Elements with equal keys, or -0 and +0, may come out in either order unless the sort is "
        "stable and orders -0 before +0 as JAX does; other runtimes choose their own order.",
        primitives=("sort", "argmax", "argmin", "top_k"),
        runs_on=EVERY,
        experiment="op-evidence",
        op_check="ordering",
        fix="break ties explicitly (sort by (key, index)) and canonicalize -0 to +0 (x + 0.0) before sorting, or "
        "compare the sorted values rather than their order",
    ),
    Cause(
        id="math-library",
        title="another math library (both sides within a few ULP of the correctly rounded result)",
        description="Transcendental functions are approximations; two accurate libraries give results that "
        "differ by a few ULP, each close to the correctly rounded value.",
        runs_on=EVERY,
        experiment="op-evidence",
        op_check="math-library",
        fix="nothing is wrong: compare with a tolerance (the smallest passing --ulp is printed)",
        rounding=True,
    ),
    Cause(
        id="kernel-accuracy",
        title="a kernel less accurate than a math library (its accuracy profile)",
        description="A runtime's kernel for a math function beyond the few ULP an accurate library keeps to "
        "(accurate in absolute terms only, beyond it on an interval, flushing, saturating): its profile says which.",
        primitives=tuple(sorted(UNARY_MATH)),
        runs_on=EVERY,
        experiment="kernel-profile",
        rounding=True,  # what the kernel is, not whether it matters: the noise judge decides that at the outputs
        fix="compute the function in a form whose kernels are accurate where the inputs are (the fix search tries "
        "them at your line), or report the kernel's profile to the runtime's maintainers",
    ),
    Cause(
        id="amplification",
        title="a tiny difference amplified by a discontinuous op (floor, round, sign, comparison, argmax, cast)",
        description="An op whose result jumps where its input crosses a threshold turns a rounding-level "
        "difference into a whole unit, a flipped sign or boolean, or another index.",
        runs_on=EVERY,
        experiment="op-evidence",
        op_check="amplification",
        fix="make the model robust at the threshold (compare with a margin, round after a tolerance), or fix the "
        "upstream difference",
    ),
    Cause(
        id="ill-conditioned",
        title="an ill-conditioned form that amplifies rounding noise (e.g. a one-pass variance)",
        description="The program computes a value as the small difference of large quantities (a one-pass "
        "variance mean(x²) − mean(x)²) or in a form that overflows (the log of a sum of exponentials): "
        "rounding differences within every op's error bound, such as two summation orders, become a large "
        "difference in the output. Neither side is wrong; the program is ill-conditioned there.",
        runs_on=XLA + CONVERTED + ("op_by_op", "declared", "ideal"),
        experiment="well-conditioned",
        rounding=True,
        beside=True,  # each op within its bound: correct implementations differ that much
        fix="compute it in its well-conditioned form: a two-pass variance (flax: use_fast_variance=False), a "
        "shifted log-sum-exp (jax.nn.logsumexp); jaxparity.fixes.well_conditioned(fn) rewrites the program so",
    ),
    Cause(
        id="rng-config",
        title="random number generator configuration or implementation",
        description="The same key gives other random bits when JAX's RNG is configured differently "
        "(jax_threefry_partitionable, jax_default_prng_impl) or comes from another JAX version.",
        primitives=tuple(sorted(RANDOM_PRIMITIVES)),
        runs_on=EVERY,
        experiment="op-evidence",
        op_check="rng-config",
        fix="set the same JAX RNG configuration where the model is served (e.g. "
        "jax.config.update('jax_threefry_partitionable', ...)), or pass the noise in as an input",
    ),
    Cause(
        id="ieee-fold",
        title="NaN or inf ignored (a fold such as x * 0 -> 0, or a kernel that assumes finite inputs)",
        description="A compiler or converter simplifies an expression as if its inputs were finite (x * 0 "
        "becomes 0, x - x becomes 0), or a kernel computes as if they were, even where an input is NaN or inf, "
        "for which IEEE arithmetic gives NaN.",
        runs_on=EVERY,
        experiment="op-evidence",
        op_check="ieee-fold",
        fix="compile without fast math (xla_cpu_enable_fast_math=false; for a converter, its option that keeps "
        "IEEE semantics), or keep NaN and inf out of the model's inputs (jnp.nan_to_num)",
        runtime_fix="keep NaN and inf out of this op's inputs in the model (jnp.nan_to_num, or jnp.where(jnp.isnan(x), "
        "...)): the runtime's kernel does not propagate them, and no flag of XLA's changes it",
    ),
    Cause(
        id="identity-rewrite",
        title="identity rewrite that ignores overflow (e.g. log(exp(x)) -> x)",
        description="The HLO simplifier replaces an expression by one equal in exact arithmetic, such as "
        "log(exp(x)) by x, although the declared one overflows to inf or NaN for some inputs.",
        runs_on=EVERY,
        experiment="op-evidence",
        op_check="identity-rewrite",
        fix="write the identity in the model where it is meant (x instead of log(exp(x))), or compile with "
        "xla_disable_hlo_passes=algsimp to keep the declared overflow",
        runtime_fix="write the identity in the model where it is meant (x instead of log(exp(x))): this runtime or "
        "its converter rewrote it, and no flag of XLA's reaches it",
    ),
    Cause(
        id="path-option",
        title="an option of the path (the only difference between the two paths)",
        description="The path is the baseline's runtime with one or more options set otherwise (a JAX config "
        "option, an XLA compile option or serving flag): that option changes the numbers.",
        runs_on=EVERY,
        experiment="option-diff",
        fix="run both with the same setting of that option, or choose which setting is meant",
    ),
    Cause(
        id="wrong-code",
        title="wrong code (likely a compiler or runtime bug)",
        description="An exact op gives other values on the same inputs, or one side is far from the correctly "
        "rounded result while the other is close: not rounding, a wrong result.",
        runs_on=EVERY,
        experiment="op-evidence",
        op_check="wrong-code",
        fix="report it to the maintainers of the wrong side, with this report (jaxparity reduce writes a "
        "standalone reproducer)",
    ),
    Cause(
        id="other-lowering",
        title="a different lowering or kernel in another runtime",
        description="The runtime lowers or executes the program differently from JAX's own XLA with the "
        "same settings (another XLA build, other kernels).",
        runs_on=("another_xla_build",) + CONVERTED,
        experiment="same-compiler",
        fix="report it to the runtime's maintainers with this report attached",
    ),
)
