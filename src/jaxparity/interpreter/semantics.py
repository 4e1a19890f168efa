"""Candidate semantics of a jaxpr, and how a value is held under each.

A :class:`Semantics` says which float roundings happen; the storage helpers turn a value
computed in float64 into that semantics' representation of a value of a declared dtype: the
declared dtype, float32 (a narrow value kept in float32), or float64 (never rounded).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

import jax
import numpy as np

from jaxparity.rounding import is_float_dtype, round_to_dtype

Mode = Literal["declared", "f64"]


@dataclass(frozen=True)
class Semantics:
    """A candidate semantics for a jaxpr: which float roundings happen, and how.

    Plain data: the flags are independent and combine (``dataclasses.replace`` one onto
    another, with a new ``name``); two Semantics with the same flags compare equal whatever
    their names. The named constructors are the candidates a fingerprint tries:

    * ``declared()``: every float result rounded once to its declared dtype (mode
      ``"declared"``).
    * ``ideal()``: never round (mode ``"f64"``); the other flags are then ignored.
    * ``skip_widened()`` (``elide_widened``): rounding elided where a narrow (bf16, f16,
      float8) result is immediately widened: a ``convert_element_type`` to a wider float
      reads the result rounded to float32 instead of to its narrow dtype, as XLA's excess
      precision does when it removes a convert-to-bf16/convert-to-f32 pair. Decided per use,
      within the result's own jaxpr: its other consumers, and the jaxpr's outputs (inner
      jaxprs' included), get the declared narrow value; a result whose consumers are all
      widening converts is simply kept in float32. An explicit narrowing
      ``convert_element_type`` (``x.astype(bf16).astype(f32)``) keeps its rounding. (XLA
      on CPU computes bf16 ops in f32 and drops the rounding at every widening use of their
      results, but keeps a user's own convert pair: this reproduces its bf16 conv and
      softmax.)
    * ``f32_everywhere()`` (``narrow_as_f32``): every narrow float dtype is treated as
      float32, including the converts of inputs to bf16: no narrow rounding anywhere.
    * ``narrow_accumulation()`` (``sequential_narrow``): ``reduce_sum``, ``dot_general``
      and ``conv_general_dilated`` with a narrow result accumulate in that narrow dtype:
      each product is rounded to it and the running sum is rounded after every addition,
      sequentially in index order (contracted dims row-major in the order the equation
      lists them; for a conv, input feature major, window position minor). A conv with
      ``batch_group_count != 1`` stays declared.
    * ``flush_subnormals()`` (``ftz``): declared, plus flush-to-zero / denormals-are-zero
      as XLA on CPU does: subnormal inputs and results of float arithmetic become zero of
      the same sign. Subnormal means below the smallest normal float32 for narrow dtypes
      (which the CPU computes in float32) and of the dtype itself for float32 / float64.
      Data movement (reshape, select, slice...), ``neg``, ``abs`` and
      ``convert_element_type`` do not flush (XLA CPU's do not either).
    * ``fma_contraction()`` (``fma``): declared, but a float ``mul`` whose consumers are
      all ``add`` / ``sub`` / ``add_any`` is not rounded (the product is kept exact, as in a
      fused multiply-add). Approximate: when both operands of an add are such products,
      both stay exact, whereas a real FMA rounds one of them.
    """

    name: str = field(default="declared", compare=False)
    description: str = field(default="every float result rounded once to its declared dtype",
                             compare=False)
    round_results: bool = True  # False: the float64 ideal, nothing is ever rounded
    narrow_as_f32: bool = False
    elide_widened: bool = False
    sequential_narrow: bool = False
    ftz: bool = False
    fma: bool = False

    @classmethod
    def declared(cls) -> Semantics:
        return cls()

    @classmethod
    def ideal(cls) -> Semantics:
        return cls("f64", "no rounding at all: every float computed and kept in float64",
                   round_results=False)

    @classmethod
    def skip_widened(cls) -> Semantics:
        return cls("skip-widened", "declared, but a narrow result is not rounded to its narrow "
                   "dtype where it is immediately widened (kept in float32: XLA excess precision)",
                   elide_widened=True)

    @classmethod
    def f32_everywhere(cls) -> Semantics:
        return cls("f32-everywhere", "all narrow rounding skipped: bf16/f16/float8 values "
                   "computed and kept in float32, inputs included", narrow_as_f32=True)

    @classmethod
    def narrow_accumulation(cls) -> Semantics:
        return cls("narrow-accumulation", "declared, but sums, dots and convs with a narrow "
                   "result accumulate sequentially in the narrow dtype", sequential_narrow=True)

    @classmethod
    def flush_subnormals(cls) -> Semantics:
        return cls("ftz", "declared, plus subnormal inputs and results of float arithmetic "
                   "flushed to zero (FTZ/DAZ, as XLA on CPU)", ftz=True)

    @classmethod
    def fma_contraction(cls) -> Semantics:
        return cls("fma-contraction", "declared, but a product feeding only adds is not "
                   "rounded (fused multiply-add)", fma=True)


DECLARED = Semantics.declared()
IDEAL = Semantics.ideal()


def _semantics(mode: Mode | Semantics) -> Semantics:
    if isinstance(mode, Semantics):
        return mode
    if isinstance(mode, str) and mode in ("declared", "f64"):
        return DECLARED if mode == "declared" else IDEAL
    raise ValueError(f"mode must be 'declared', 'f64' or a Semantics, not {mode!r}")


# ----------------------------------------------------------------------------- dtypes
@functools.cache
def _is_key(dtype: Any) -> bool:
    return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


@functools.cache
def _inexact(dtype: Any) -> bool:
    return not _is_key(dtype) and (is_float_dtype(dtype) or np.dtype(dtype).kind == "c")


@functools.cache
def _narrow(dtype: Any) -> bool:
    """Real floats narrower than float32: bfloat16, float16, the float8 (and float4) formats."""
    return not _is_key(dtype) and is_float_dtype(dtype) and np.dtype(dtype).itemsize < 4


@functools.cache
def _wide(dtype: Any) -> Any:
    """The dtype an equation is computed in: float64 / complex128 for inexact dtypes."""
    if not _inexact(dtype):
        return dtype
    return np.dtype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)


_F32 = np.dtype(np.float32)
# Per-result relaxations (see _relaxations): kept exact; kept in float32; rounded as
# declared, with a float32 copy for the widening converts that read it.
_EXACT, _AS_F32, _ALSO_F32 = "exact", "f32", "also-f32"


def _target(dtype: Any, sem: Semantics, relax: str | None = None) -> Any:
    """The dtype an inexact result of declared `dtype` is rounded to (None: not rounded)."""
    if not sem.round_results or relax == _EXACT:
        return None
    if _narrow(dtype) and (sem.narrow_as_f32 or relax == _AS_F32):
        return _F32
    return np.dtype(dtype)


@functools.cache
def _tiny(dtype: Any) -> float:
    """Below this magnitude a CPU with FTZ/DAZ flushes a value of `dtype` (narrow dtypes are
    computed in float32 there)."""
    return float(np.finfo(np.float64 if np.dtype(dtype).itemsize >= 8 else np.float32).tiny)


def _flush(x: np.ndarray, dtype: Any) -> np.ndarray:
    """Subnormals (see _tiny) to zero of the same sign; non-real values pass through."""
    if not is_float_dtype(x.dtype):
        return x
    xf = x.astype(np.float64)
    sub = (np.abs(xf) < _tiny(dtype)) & (xf != 0)
    return np.where(sub, np.copysign(0.0, xf), xf).astype(x.dtype) if sub.any() else x


def _store(x: Any, dtype: Any, sem: Semantics, relax: str | None = None,
           flush: bool = False) -> Any:
    """Turn a computed value into `sem`'s representation of a value of `dtype`."""
    if _is_key(dtype):
        return x
    x = np.asarray(x)
    if not _inexact(dtype):
        return x.astype(dtype, copy=False)
    target = _target(dtype, sem, relax)
    if target is None:
        return x.astype(_wide(dtype), copy=False)
    x = round_to_dtype(x, target)
    return _flush(x, dtype) if flush else x


def _coerce(x: Any, dtype: Any, sem: Semantics) -> Any:
    """Bring an external value (argument, const, literal) to `dtype` (one rounding, as JAX
    converts its inputs; to float32 for a narrow dtype under ``narrow_as_f32``), then into
    `sem`'s representation."""
    if _is_key(dtype):
        return x
    x = np.asarray(x)
    if _inexact(dtype):
        first = _target(dtype, sem) or np.dtype(dtype)
        if x.dtype != first:
            x = round_to_dtype(x, first)
    return _store(x, dtype, sem)


def _adopt(x: Any, dtype: Any, sem: Semantics) -> Any:
    """An input of evaluate_eqn: as _coerce, but a value already held the way `sem` holds a
    value of `dtype` is kept as is."""
    if _inexact(dtype) and not isinstance(x, jax.Array):
        x = np.asarray(x)
        held = _target(dtype, sem) or _wide(dtype)
        if x.dtype == held:
            return x
    return _coerce(x, dtype, sem)


def _widen_params(params: dict) -> dict:
    """Replace float/complex dtype params (new_dtype, preferred_element_type...) by f64/c128."""
    def widen(v: Any) -> Any:
        if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
            return _wide(np.dtype(v))
        return tuple(map(widen, v)) if type(v) is tuple else v
    return {k: widen(v) for k, v in params.items()}
