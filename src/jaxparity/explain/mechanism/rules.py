"""The rule table: how each kind of experiment decides a cause (``Cause.experiment``), and the op checks that
decide it first on the diverging op's own values where they can (``Cause.op_check``). A new kind of experiment
is a function ``(Cause, Context) -> CauseVerdict`` in a module of its own and an entry here.

The kinds of experiment (``Cause.experiment``):
- ``recompile``: re-run the diverging path with XLA options changed (a compile option for ``jit``
  and ``export``, ``XLA_FLAGS`` in the TensorFlow serving process); confirmed when the path then
  agrees with the baseline, partly when it moves closer, refuted when nothing changes.
- ``matmul-precision``: re-run under ``jax.default_matmul_precision('highest')``.
- ``noise-bound``: every local divergence is a reduction whose difference lies within the analytic
  error bound of summing that many terms: expected rounding noise, not a bug.
- ``fingerprint``: a candidate semantics of the interpreter reproduces the path bit for bit.
- ``same-compiler``: ``jit`` with the same XLA settings agrees with the baseline while this runtime
  does not: it lowers or runs the program differently.
- ``partition``: a sharded path (``jit:mesh=8``) diverges at a reduction whose partial sums a collective
  combines (from the optimized HLO), judged against the reduction's error bound.
- ``well-conditioned``: an ill-conditioned form (a one-pass variance) amplifies small divergences: rewritten
  (``jaxparity.fixes.well_conditioned``) and re-run; confirmed when the paths then agree within its noise.
- ``device-arithmetic``: one side on an accelerator: the carrying op alone on it, against host emulations.
- ``option-diff``: the path is the baseline's runtime with other options (``jit:jax_threefry_partitionable=false``
  against ``jit``): those options are the difference, said first; the op's own evidence names the mechanism.
- ``artifact``: decided on what the runtime really runs (``explain/mechanism/artifact/``): its own
  artifact read back (a TFLite flatbuffer: its kernels, its constants as stored, every tensor's value in
  one run), and the op or the fused region run alone on that runtime: a constant the converter stored
  otherwise; several ops computed by one kernel of the runtime.
- ``variants``: the known other semantics of the diverging op (``interpreter/variants.py``) run on its
  captured inputs; the one that reproduces the path's values is named, its rewrite re-run.
- ``op-evidence``: decided on the diverging ops' own evidence only (``explain/mechanism/op_rules.py``): subnormal
  handling reproduced on the op's inputs, implementation-defined casts, the order of equal keys, two
  accurate math libraries, amplification by a discontinuous op, wrong code.
- ``kernel-profile``: the carrying math function run alone on the path's runtime over its captured inputs and a
  sweep of its domain (``profile``): what kind of kernel it is, and where.
- ``ablation``: JAX's op re-bound with each parameter changed alone (``ablation``): the one the path ignores."""

from __future__ import annotations

from collections.abc import Callable

from ..causes import Cause
from ..context import Context, describe
from ..verdicts import CauseVerdict
from .ablation import ablated
from .artifact import artifact
from .artifact.kept_wide import kept_wide
from .conditioning import rewritten
from .emulated import device_or_emulated
from .noise import noise
from .op_rules import OP_RULES, decide
from .options import option_diff
from .profile import kernel_accuracy
from .reruns import flag_proof, matmul_precision, recompile, same_compiler
from .semantics import fingerprinted
from .sharding import partitioned
from .summation import with_order
from .variants import known_variants
from .widened import widened_check

__all__ = ["EXPERIMENTS", "OP_CHECKS", "Rule", "run_experiment"]

Rule = Callable[[Cause, Context], CauseVerdict]


def no_op_evidence(cause: Cause, ctx: Context) -> CauseVerdict:
    """``op-evidence``: a cause decided on the diverging ops' own evidence only, where none shows it."""
    return CauseVerdict(cause.id, cause.title, "not run", "the diverging ops' own evidence",
                        "no diverging op shows it" if ctx.localization is not None else "no per-op values for this path")


EXPERIMENTS: dict[str, Rule] = {
    "option-diff": option_diff,
    "well-conditioned": lambda cause, ctx: with_order(rewritten(cause, ctx), ctx),
    "partition": partitioned,
    "op-evidence": no_op_evidence,
    "recompile": recompile,
    "noise-bound": noise,
    "fingerprint": fingerprinted,
    "same-compiler": same_compiler,
    "matmul-precision": matmul_precision,
    "device-arithmetic": device_or_emulated,
    "artifact": artifact,
    "variants": known_variants,
    "kernel-profile": kernel_accuracy,
    "ablation": ablated,
}


def candidate_semantics(cause: Cause, ctx: Context) -> CauseVerdict | None:
    """A candidate semantics of ``localize.semantics`` (``fma``...) applied to a diverging op's own captured
    inputs: confirmed where it reproduces the path's output of that op bit for bit; the whole-program re-run
    then proves the fix. None where no op was checked with it."""
    loc = ctx.localization
    checked = [(d, m) for d in (loc.local if loc else ()) for m in d.semantics if m.name == cause.op_check]
    if not checked:
        return None
    hits = [(d, m) for d, m in checked if m.reproduces_path]
    if not hits:
        d, m = min(checked, key=lambda dm: dm[1].max_ulp_to_path)
        return CauseVerdict(cause.id, cause.title, "refuted", f"{m.name} semantics on the captured inputs of "
                            f"{describe(d)}", f"{m.description} is {m.max_ulp_to_path} ULP from {ctx.path}'s output")
    d, m = hits[0]
    declared = (f"; the declared semantics (each op rounded) reproduce {ctx.baseline}'s" if d.declared_side in
                ("baseline",) else "")
    evidence = (f"{m.description} reproduces {ctx.path}'s output of #{d.op.index} bit for bit ({d.n_differ} of "
                f"{d.size} elements differ from {ctx.baseline}){declared}")
    others = len({id(x) for x, _ in hits}) - 1
    if others:
        evidence += f"; so do {others} more diverging op{'s' if others > 1 else ''}"
    proof, _ = flag_proof(cause, ctx, ": the flag changes more than this op")
    return CauseVerdict(cause.id, cause.title, "confirmed", f"{m.name} semantics on the captured inputs of "
                        f"{describe(d)}", evidence, cause.fix, proof)


def _on_op_rules(cause: Cause, ctx: Context) -> CauseVerdict | None:
    return decide(cause, ctx.localization, ctx.path, ctx.baseline)


# Op checks by name; any other name is a candidate semantics of ``localize.semantics``.
OP_CHECKS: dict[str, Callable[[Cause, Context], CauseVerdict | None]] = {
    "widened": widened_check,
    "kept-wide": kept_wide,
    **{name: _on_op_rules for name in OP_RULES},
}


def run_experiment(cause: Cause, ctx: Context) -> CauseVerdict:
    """The cause decided on the op's own values where its op check finds evidence, else by its experiment."""
    verdict = None
    if cause.op_check:
        verdict = OP_CHECKS.get(cause.op_check, candidate_semantics)(cause, ctx)
    return verdict if verdict is not None else EXPERIMENTS[cause.experiment](cause, ctx)
