"""Evaluating jaxprs and single equations under a :class:`~.semantics.Semantics`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np
from jax import lax

from . import primitives
from .accumulation import _SEQUENTIAL
from ..jaxcompat import CALL_PARAM as _CALL_PARAM, COMBINER_PARAMS as _COMBINER_PARAMS, DropVar as _DropVar, \
    enable_x64 as _x64, scan_layout, summarize
from .primitives import _apply
from .relaxations import _relaxations, _widening_convert
from .semantics import (_ALSO_F32, _AS_F32, DECLARED, Mode, Semantics, _adopt, _coerce, _flush, _inexact,
                        _is_key, _narrow, _semantics, _store, _target, _wide, _widen_params)


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



# --------------------------------------------------------------- jaxpr evaluation
# jax types a variable's aval as AbstractValue; in the jaxprs evaluated here it is a ShapedArray (its
# dtype and shape are read, `# type: ignore[attr-defined]` there).
# Values read instead of the program's own literals and consts, by the id of the Literal or constvar
# (``evaluate_jaxpr(constants=...)``), in this semantics' representation.
_CONSTANTS: ContextVar[Mapping[int, Any] | None] = ContextVar("constants", default=None)
# The control-flow decisions taken, in the order they complete, where the caller records them
# (``evaluate_jaxpr(decisions=...)``): ("while", its line, iterations) and ("cond", its line, branch index).
_DECISIONS: ContextVar[list[tuple[str, str, int]] | None] = ContextVar("decisions", default=None)


def evaluate_jaxpr(closed_jaxpr: jcore.ClosedJaxpr, args: Sequence[np.ndarray], *,
                   mode: Mode | Semantics, on_eqn: Hook = None,
                   constants: Mapping[int, Any] | None = None,
                   decisions: list[tuple[str, str, int]] | None = None) -> list[np.ndarray]:
    """Evaluate `closed_jaxpr` on `args` in `mode` (a string or a :class:`Semantics`);
    returns the outputs as numpy arrays.

    Arguments are first converted to the declared input dtypes (as JAX would), then, in
    ``"f64"`` mode, widened to float64/complex128. ``on_eqn`` sees every equation (inner
    ones first, then the equation that holds them), and runs with x64 enabled.
    ``constants`` replaces literals and consts, nested jaxprs' included: ``{id(literal or constvar):
    value}``, each value taken as is (a float64 value is not rounded to the declared dtype first):
    what the ideal would be had the program held other constants (``ideal.constants``).
    ``decisions``, when given, receives each while loop's iteration count and each cond's branch, in the
    order they complete: where two semantics take other decisions they compute other programs.
    """
    sem = _semantics(mode)
    jaxpr = closed_jaxpr.jaxpr
    if len(args) != len(jaxpr.invars):
        raise ValueError(f"expected {len(jaxpr.invars)} arguments, got {len(args)}")
    token, taken = _CONSTANTS.set(constants), _DECISIONS.set(decisions)
    try:
        with _x64(True):
            # Converted when first read, freed after their last use (``_eval_jaxpr``): a model's weights are
            # never all in float64 at once.
            return _eval_jaxpr(jaxpr, closed_jaxpr.consts, args, sem, 0, on_eqn, "<unknown>", coerce_args=True)
    finally:
        _CONSTANTS.reset(token)
        _DECISIONS.reset(taken)


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
    where = summarize(eqn.source_info) or "<unknown>"
    with _x64(True):
        invals = [_adopt(x, v.aval.dtype, sem) for x, v in zip(inputs, eqn.invars)]  # type: ignore[attr-defined]
        outs = _eval_checked(eqn, invals, sem, 0, on_eqn, where, None)
    if on_eqn is not None:
        on_eqn(EqnEvent(eqn, 0, tuple(invals), tuple(outs)))
    return outs


def _eval_jaxpr(jaxpr: jcore.Jaxpr, consts: Sequence[Any], args: Sequence[Any], sem: Semantics,
                depth: int, hook: Hook, outer: str, coerce_args: bool = False) -> list[Any]:
    """Evaluate an open jaxpr; `args` are already in `sem`'s representation (unless `coerce_args`: then
    each is converted when first read), `consts` are not. A value is dropped after its last use, so a
    program's memory is its live values, not all of them (a 1B-parameter model's weights in float64
    would be 8 GB)."""
    env: dict[Any, Any] = {}
    raw: dict[Any, Any] = dict(zip(jaxpr.constvars, consts))  # converted on first read
    if coerce_args:
        raw.update(zip(jaxpr.invars, args))
    else:
        env.update(zip(jaxpr.invars, args))
    relax = _relaxations(jaxpr, sem)
    as_f32: dict[Any, Any] = {}  # float32 copies of narrow results, for widening converts
    last_use: dict[Any, int] = {}
    for i, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if not isinstance(v, jcore.Literal):
                last_use[v] = i
    for v in jaxpr.outvars:
        if not isinstance(v, jcore.Literal):
            last_use[v] = len(jaxpr.eqns)  # kept to the end

    replaced = _CONSTANTS.get() or {}

    def read(v: Any) -> Any:
        if isinstance(v, jcore.Literal):
            if id(v) in replaced:
                return replaced[id(v)]
            return _coerce(v.val, v.aval.dtype, sem)  # type: ignore[attr-defined]
        if v not in env and v in raw:
            value = raw.pop(v)
            env[v] = replaced[id(v)] if id(v) in replaced else _coerce(value, v.aval.dtype, sem)
        return env[v]

    for index, eqn in enumerate(jaxpr.eqns):
        invals = [read(v) for v in eqn.invars]
        first = eqn.invars[0] if eqn.invars else None
        if (as_f32 and first is not None and not isinstance(first, jcore.Literal) and first in as_f32
                and _widening_convert(eqn, first.aval.dtype)):  # type: ignore[attr-defined]
            invals[0] = as_f32[eqn.invars[0]]
        where = summarize(eqn.source_info) or outer  # else the enclosing eqn's
        extra: dict[int, Any] = {}
        outs = _eval_checked(eqn, invals, sem, depth, hook, where,
                             [relax.get(v) for v in eqn.outvars] if relax else None, extra)
        if hook is not None:
            hook(EqnEvent(eqn, depth, tuple(invals), tuple(outs)))
        env.update((v, o) for v, o in zip(eqn.outvars, outs) if not isinstance(v, _DropVar) and v in last_use)
        as_f32.update((eqn.outvars[i], o) for i, o in extra.items())
        for v in eqn.invars:  # dead after this equation: free it
            if not isinstance(v, jcore.Literal) and last_use.get(v) == index:
                env.pop(v, None)
                as_f32.pop(v, None)
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
    out_dtypes = [v.aval.dtype for v in eqn.outvars]  # type: ignore[attr-defined]
    in_dtypes = [v.aval.dtype for v in eqn.invars]  # type: ignore[attr-defined]
    relax = relax or [None] * len(out_dtypes)
    flush = False
    outs: list | None
    if name in _CALL_PARAM:  # recurse (never bind) so that every inner op is rounded
        outs = run(eqn.params[_CALL_PARAM[name]], invals)
    elif name in _RECURSE:
        taken = _DECISIONS.get() if name in ("while", "cond") else None
        if taken is None:
            outs = _RECURSE[name](eqn.params, invals, run)
        elif name == "cond":
            taken.append(("cond", where, int(np.clip(np.asarray(invals[0]), 0, len(eqn.params["branches"]) - 1))))
            outs = _cond(eqn.params, invals, run)
        else:
            body, count = eqn.params["body_jaxpr"], [0]

            def counted(j: Any, vals: list) -> list:
                count[0] += j is body
                return run(j, vals)

            outs = _while(eqn.params, invals, counted)
            taken.append(("while", where, count[0]))
    elif _has_jaxpr(eqn.params) and name not in _COMBINER_PARAMS:
        raise InterpretError(f"cannot evaluate {name} at {where}: primitive carries a "
                             "sub-jaxpr and the interpreter has no rule for it")
    elif name in _BIT_LEVEL:  # no float64 meaning: run natively on the declared dtypes
        if not sem.round_results and name == "reduce_precision":
            return [invals[0]]
        native = [_store(x, d, DECLARED) for x, d in zip(invals, in_dtypes)]
        outs = (primitives._bind_op_by_op if name in _OP_BY_OP else primitives._bind)(
            eqn.primitive, native, eqn.params)
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
    (nc, ncarry), length = scan_layout(params, len(invals)), params["length"]
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


def _custom_linear_solve(params: dict, invals: list, run: Callable) -> list:
    """Run the `solve` jaxpr on its consts and b, as JAX's own impl does (matvec, vecmat and
    transpose_solve only matter to differentiation)."""
    lengths = params["const_lengths"]  # per jaxpr: matvec, vecmat, solve, transpose_solve
    start = lengths.matvec + lengths.vecmat
    return run(params["jaxprs"].solve, [*invals[start:start + lengths.solve], *invals[sum(lengths):]])


_RECURSE: dict[str, Callable] = {"cond": _cond, "while": _while, "scan": _scan,
                                 "custom_linear_solve": _custom_linear_solve}

# Bit-level primitives: no float64 meaning, evaluated natively on the declared dtypes
# (in "f64" mode the inputs are rounded to their declared dtypes first; reduce_precision
# is the identity there). Samplers belong here too: a random_gamma result is what its
# rejection loop draws from the key's stream, not a function of alpha in the reals (bound
# with a float64 alpha it draws another stream).
_BIT_LEVEL = frozenset({
    "bitcast_convert_type", "nextafter", "reduce_precision", "rng_uniform",
    "rng_bit_generator", "random_seed", "random_bits", "random_split", "random_fold_in",
    "random_wrap", "random_unwrap", "random_clone", "threefry2x32", "random_gamma"})
# Bit-level primitives whose implementation does float arithmetic: run op by op, as eager
# runs them (compiled whole, XLA fuses and contracts that arithmetic: other last bits, so
# another rejection path).
_OP_BY_OP = frozenset({"random_gamma"})


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
        avals = [jax.ShapeDtypeStruct(v.aval.shape, _wide(v.aval.dtype)) for v in jaxpr.invars]  # type: ignore[attr-defined]
        _WIDENED[jaxpr] = jax.make_jaxpr(widened)(*avals)
    closed = _WIDENED[jaxpr]
    if cparam is None:
        return {**params, jparam: closed}
    return {**params, jparam: closed.jaxpr, cparam: tuple(closed.consts)}


# ------------------------------------------------------------------- entry point
def trace(fn: Callable, *args: Any) -> tuple[jcore.ClosedJaxpr, Any]:
    """`fn(*args)`'s jaxpr, traced with x64 disabled (so it gets its normal dtypes), and its output tree."""
    with _x64(False):
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    return closed, jax.tree_util.tree_structure(out_shape)


def interpret(fn: Callable, *args: Any, mode: Mode | Semantics = "declared") -> Any:
    """Trace `fn(*args)` (``trace``), evaluate it in `mode`, and return `fn`'s output pytree with
    numpy arrays as leaves."""
    closed, tree = trace(fn, *args)
    return jax.tree_util.tree_unflatten(tree, evaluate_jaxpr(closed, jax.tree_util.tree_leaves(args), mode=mode))
