"""Outputs with no per-op values (``observed:`` of a file saved without ``jaxparity capture``), explained by
emulating the device arithmetics they may come from: the whole program run on the host op by op, each float32
dot product and convolution computed as an accelerator's matmul unit computes it (1, 3 or 6 bfloat16 passes:
``device.emulated_passes``), every other op as the host computes it. The emulation that reproduces the observed
outputs, far nearer them than the host's own run, names how they were computed; none does: said, with the
pointer to ``jaxparity capture`` for the per-op view.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..causes import Cause
from ..context import Context
from ..verdicts import CauseVerdict
from .device import NEARER, PASSES, device_arithmetic, emulated_passes

__all__ = ["device_or_emulated", "emulated_device"]

_MATMUL = ("dot_general", "conv_general_dilated")


def _program_with(ctx: Context, passes: int) -> list[np.ndarray]:
    """The program's outputs on the host, each float32 dot product and convolution as ``passes`` bfloat16 passes."""
    import jax

    from ...localize.program import bind_op

    def apply(op: Any, ins: list[Any]) -> list[Any]:
        host = [np.asarray(x) for x in ins]
        if op.info.primitive in _MATMUL and len(host) >= 2 and all(x.dtype == np.float32 for x in host[:2]):
            return [emulated_passes(op, host, passes).astype(np.float32)]
        return [np.asarray(y) for y in bind_op(op, ins)]

    with jax.disable_jit(), jax.default_device(jax.devices("cpu")[0]):
        values = ctx.program.evaluate([np.asarray(a) for a in ctx.flat_args], apply)
    return [np.asarray(y) for y in ctx.program.outputs(values)]


def _gap(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    gaps = [float(np.nanmax(np.abs(x.astype(np.float64) - y.astype(np.float64)), initial=0.0))
            for x, y in zip(a, b) if x.shape == y.shape and x.dtype.kind == "f" and y.dtype.kind == "f"]
    return max(gaps, default=0.0)


def device_or_emulated(cause: Cause, ctx: Context) -> CauseVerdict:
    """``device-arithmetic``: on the carrying ops' captured values (``device``), or, for outputs read from a file
    with no per-op values, by emulating the device arithmetics for the whole program."""
    if ctx.path.has("observed") and ctx.path_vals is None:
        return emulated_device(cause, ctx)
    return device_arithmetic(cause, ctx)


def emulated_device(cause: Cause, ctx: Context) -> CauseVerdict:
    """Which emulated device arithmetic reproduces the observed outputs (``ctx.path_out``), if any."""
    what = ("the whole program on the host with each float32 dot product and convolution as 1, 3 and 6 bfloat16 "
            "passes (a TPU's matmul precisions), against the observed outputs")
    if not any(op.info.primitive in _MATMUL for op in ctx.program.ops):
        return CauseVerdict(cause.id, cause.title, "not run", what, "the program has no matrix product to emulate; "
                            "`jaxparity capture` where the outputs were computed gives the per-op view")
    observed = [np.asarray(x) for x in ctx.path_out]
    try:
        host = [np.asarray(x) for x in ctx.base_out]
        gaps = {name: _gap(observed, _program_with(ctx, k)) for name, k in PASSES.items()}
    except Exception as e:  # noqa: BLE001 - an op that cannot run on the host: said, never guessed
        return CauseVerdict(cause.id, cause.title, "not run", what,
                            f"the emulation could not run: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    plain = _gap(observed, host)
    name = min(gaps, key=lambda k: gaps[k])
    seen = (f"the observed outputs are within {gaps[name]:.3g} of the program computed with float32 products as "
            f"{PASSES[name]} bfloat16 pass{'es' if PASSES[name] > 1 else ''} (matmul precision {name}), {plain:.3g} "
            f"of {ctx.baseline}'s")
    if plain == 0 or gaps[name] > NEARER * plain or name == "HIGHEST":
        return CauseVerdict(cause.id, cause.title, "refuted", what,
                            seen + ": no emulated matmul precision reproduces them; `jaxparity capture` where they "
                            "were computed gives the per-op view")
    return CauseVerdict(cause.id, cause.title, "confirmed", what,
                        seen + ": they were computed on a device whose float32 products are bfloat16 passes (a TPU "
                        "at its default precision)",
                        "set the matmul precision to highest where the outputs are computed (jax.default_matmul_"
                        "precision('highest')), and `jaxparity capture` there for the per-op view")
