"""The ways implementations are known to compute a primitive other than JAX declares it, as data.

Each ``Variant`` computes the op on given inputs (numpy, the op's own captured values) as one family of
implementations does: TFLite shifts right arithmetically where ``shift_right_logical`` is declared, and
takes the floored remainder (FLOOR_MOD) where ``rem`` truncates; ONNX Runtime's sigmoid is accurate in
absolute terms only (0 where the result is below float32's unit roundoff); a cast to an 8-bit float that
saturates at the largest finite value where JAX gives NaN. The explainer runs every variant of the
diverging op on its captured inputs; the one that reproduces the path's values is the mechanism named,
and its ``rewrite`` is a model-side change that gives one result under every variant (re-run to verify).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["VARIANTS", "Variant"]


@dataclass(frozen=True)
class Variant:
    primitive: str
    name: str  # "arithmetic shift"
    # What the side that computes this way does, as a sentence ending: "{who} shifts arithmetically
    # (sign-extending)".
    does: str
    compute: Callable[[dict, list[np.ndarray], np.ndarray], np.ndarray | None]  # (params, inputs, declared) -> output
    # The model-side change that gives one result whatever the implementation, in words, and as a
    # function of the op's inputs (JAX) that replaces the op when it is verified; None: words only.
    fix: str
    rewrite: Callable[..., Any] | None = None


def _bits(x: np.ndarray) -> int:
    return np.dtype(x.dtype).itemsize * 8


def _arithmetic_shift(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    x, s = (np.asarray(v) for v in ins)
    if x.dtype.kind != "i":
        return None
    s = np.broadcast_to(s, np.broadcast(x, s).shape).astype(np.int64)
    wide = np.broadcast_to(x, s.shape).astype(np.int64)
    out = np.where(s >= _bits(x), np.where(wide < 0, -1, 0), wide >> np.clip(s, 0, 63))
    return out.astype(x.dtype)


def _logical_shift(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    x, s = (np.asarray(v) for v in ins)
    if x.dtype.kind != "i":
        return None
    unsigned = x.view(f"u{x.dtype.itemsize}")
    s = np.broadcast_to(s, np.broadcast(x, s).shape).astype(np.int64)
    wide = np.broadcast_to(unsigned, s.shape).astype(np.uint64)
    out = np.where(s >= _bits(x), 0, wide >> np.clip(s, 0, 63).astype(np.uint64))
    return out.astype(unsigned.dtype).view(x.dtype)


def _masked_shift(x: Any, s: Any) -> Any:
    """x >> s, logical, from operations every runtime has (TFLite has no bitwise and or left shift): the
    arithmetic shift, plus 2**(bits - s) where x is negative (wrapping, as two's complement does), read
    from a table."""
    import jax.numpy as jnp
    from jax import lax

    bits = x.dtype.itemsize * 8
    powers = np.array([(1 << k) % (1 << bits) for k in range(bits + 1)], np.uint64).astype(f"u{x.dtype.itemsize}")
    table = jnp.asarray(powers.view(x.dtype))
    s = jnp.broadcast_to(s, jnp.broadcast_shapes(jnp.shape(x), jnp.shape(s)))
    carry = jnp.where(x < 0, table[jnp.clip(bits - s, 0, bits)], jnp.zeros_like(x))
    return jnp.where(s >= bits, jnp.zeros_like(x), lax.shift_right_arithmetic(x, jnp.clip(s, 0, bits - 1)) + carry)


def _floored_rem(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    x, y = (np.asarray(v) for v in ins)
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu":
            safe = np.where(y == 0, 1, y)
            return np.where(y == 0, declared, np.mod(x, safe)).astype(x.dtype)
        return np.mod(x, y).astype(x.dtype)


def _truncated_rem(x: Any, y: Any) -> Any:
    """rem as JAX declares it (the sign of the dividend) whichever remainder the runtime takes: where the
    remainder has the sign of the divisor against the dividend's, it was floored, and r - y is the truncated
    one (exactly: that value is representable, so the subtraction gives it)."""
    import jax.numpy as jnp
    from jax import lax

    r = lax.rem(x, y)
    return jnp.where((r != 0) & (jnp.sign(r) != jnp.sign(x)), r - y, r)


def _absolute_sigmoid(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    d = np.asarray(declared)
    if d.dtype.kind != "f":
        return None
    u = float(np.finfo(d.dtype).eps) / 2
    return np.where(np.abs(d.astype(np.float64)) < u, np.zeros_like(d), d)


def _stable_sigmoid(x: Any) -> Any:
    """sigmoid accurate in relative terms for negative inputs on any runtime: exp(x) / (1 + exp(x)) there."""
    import jax.numpy as jnp

    e = jnp.exp(-jnp.abs(x))
    return jnp.where(x >= 0, 1 / (1 + e), e / (1 + e))


_NARROW_FLOATS = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
                  "float8_e3m4", "float8_e4m3", "float8_e8m0fnu")


def _saturating_cast(params: dict, ins: list[np.ndarray], declared: np.ndarray) -> np.ndarray | None:
    import ml_dtypes

    x = np.asarray(ins[0])
    target = np.dtype(params.get("new_dtype"))
    if target.name not in _NARROW_FLOATS or x.dtype.kind != "f":
        return None
    top = float(ml_dtypes.finfo(target).max)
    clipped = np.where(np.isnan(x), x, np.clip(x.astype(np.float64), -top, top))
    return clipped.astype(target)


def _clip_then_cast(x: Any, *, new_dtype: Any) -> Any:
    import jax.numpy as jnp

    top = float(jnp.finfo(new_dtype).max)
    return jnp.clip(x, -top, top).astype(new_dtype)


VARIANTS: dict[str, tuple[Variant, ...]] = {
    "shift_right_logical": (
        Variant("shift_right_logical", "arithmetic shift", "shifts arithmetically (sign bits shifted in)",
                _arithmetic_shift, "shift logically from arithmetic every runtime computes alike: the arithmetic "
                "shift plus 2**(bits - s) where x is negative (jaxparity.interpreter.variants._masked_shift)",
                _masked_shift),
    ),
    "shift_right_arithmetic": (
        Variant("shift_right_arithmetic", "logical shift", "shifts logically (zeros shifted in)", _logical_shift,
                "keep the sign explicitly: shift the magnitude and restore the sign, or use jnp.floor_divide by a "
                "power of two"),
    ),
    "rem": (
        Variant("rem", "floored remainder", "takes the floored remainder (the sign of the divisor, as FLOOR_MOD "
                "and Python's %)", _floored_rem, "take the truncated remainder whichever one the runtime computes: r = "
                "lax.rem(x, y); jnp.where((r != 0) & (jnp.sign(r) != jnp.sign(x)), r - y, r)", _truncated_rem),
    ),
    "logistic": (
        Variant("logistic", "absolute accuracy", "computes a sigmoid accurate in absolute terms only (0 where the "
                "result is below float's unit roundoff)", _absolute_sigmoid, "where small probabilities matter, "
                "compute the sigmoid as exp(-|x|) / (1 + exp(-|x|)) for negative x (or work with "
                "jax.nn.log_sigmoid)", _stable_sigmoid),
    ),
    "convert_element_type": (
        Variant("convert_element_type", "saturating cast", "saturates the cast at the largest finite value where "
                "JAX gives NaN or inf", _saturating_cast, "clip to the target's finite range before the cast "
                "(jnp.clip(x, -max, max), max = jnp.finfo(dtype).max): every runtime then casts alike",
                _clip_then_cast),
    ),
}
