"""Causes decided on what the runtime really runs (``artifact``): the path's own artifact (``Path.artifact``: a
TFLite flatbuffer, an ONNX model or IREE's dispatches read back, with every tensor's value in one run of it),
the op's own captured values, and the op (or the fused region) run alone by that same runtime. One rule per
cause, in a module of its own; each returns a verdict, or None when no divergence offers that evidence."""

from __future__ import annotations

from collections.abc import Callable

from ...causes import Cause
from ...context import Context, first_line
from ...verdicts import CauseVerdict
from .accumulation import narrow_accumulation
from .constants import stored_constant
from .converted import decomposed, kernel_attribute
from .fused import fused_kernel

__all__ = ["ARTIFACT_RULES", "artifact"]

ARTIFACT_RULES: dict[str, Callable[[Cause, Context], CauseVerdict | None]] = {
    "stored-constant": stored_constant,
    "fused-kernel": fused_kernel,
    "narrow-accumulation": narrow_accumulation,
    "converter-decomposition": decomposed,
    "kernel-attribute": kernel_attribute,
}


def artifact(cause: Cause, ctx: Context) -> CauseVerdict:
    """The cause's rule on the runtime's own artifact (``ARTIFACT_RULES``)."""
    if ctx.base_vals is None:
        return CauseVerdict(cause.id, cause.title, "not run", "the runtime's own artifact", "no per-op values for "
                            "the baseline")
    try:
        verdict = ARTIFACT_RULES[cause.id](cause, ctx)
    except Exception as e:  # evidence, never the end of the explanation
        return CauseVerdict(cause.id, cause.title, "not run", "the runtime's own artifact",
                            f"the artifact's evidence could not be read ({first_line(e)})")
    if verdict is None:
        return CauseVerdict(cause.id, cause.title, "not run", "the runtime's own artifact",
                            "no diverging op shows it" if ctx.artifact() is not None or cause.id == "stored-constant"
                            else f"{ctx.path} has no artifact of its own to read back")
    return verdict
