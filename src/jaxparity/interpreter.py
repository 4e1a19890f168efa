"""Reference evaluation of a jaxpr, equation by equation, in float64.

Each equation is computed in float64 (complex128) from its inputs; a :class:`Semantics`
says how its float results are then rounded. The two original modes are strings:

* ``"declared"`` (``Semantics.declared()``): every float result is rounded *once* to the
  equation's declared output dtype (the program's declared semantics: a bf16 conv is exact
  math rounded to bf16).
* ``"f64"`` (``Semantics.ideal()``): float results are never rounded (float64 / complex128
  throughout).

The other candidates model what compilers and runtimes actually do (skipped roundings,
float32 instead of bf16, narrow accumulators, flushed subnormals, fused multiply-adds);
see :class:`Semantics`. Values are held in the dtype this semantics rounded them to: the
declared dtype, float32 (a narrow value kept in float32), or float64 (never rounded).

Integer and bool values keep their exact dtypes in every mode; PRNG key values stay JAX key
arrays (numpy cannot hold them); every other value is a numpy array. The JAX-version-specific
facts sit in one block below; the rule tables (``_CALL_PARAM``, ``_RECURSE``, ``_BIT_LEVEL``,
``_NUMPY``) pick how each primitive is evaluated; anything else is bound with float64
operands through a cache of jitted callables.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jax
import jax.extend.core as jcore
import numpy as np
from jax import lax

from jaxparity.rounding import is_float_dtype, round_to_dtype

__all__ = ["EqnEvent", "InterpretError", "Mode", "Semantics", "evaluate_eqn", "evaluate_jaxpr",
           "interpret"]

Mode = Literal["declared", "f64"]

# ---------------------------------------------------------------------------------------
# JAX-version-specific details (checked against jax 0.9.2 with jax.make_jaxpr):
#  * jax.jit appears as primitive "jit" (formerly "pjit"), param `jaxpr` (ClosedJaxpr).
#  * jax.checkpoint/remat is "remat2" (printed "checkpoint"); `jaxpr` is an OPEN Jaxpr.
#  * custom_jvp -> "custom_jvp_call", custom_vjp -> "custom_vjp_call"; both carry
#    `call_jaxpr` (ClosedJaxpr) taking *all* the eqn's operands (consts included).
#  * "cond": `branches` (tuple of ClosedJaxpr), operand 0 is the (clamped) branch index.
#  * "while": cond_jaxpr/body_jaxpr (ClosedJaxpr), cond_nconsts, body_nconsts.
#  * "scan": jaxpr (ClosedJaxpr), num_consts, num_carry, length, reverse.
#  * Combiner jaxprs typed at the declared dtype (binding them with f64 operands fails MLIR
#    verification): scatter-* `update_jaxpr` (Jaxpr or None) + `update_consts`, "reduce"
#    `jaxpr` (ClosedJaxpr), "reduce_window" `jaxpr` + `consts`.
#  * Jaxpr/ClosedJaxpr hash by identity; jax.extend.core does not export DropVar.
#  * jax.enable_x64 is a config State usable as `with jax.enable_x64(bool):`; before jax 0.5
#    (e.g. 0.4.38, used by `--env`) the context managers are jax.experimental.enable_x64() and
#    disable_x64(): `_x64(bool)` below picks whichever exists.
#  * Source lines: jax._src.source_info_util.summarize(eqn.source_info) ('' if unknown).
# ---------------------------------------------------------------------------------------
from jax._src import source_info_util as _source_info  # noqa: E402


def _x64(on: bool) -> Any:
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(on)
    from jax import experimental

    return experimental.enable_x64() if on else experimental.disable_x64()
from jax._src.core import DropVar as _DropVar  # noqa: E402

_CALL_PARAM = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr",
               "core_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
               "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
               "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr"}
_COMBINER_PARAMS = {"reduce": ("jaxpr", None), "reduce_window": ("jaxpr", "consts"),
                    **{f"scatter{s}": ("update_jaxpr", "update_consts")
                       for s in ("", "-add", "-sub", "-mul", "-min", "-max")}}


class InterpretError(Exception):
    """An equation could not be evaluated; the message names the primitive and source line."""


@dataclass(frozen=True)
class EqnEvent:
    """One evaluated equation, as reported to the ``on_eqn`` hook."""

    eqn: jcore.JaxprEqn
    depth: int  # nesting depth, 0 = top-level jaxpr
    inputs: tuple[np.ndarray, ...]  # values fed to the eqn, as evaluated in this mode
    outputs: tuple[np.ndarray, ...]  # values it produced


Hook = Callable[[EqnEvent], None] | None


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


# ---------------------------------------------------------- consumer analysis
_RELAX_CACHE: dict[tuple[jcore.Jaxpr, bool, bool], dict] = {}  # Jaxprs hash by identity
_ADDS = frozenset({"add", "sub", "add_any"})  # the consumers that let fma keep a product exact
# Producers whose narrow rounding elide_widened keeps: an explicit convert to a narrow type
# (XLA keeps a user's f32->bf16->f32 pair; it drops only the rounding of an op it computed
# in f32), and call-like / control-flow equations (their inner outputs are already rounded).
_NOT_ELIDED = frozenset({"convert_element_type", *_CALL_PARAM, "cond", "while", "scan"})


def _widening_convert(eqn: jcore.JaxprEqn | None, dtype: Any) -> bool:
    if eqn is None or eqn.primitive.name != "convert_element_type":
        return False
    new = np.dtype(eqn.params["new_dtype"])
    return is_float_dtype(new) and new.itemsize > np.dtype(dtype).itemsize


def _relaxations(jaxpr: jcore.Jaxpr, sem: Semantics) -> dict[Any, str]:
    """Results of `jaxpr`'s equations that `sem` does not (only) round to their declared
    dtype. ``elide_widened``: a narrow result read by widening converts is also kept in
    float32 for them (only in float32 when nothing else reads it). ``fma``: a product only
    added is kept exact. A jaxpr output is a consumer that needs the declared dtype."""
    if not sem.round_results or not (sem.elide_widened or sem.fma):
        return {}
    key = (jaxpr, sem.elide_widened, sem.fma)
    if key in _RELAX_CACHE:
        return _RELAX_CACHE[key]
    uses: dict[Any, list] = {}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            if not isinstance(v, jcore.Literal):
                uses.setdefault(v, []).append(eqn)
    for v in jaxpr.outvars:
        if not isinstance(v, jcore.Literal):
            uses.setdefault(v, []).append(None)
    relax: dict[Any, str] = {}
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            users, dtype = uses.get(v), v.aval.dtype
            if not users or isinstance(v, _DropVar):
                continue
            widened = [_widening_convert(u, dtype) for u in users] if sem.elide_widened else []
            if any(widened) and _narrow(dtype) and eqn.primitive.name not in _NOT_ELIDED:
                relax[v] = _AS_F32 if all(widened) else _ALSO_F32
            elif (sem.fma and eqn.primitive.name == "mul" and _inexact(dtype)
                  and all(u is not None and u.primitive.name in _ADDS for u in users)):
                relax[v] = _EXACT
    _RELAX_CACHE[key] = relax
    return relax


# --------------------------------------------------------------- jaxpr evaluation
def evaluate_jaxpr(closed_jaxpr: jcore.ClosedJaxpr, args: Sequence[np.ndarray], *,
                   mode: Mode | Semantics, on_eqn: Hook = None) -> list[np.ndarray]:
    """Evaluate `closed_jaxpr` on `args` in `mode` (a string or a :class:`Semantics`);
    returns the outputs as numpy arrays.

    Arguments are first converted to the declared input dtypes (as JAX would), then, in
    ``"f64"`` mode, widened to float64/complex128. ``on_eqn`` sees every equation (inner
    ones first, then the equation that holds them), and runs with x64 enabled.
    """
    sem = _semantics(mode)
    jaxpr = closed_jaxpr.jaxpr
    if len(args) != len(jaxpr.invars):
        raise ValueError(f"expected {len(jaxpr.invars)} arguments, got {len(args)}")
    with _x64(True):
        args = [_coerce(a, v.aval.dtype, sem) for a, v in zip(args, jaxpr.invars)]
        return _eval_jaxpr(jaxpr, closed_jaxpr.consts, args, sem, 0, on_eqn, "<unknown>")


def evaluate_eqn(eqn: jcore.JaxprEqn, inputs: Sequence[Any], *, mode: Mode | Semantics = "declared",
                 on_eqn: Hook = None) -> list[np.ndarray]:
    """Evaluate the single equation `eqn` on `inputs` in `mode` (recursing into the jaxpr
    of a call-like equation); returns one value per ``eqn.outvars``.

    `inputs` holds one value per ``eqn.invars`` (literals included), or one per non-literal
    invar (the literals' own values are used). They are taken as values of the declared
    dtypes (converted with one rounding where they are not), except that a value already in
    this mode's representation is taken as is (float64 in ``"f64"`` mode, float32 for a
    narrow dtype under ``narrow_as_f32``), so that outputs can be fed back in. With no
    consumers to look at, the eqn's results are rounded as a jaxpr output would be
    (``declared``: to their declared dtypes).
    """
    sem = _semantics(mode)
    inputs = list(inputs)
    if len(inputs) != len(eqn.invars):
        holes = [v for v in eqn.invars if not isinstance(v, jcore.Literal)]
        if len(inputs) != len(holes):
            raise ValueError(f"{eqn.primitive.name} takes {len(eqn.invars)} inputs "
                             f"({len(holes)} without literals), got {len(inputs)}")
        it = iter(inputs)
        inputs = [v.val if isinstance(v, jcore.Literal) else next(it) for v in eqn.invars]
    where = _source_info.summarize(eqn.source_info) or "<unknown>"
    with _x64(True):
        invals = [_adopt(x, v.aval.dtype, sem) for x, v in zip(inputs, eqn.invars)]
        outs = _eval_checked(eqn, invals, sem, 0, on_eqn, where, None)
    if on_eqn is not None:
        on_eqn(EqnEvent(eqn, 0, tuple(invals), tuple(outs)))
    return outs


def _eval_jaxpr(jaxpr: jcore.Jaxpr, consts: Sequence[Any], args: Sequence[Any], sem: Semantics,
                depth: int, hook: Hook, outer: str) -> list[Any]:
    """Evaluate an open jaxpr; `args` are already in `sem`'s representation, `consts` are not."""
    env: dict[Any, Any] = {v: _coerce(c, v.aval.dtype, sem)
                           for v, c in zip(jaxpr.constvars, consts)}
    env.update(zip(jaxpr.invars, args))
    relax = _relaxations(jaxpr, sem)
    as_f32: dict[Any, Any] = {}  # float32 copies of narrow results, for widening converts

    def read(v: Any) -> Any:
        return _coerce(v.val, v.aval.dtype, sem) if isinstance(v, jcore.Literal) else env[v]

    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        first = eqn.invars[0] if eqn.invars else None
        if (as_f32 and first is not None and not isinstance(first, jcore.Literal) and first in as_f32
                and _widening_convert(eqn, first.aval.dtype)):
            invals[0] = as_f32[eqn.invars[0]]
        where = _source_info.summarize(eqn.source_info) or outer  # else the enclosing eqn's
        extra: dict[int, Any] = {}
        outs = _eval_checked(eqn, invals, sem, depth, hook, where,
                             [relax.get(v) for v in eqn.outvars] if relax else None, extra)
        if hook is not None:
            hook(EqnEvent(eqn, depth, tuple(invals), tuple(outs)))
        env.update((v, o) for v, o in zip(eqn.outvars, outs) if not isinstance(v, _DropVar))
        as_f32.update((eqn.outvars[i], o) for i, o in extra.items())
    return [read(v) for v in jaxpr.outvars]


def _eval_checked(eqn: jcore.JaxprEqn, invals: list, sem: Semantics, depth: int, hook: Hook,
                  where: str, relax: Sequence[str | None] | None,
                  extra: dict[int, Any] | None = None) -> list:
    try:
        return _eval_eqn(eqn, invals, sem, depth, hook, where, relax, extra)
    except InterpretError:
        raise
    except Exception as e:
        raise InterpretError(f"cannot evaluate {eqn.primitive.name} at {where}: "
                             f"{type(e).__name__}: {e}") from e


def _sub(j: Any) -> tuple[jcore.Jaxpr, Sequence[Any]]:
    return (j.jaxpr, j.consts) if isinstance(j, jcore.ClosedJaxpr) else (j, ())


def _has_jaxpr(params: dict) -> bool:
    kinds = (jcore.Jaxpr, jcore.ClosedJaxpr)
    return any(isinstance(u, kinds) for v in params.values()
               for u in (v if isinstance(v, tuple) else (v,)))


def _declared_storage(x: Any, dtype: Any) -> bool:
    return not _inexact(dtype) or np.asarray(x).dtype == dtype


# Float ops that neither read nor write through the FPU's FTZ/DAZ: data movement, sign
# bit operations, conversions (XLA CPU's f32->bf16 convert is integer bit work).
_NO_FLUSH = frozenset({
    "reshape", "broadcast_in_dim", "transpose", "squeeze", "expand_dims", "concatenate",
    "slice", "dynamic_slice", "dynamic_update_slice", "gather", "scatter", "select_n", "pad",
    "rev", "copy", "copy_p", "stop_gradient", "neg", "abs", "convert_element_type",
    "optimization_barrier", "sort"})


def _eval_eqn(eqn: jcore.JaxprEqn, invals: list, sem: Semantics, depth: int, hook: Hook,
              where: str, relax: Sequence[str | None] | None = None,
              extra: dict[int, Any] | None = None) -> list:
    """Evaluate one equation on values in `sem`'s representation. `relax` (per result, see
    _relaxations) loosens the rounding of results; results marked ``_ALSO_F32`` also get a
    float32 copy in `extra` (result index -> value)."""
    name = eqn.primitive.name
    run = lambda j, vals: _eval_jaxpr(*_sub(j), vals, sem, depth + 1, hook, where)  # noqa: E731
    out_dtypes = [v.aval.dtype for v in eqn.outvars]
    in_dtypes = [v.aval.dtype for v in eqn.invars]
    relax = relax or [None] * len(out_dtypes)
    flush = False
    if name in _CALL_PARAM:  # recurse (never bind) so that every inner op is rounded
        outs = run(eqn.params[_CALL_PARAM[name]], invals)
    elif name in _RECURSE:
        outs = _RECURSE[name](eqn.params, invals, run)
    elif _has_jaxpr(eqn.params) and name not in _COMBINER_PARAMS:
        raise InterpretError(f"cannot evaluate {name} at {where}: primitive carries a "
                             "sub-jaxpr and the interpreter has no rule for it")
    elif name in _BIT_LEVEL:  # no float64 meaning: run natively on the declared dtypes
        if not sem.round_results and name == "reduce_precision":
            return [invals[0]]
        outs = _bind(eqn.primitive, [_store(x, d, DECLARED) for x, d in zip(invals, in_dtypes)],
                     eqn.params)
    elif not any(map(_inexact, out_dtypes)) and (
            not any(map(_inexact, in_dtypes))
            or (sem.round_results and not (sem.ftz and name not in _NO_FLUSH)
                and all(map(_declared_storage, invals, in_dtypes)))):
        # exact ops: integer/bool/key, and comparisons / float->int casts of declared values
        outs = _apply(eqn, invals, eqn.params, exact=True)
    else:  # compute in float64; _store rounds afterwards
        flush = sem.ftz and sem.round_results and name not in _NO_FLUSH
        vals = [(_flush(np.asarray(x).astype(_wide(d)), d) if flush
                 else np.asarray(x).astype(_wide(d), copy=False)) if _inexact(d) else x
                for x, d in zip(invals, in_dtypes)]
        params = _widen_params(eqn.params)
        if name in _COMBINER_PARAMS:
            params = _widen_combiner(name, params)
        outs = None
        if sem.sequential_narrow and name in _SEQUENTIAL:
            acc = _target(out_dtypes[0], sem)
            if acc is not None and _narrow(acc):
                outs = _SEQUENTIAL[name](eqn.params, vals, acc)
        if outs is None:
            outs = _apply(eqn, vals, params, exact=False)
    if extra is not None:
        extra.update((i, _store(o, d, sem, _AS_F32, flush))
                     for i, (o, d, r) in enumerate(zip(outs, out_dtypes, relax)) if r == _ALSO_F32)
    return [_store(o, d, sem, None if r == _ALSO_F32 else r, flush)
            for o, d, r in zip(outs, out_dtypes, relax)]


# ------------------------------------------------------------- recursion rules
def _cond(params: dict, invals: list, run: Callable) -> list:
    branches = params["branches"]
    return run(branches[int(np.clip(np.asarray(invals[0]), 0, len(branches) - 1))], invals[1:])


def _while(params: dict, invals: list, run: Callable) -> list:
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    cconsts, bconsts, carry = invals[:nc], invals[nc:nc + nb], list(invals[nc + nb:])
    while bool(np.asarray(run(params["cond_jaxpr"], cconsts + carry)[0])):
        carry = run(params["body_jaxpr"], bconsts + carry)
    return carry


def _scan(params: dict, invals: list, run: Callable) -> list:
    nc, ncarry, length = params["num_consts"], params["num_carry"], params["length"]
    consts, carry, xs = invals[:nc], list(invals[nc:nc + ncarry]), invals[nc + ncarry:]
    outvars = params["jaxpr"].jaxpr.outvars[ncarry:]
    ys: list[list] = [[None] * length for _ in outvars]
    for i in (reversed(range(length)) if params["reverse"] else range(length)):
        outs = run(params["jaxpr"], consts + carry + [x[i] if isinstance(x, jax.Array)
                                                      else np.asarray(x[i]) for x in xs])
        carry = outs[:ncarry]
        for k, y in enumerate(outs[ncarry:]):
            ys[k][i] = y
    return carry + [np.zeros((0, *v.aval.shape), v.aval.dtype) if length == 0  # _store: dtype
                    else (jax.numpy.stack if _is_key(v.aval.dtype) else np.stack)(y)
                    for v, y in zip(outvars, ys)]


_RECURSE: dict[str, Callable] = {"cond": _cond, "while": _while, "scan": _scan}

# Bit-level primitives: no float64 meaning, evaluated natively on the declared dtypes
# (in "f64" mode the inputs are rounded to their declared dtypes first; reduce_precision
# is the identity there).
_BIT_LEVEL = frozenset({
    "bitcast_convert_type", "nextafter", "reduce_precision", "rng_uniform",
    "rng_bit_generator", "random_seed", "random_bits", "random_split", "random_fold_in",
    "random_wrap", "random_unwrap", "random_clone", "threefry2x32"})


# ------------------------------------------------------ combiner jaxprs (scatter...)
_WIDENED: dict[jcore.Jaxpr, jcore.ClosedJaxpr] = {}  # Jaxprs hash by identity


def _widen_combiner(name: str, params: dict) -> dict:
    """Re-trace a combiner jaxpr param with inexact values widened to float64/complex128."""
    jparam, cparam = _COMBINER_PARAMS[name]
    if params.get(jparam) is None:
        return params
    jaxpr, consts = _sub(params[jparam])
    consts = consts if cparam is None else params[cparam]

    def widened(*args: Any) -> list:
        env: dict[Any, Any] = dict(zip([*jaxpr.constvars, *jaxpr.invars], [*consts, *args]))

        def read(v: Any) -> Any:
            x = v.val if isinstance(v, jcore.Literal) else env[v]
            return lax.convert_element_type(x, _wide(v.aval.dtype)) if _inexact(v.aval.dtype) else x

        for e in jaxpr.eqns:
            outs = e.primitive.bind(*map(read, e.invars), **_widen_params(e.params))
            env.update(zip(e.outvars, outs if e.primitive.multiple_results else [outs]))
        return [read(v) for v in jaxpr.outvars]

    if jaxpr not in _WIDENED:  # cached, so that the jitted-bind cache hits
        avals = [jax.ShapeDtypeStruct(v.aval.shape, _wide(v.aval.dtype)) for v in jaxpr.invars]
        _WIDENED[jaxpr] = jax.make_jaxpr(widened)(*avals)
    closed = _WIDENED[jaxpr]
    if cparam is None:
        return {**params, jparam: closed}
    return {**params, jparam: closed.jaxpr, cparam: tuple(closed.consts)}


# ----------------------------------------------------------- bind (fallback path)
_JIT_CACHE: dict[Any, Callable] = {}


def _bind(prim: jcore.Primitive, vals: Sequence[Any], params: dict) -> list:
    """`prim.bind`, through a cache of jitted callables keyed by (primitive, params)."""
    try:
        key = (prim, tuple(sorted(params.items(), key=lambda kv: kv[0])))
        fn = _JIT_CACHE.get(key)
    except TypeError:  # unhashable params: bind directly
        key = fn = None
    if fn is None:
        fn = jax.jit(lambda *xs: prim.bind(*xs, **params))
        if key is not None:
            _JIT_CACHE[key] = fn
    out = fn(*vals)
    return list(out) if prim.multiple_results else [out]


USE_NUMPY_FAST_PATH = True  # tests switch this off to compare against the bind path


class _NoFast(Exception):
    """The numpy fast path declines this case; use bind."""


def _apply(eqn: jcore.JaxprEqn, vals: list, params: dict, *, exact: bool) -> list:
    name = eqn.primitive.name
    fast = _NUMPY.get(name)
    if (USE_NUMPY_FAST_PATH and fast is not None and (not exact or name in _EXACT_OK)
            and not any(isinstance(x, jax.Array) for x in vals)):
        try:
            with np.errstate(all="ignore"):
                return [fast(params, *vals)]
        except _NoFast:
            pass
    return _bind(eqn.primitive, vals, params)


# --------------------------------------------------------------- numpy fast path
def _static(p: dict, *dyn: Any) -> dict:
    if dyn or p.get("dimensions") is not None:  # dynamic shapes / reshape-with-transpose
        raise _NoFast
    return p


# lax.max/min propagate NaN like np.maximum/minimum, but also order -0 < +0.
_max = lambda x, y: np.where((x == 0) & (y == 0), x + y, np.maximum(x, y))  # noqa: E731
_min = lambda x, y: np.where((x == 0) & (y == 0), -(-x + -y), np.minimum(x, y))  # noqa: E731
_ew = lambda f: lambda p, *xs: f(*xs)  # noqa: E731  (elementwise: no params)
_reduction = lambda f: lambda p, x: f(x, axis=tuple(p["axes"]))  # noqa: E731


def _round(p: dict, x: np.ndarray) -> np.ndarray:
    if int(p["rounding_method"]) == int(lax.RoundingMethod.TO_NEAREST_EVEN):
        return np.rint(x)
    t = np.trunc(x)  # AWAY_FROM_ZERO; x - t is exact
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def _convert(p: dict, x: np.ndarray) -> np.ndarray:
    to = np.dtype(p["new_dtype"])
    if x.dtype.kind == "c" and to.kind != "c":
        raise _NoFast
    if to.kind == "b":
        return x != 0
    if _inexact(x.dtype) and to.kind in "iu":  # truncate; bind handles NaN/out of range
        info = np.iinfo(to)
        if not (np.isfinite(x).all() and (x > info.min - 1).all() and (x < info.max + 1).all()):
            raise _NoFast
        return np.trunc(x).astype(to)
    return x.astype(to)


def _broadcast_in_dim(p: dict, x: np.ndarray, *dyn: Any) -> np.ndarray:
    shape = [1] * len(_static(p, *dyn)["shape"])
    for i, d in enumerate(p["broadcast_dimensions"]):
        shape[d] = x.shape[i]
    return np.broadcast_to(x.reshape(shape), p["shape"]).copy()


def _iota(p: dict, *dyn: Any) -> np.ndarray:
    shape, dim = _static(p, *dyn)["shape"], p["dimension"]
    a = np.arange(shape[dim], dtype=p["dtype"])
    a = a.reshape([-1 if i == dim else 1 for i in range(len(shape))])
    return np.broadcast_to(a, shape).copy()


def _select_n(p: dict, pred: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    if pred.dtype == np.bool_:
        return np.where(pred, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    return np.choose(pred, cases)


def _window(x: np.ndarray, idx: Sequence[Any], sizes: Sequence[int]) -> tuple:
    """The slice a dynamic_(update_)slice touches; lax clamps the start indices."""
    return tuple(slice(b, b + s) for b, s in
                 zip((int(np.clip(i, 0, n - s)) for i, n, s in zip(idx, x.shape, sizes)), sizes))


def _dynamic_update_slice(p: dict, x: np.ndarray, upd: np.ndarray, *idx: np.ndarray) -> np.ndarray:
    out = x.copy()
    out[_window(x, idx, upd.shape)] = upd
    return out


def _dot_operands(p: dict, lhs: np.ndarray, rhs: np.ndarray,
                  dtype: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """dot_general as a batched matmul: lhs (batch, free, contracted), rhs (batch,
    contracted, free), and the result's shape."""
    (lc, rc), (lb, rb) = p["dimension_numbers"]
    lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    def as3d(x: np.ndarray, *groups: Sequence[int]) -> np.ndarray:
        shape = [math.prod(x.shape[d] for d in g) for g in groups]
        return x.transpose([d for g in groups for d in g]).astype(dtype).reshape(shape)

    return (as3d(lhs, lb, lf, lc), as3d(rhs, rb, rc, rf),
            [lhs.shape[d] for d in (*lb, *lf)] + [rhs.shape[d] for d in rf])


def _dot_general(p: dict, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    dtype = p["preferred_element_type"]  # (np.dtype is falsy: no `or` here)
    dtype = np.result_type(lhs, rhs) if dtype is None else dtype
    a, b, shape = _dot_operands(p, lhs, rhs, dtype)
    return np.matmul(a, b).reshape(shape)


def _logistic(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))  # no overflow, no cancellation
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_NUMPY: dict[str, Callable] = {
    # arithmetic, in float64
    "add": _ew(np.add), "sub": _ew(np.subtract), "mul": _ew(np.multiply),
    "div": _ew(np.true_divide), "rem": _ew(np.fmod), "neg": _ew(np.negative),
    "max": _ew(_max), "min": _ew(_min), "abs": _ew(np.abs),
    "sign": _ew(lambda x: np.where(x == 0, x, np.sign(x))),  # lax.sign(-0.0) is -0.0
    "pow": _ew(np.power), "integer_pow": lambda p, x: np.power(x, float(p["y"])),
    "square": _ew(np.square), "sqrt": _ew(np.sqrt), "rsqrt": _ew(lambda x: 1.0 / np.sqrt(x)),
    "exp": _ew(np.exp), "exp2": _ew(np.exp2), "log": _ew(np.log), "log1p": _ew(np.log1p),
    "expm1": _ew(np.expm1), "tanh": _ew(np.tanh), "logistic": _ew(_logistic),
    "sin": _ew(np.sin), "cos": _ew(np.cos), "tan": _ew(np.tan), "atan2": _ew(np.arctan2),
    "floor": _ew(np.floor), "ceil": _ew(np.ceil), "round": _round,
    "is_finite": _ew(np.isfinite), "clamp": _ew(lambda lo, x, hi: _min(_max(x, lo), hi)),
    # comparisons and logic
    "eq": _ew(np.equal), "ne": _ew(np.not_equal), "lt": _ew(np.less), "le": _ew(np.less_equal),
    "gt": _ew(np.greater), "ge": _ew(np.greater_equal), "and": _ew(np.bitwise_and),
    "or": _ew(np.bitwise_or), "xor": _ew(np.bitwise_xor), "not": _ew(np.invert),
    "select_n": _select_n,
    # structure
    "convert_element_type": _convert, "broadcast_in_dim": _broadcast_in_dim, "iota": _iota,
    "reshape": lambda p, x, *dyn: x.reshape(_static(p, *dyn)["new_sizes"]),
    "transpose": lambda p, x: x.transpose(p["permutation"]),
    "squeeze": lambda p, x: x.reshape([n for i, n in enumerate(x.shape)
                                       if i not in [d % x.ndim for d in p["dimensions"]]]),
    "concatenate": lambda p, *xs: np.concatenate(xs, axis=p["dimension"]),
    "slice": lambda p, x: x[tuple(slice(b, e, s) for b, e, s in zip(
        p["start_indices"], p["limit_indices"], p["strides"] or [1] * x.ndim))],
    "dynamic_slice": lambda p, x, *idx: x[_window(x, idx, p["slice_sizes"])],
    "dynamic_update_slice": _dynamic_update_slice,
    "stop_gradient": _ew(lambda x: x), "copy": _ew(lambda x: x), "copy_p": _ew(lambda x: x),
    # reductions and contraction
    "reduce_sum": _reduction(np.sum), "reduce_max": _reduction(np.max),
    "reduce_min": _reduction(np.min), "reduce_prod": _reduction(np.prod),
    "reduce_and": _reduction(np.all), "reduce_or": _reduction(np.any),
    "dot_general": _dot_general,
}
try:  # scipy is optional: without it erf goes through bind
    import scipy.special

    _NUMPY["erf"] = _ew(scipy.special.erf)
except ImportError:  # pragma: no cover
    pass

# Fast-path entries also exact for integer/bool operands (wrap-around matches XLA) and for
# comparisons of declared floats; integer div/rem/pow/dot/sum always go through bind.
_EXACT_OK = frozenset({
    "add", "sub", "mul", "neg", "max", "min", "abs", "sign", "eq", "ne", "lt", "le", "gt",
    "ge", "and", "or", "xor", "not", "is_finite", "select_n", "clamp", "convert_element_type",
    "broadcast_in_dim", "iota", "reshape", "transpose", "squeeze", "concatenate", "slice",
    "dynamic_slice", "dynamic_update_slice", "stop_gradient", "copy", "copy_p",
    "reduce_max", "reduce_min", "reduce_and", "reduce_or"})


# ------------------------------------------- narrow accumulation (Semantics.sequential_narrow)
def _rounded(x: np.ndarray, dtype: Any) -> np.ndarray:
    """`x` rounded once to `dtype`, held in float64."""
    return round_to_dtype(np.asarray(x, np.float64), dtype).astype(np.float64)


def _accumulate(term: Callable[[int], np.ndarray], n: int, shape: Sequence[int],
                dtype: Any) -> np.ndarray:
    """0 + term(0) + term(1) + ... in index order, rounding to `dtype` after every addition."""
    acc = np.zeros(shape)
    for k in range(n):
        acc = _rounded(acc + term(k), dtype)
    return acc


def _seq_reduce_sum(p: dict, vals: list, dtype: Any) -> list:
    (x,) = vals
    axes = sorted(a % x.ndim for a in p["axes"])
    keep = [d for d in range(x.ndim) if d not in axes]
    xt = x.transpose(keep + axes).reshape([x.shape[d] for d in keep] + [-1])
    return [_accumulate(lambda k: _rounded(xt[..., k], dtype), xt.shape[-1], xt.shape[:-1], dtype)]


def _seq_dot_general(p: dict, vals: list, dtype: Any) -> list | None:
    lhs, rhs = vals
    if np.iscomplexobj(lhs) or np.iscomplexobj(rhs):
        return None
    a, b, shape = _dot_operands(p, lhs, rhs, np.float64)
    acc = _accumulate(lambda k: _rounded(a[:, :, k, None] * b[:, None, k, :], dtype),
                      a.shape[2], (a.shape[0], a.shape[1], b.shape[2]), dtype)
    return [acc.reshape(shape)]


def _seq_conv(p: dict, vals: list, dtype: Any) -> list | None:
    """conv_general_dilated as patches (lax.conv_general_dilated_patches, exact in float64:
    it gathers with a one-hot kernel) times the kernel, summed over (input feature, window
    position) in that order."""
    lhs, rhs = vals
    if p["batch_group_count"] != 1 or np.iscomplexobj(lhs) or np.iscomplexobj(rhs):
        return None
    dn = p["dimension_numbers"]
    lhs, rhs = lhs.transpose(dn.lhs_spec), rhs.transpose(dn.rhs_spec)  # N C *S, O I *W
    n, (o, i), win, g = lhs.shape[0], rhs.shape[:2], rhs.shape[2:], p["feature_group_count"]
    patches = np.asarray(lax.conv_general_dilated_patches(
        lhs, win, p["window_strides"], p["padding"], p["lhs_dilation"], p["rhs_dilation"],
        precision=lax.Precision.HIGHEST))  # N, C*W (C major), *out_spatial
    k = i * math.prod(win)
    pt = patches.reshape(n, g, k, -1)  # C = g * i
    kt = rhs.reshape(g, o // g, k)
    acc = _accumulate(lambda j: _rounded(pt[:, :, None, j, :] * kt[None, :, :, j, None], dtype),
                      k, (n, g, o // g, pt.shape[-1]), dtype)
    return [acc.reshape(n, o, *patches.shape[2:]).transpose(np.argsort(dn.out_spec))]


_SEQUENTIAL: dict[str, Callable] = {"reduce_sum": _seq_reduce_sum, "dot_general": _seq_dot_general,
                                    "conv_general_dilated": _seq_conv}


# ------------------------------------------------------------------- entry point
def interpret(fn: Callable, *args: Any, mode: Mode | Semantics = "declared") -> Any:
    """Trace `fn(*args)` with x64 disabled (so it gets its normal dtypes), evaluate it in
    `mode`, and return `fn`'s output pytree with numpy arrays as leaves."""
    with _x64(False):
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    outs = evaluate_jaxpr(closed, jax.tree_util.tree_leaves(args), mode=mode)
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), outs)
