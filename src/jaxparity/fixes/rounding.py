"""A model-side fix for excess precision: round every narrow-float result where it is declared.

On CPU, ``jax.jit``, ``jax.export`` and a jax2tf SavedModel served by TensorFlow let XLA compute
a bf16 (or f16, float8...) operation in float32 and keep the float32 value for the next
operation instead of rounding it to the declared dtype ("excess precision"), so they disagree
with eager execution, where every operation is its own program and its result is stored in the
declared dtype. The flag-based fixes are per path (``xla_allow_excess_precision=False`` as a
compile option, ``XLA_FLAGS=--xla_allow_excess_precision=false`` in a TensorFlow Serving
process). ``round_like_declared(fn)`` needs no flag: it re-emits ``fn``'s program with
``lax.reduce_precision(y, exponent_bits, mantissa_bits)`` after every equation whose declared
output is a narrow float, which forces the rounding even where the compiler computes in float32.

How it works: ``fn`` is traced to a jaxpr (once per input shapes/dtypes/pytree structure) and the
jaxpr is evaluated equation by equation with ``primitive.bind`` under the caller's trace, so the
result works eagerly and inside ``jax.jit``, ``jax.export`` and ``jax2tf``. Each equation is
bound inside ``source_info_util.user_context`` with its own traceback and name stack, so HLO
metadata still points at the user's lines. Nested programs are rewritten rather than inlined so
their inner operations get roundings too:

* ``jit``: the ``jaxpr`` param is replaced by a rewritten ClosedJaxpr (the call stays a call);
* ``custom_jvp_call`` / ``custom_vjp_call``: ``call_jaxpr`` is rewritten, the JVP/VJP rules are
  kept (see Limitations);
* ``remat2`` (``jax.checkpoint``): re-applied as ``jax.checkpoint`` (same ``prevent_cse`` and
  ``policy``) around the rewritten body;
* ``closed_call`` / ``core_call``: inlined;
* ``cond`` (``branches``), ``while`` (``cond_jaxpr``, ``body_jaxpr``) and ``scan`` (``jaxpr``):
  their inner ClosedJaxprs are rewritten (each keeps its signature), so a bf16 scan carry is
  rounded in every iteration, not only after the loop.

Any other primitive that carries a sub-jaxpr (``shard_map``, ``custom_linear_solve``, reduction
and scatter combiners...) is bound unchanged and only its narrow-float outputs are rounded.

Which equations: every equation with a narrow-float output (a floating dtype of fewer than 32
bits: bfloat16 -> 8/7 exponent/mantissa bits, float16 -> 5/10, float8 formats from
``ml_dtypes.finfo``), except primitives that only move or select values (reshape, transpose,
slice, gather, concatenate, select_n, max, neg...): their outputs are exact copies of their
already-rounded inputs. ``only`` restricts the insertion further (see ``round_like_declared``).

Does the rounding survive XLA? XLA's algebraic simplifier can drop a ``reduce-precision`` whose
operand type already has those bits (``enable_remove_no_op_reduce_precision``), which would undo
the fix if it ran before the float-normalization passes turn the bf16 op into float32. Checked on
jaxlib 0.9.2, CPU: it does not. The compiled module keeps
``reduce-precision(f32 value), exponent_bits=8, mantissa_bits=7`` after the float-normalized
convolution (even ``reduce_precision`` of a bare bf16 parameter survives), and the tests check bit
equality with eager for jit, export and the SavedModel. (XLA's GPU pipeline, per its source, turns
that rewrite on only after its last ``SimplifyFPConversions``, the pass that removes
f32->bf16->f32 convert pairs, so the roundings it could drop are real no-ops; not run here.)
Set ``jaxparity.fixes.rounding.ROUND_IN_F32 = True`` to emit ``convert -> reduce_precision -> convert`` in float32
instead, whose operand is never narrow.

Limitations:

* Float8 formats that are not IEEE-like (``e4m3fn``: no infinities, max 448; the ``fnuz``
  formats: exponent bias one higher) are rounded to the right number of mantissa bits but with one
  more exponent bit than they have, so in-range values are never turned into inf; values beyond
  the format's finite range or below its smallest normal are not clamped or flushed as a cast
  would.
* Under differentiation (``jax.jvp``/``jax.grad``) of a ``custom_jvp``/``custom_vjp`` function the
  primal outputs come from the user's rule, which is not rewritten, so they are not rounded.
* Python scalars, strings and other non-array arguments are treated as static: they are baked into
  the trace (and into the cache key), as ``static_argnums`` would.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import textwrap
from collections.abc import Callable, Collection, Hashable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np
from jax import lax

# ---------------------------------------------------------------------------------------
# JAX-version-specific details (checked against jax 0.9.2 with jax.make_jaxpr):
#  * jax.jit is primitive "jit" with param `jaxpr` (ClosedJaxpr);
#  * jax.checkpoint is "remat2" with `jaxpr` (open Jaxpr), `prevent_cse`, `policy`;
#  * custom_jvp/custom_vjp are "custom_jvp_call"/"custom_vjp_call" with `call_jaxpr`
#    (ClosedJaxpr taking all operands); their bind params come from get_bind_params;
#  * "cond": `branches`; "while": `cond_jaxpr`, `body_jaxpr`; "scan": `jaxpr` (ClosedJaxprs);
#  * source_info_util.user_context(traceback, name_stack=...) and eqn.ctx.manager are what
#    jax.core.eval_jaxpr uses to keep provenance when re-binding equations.
# ---------------------------------------------------------------------------------------
from ..jaxcompat import Tracer as _Tracer, bind, current_name_stack, typeof, user_context, user_frames  # noqa: E402

__all__ = ["ROUND_IN_F32", "inserted_roundings", "round_like_declared", "write_fixed_case"]


# Emit the rounding as convert(f32) -> reduce_precision -> convert(narrow) instead of a
# reduce_precision on the narrow value. Not needed with jaxlib 0.9.2 (see the module docstring).
ROUND_IN_F32 = False

_CLOSED_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "custom_jvp_call": "call_jaxpr",
                 "custom_vjp_call": "call_jaxpr"}
_INLINE_CALLS = {"closed_call": "call_jaxpr", "core_call": "call_jaxpr"}
_REMAT = {"remat2", "checkpoint", "remat"}
_CONTROL_FLOW = {"cond": ("branches",), "while": ("cond_jaxpr", "body_jaxpr"), "scan": ("jaxpr",)}

# Primitives whose float outputs are copies or selections of their inputs' values: with rounded
# inputs their outputs are already rounded, so no rounding is inserted after them.
_EXACT = frozenset({
    "reshape", "broadcast_in_dim", "transpose", "squeeze", "expand_dims", "slice",
    "dynamic_slice", "dynamic_update_slice", "gather", "concatenate", "pad", "rev",
    "select_n", "copy", "copy_p", "neg", "abs", "max", "min", "reduce_max", "reduce_min",
    "clamp", "sort", "sharding_constraint", "device_put", "optimization_barrier",
    "split",
})


# ------------------------------------------------------------------------ dtypes
@functools.cache
def _bits(dtype: Any) -> tuple[int, int] | None:
    """(exponent_bits, mantissa_bits) that round to `dtype`, or None if it is not a narrow float."""
    try:
        if not jax.numpy.issubdtype(dtype, jax.numpy.floating) or np.dtype(dtype).itemsize >= 4:
            return None
        import ml_dtypes

        info = ml_dtypes.finfo(dtype)
    except (TypeError, ValueError):
        return None
    nexp, nmant = int(info.nexp), int(info.nmant)
    bias = 2 ** (nexp - 1) - 1
    ieee_like = (float(info.max) == (2 - 2.0 ** -nmant) * 2.0 ** bias
                 and float(info.smallest_normal) == 2.0 ** (1 - bias))
    # Non-IEEE float8 (e4m3fn, *fnuz): one more exponent bit so that no in-range value
    # overflows to inf (see Limitations in the module docstring).
    return (nexp if ieee_like else nexp + 1), nmant


def _aval_dtype(aval: Any) -> Any:
    return getattr(aval, "dtype", None)


def _narrow(aval: Any) -> tuple[int, int] | None:
    dtype = _aval_dtype(aval)
    if dtype is None or jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return None
    return _bits(dtype)


def _round(x: Any, bits: tuple[int, int]) -> Any:
    exponent_bits, mantissa_bits = bits
    if ROUND_IN_F32:
        # The operand of reduce_precision is float32, so no simplifier can see it as a no-op.
        y = lax.convert_element_type(x, np.float32)
        y = lax.reduce_precision(y, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)
        return lax.convert_element_type(y, x.dtype)
    return lax.reduce_precision(x, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)


# ------------------------------------------------------------------ where to round
def _normalize_only(only: Collection[str] | None) -> frozenset[str] | None:
    if only is None:
        return None
    if isinstance(only, str):
        only = {only}
    items = frozenset(only)
    bad = [o for o in items if not isinstance(o, str) or not o.strip()]
    if bad:
        raise TypeError(f"only: expected primitive names or 'file:line' strings, got {bad!r}")
    return frozenset(o.strip() for o in items)


def _frame_matches(spec: str, frame: Any) -> bool:
    file, _, line = spec.rpartition(":")
    if not line.isdigit() or int(line) != frame.start_line:
        return False
    file_name = frame.file_name.replace(os.sep, "/")
    file = file.replace(os.sep, "/")
    return file_name == file or file_name.endswith("/" + file.lstrip("/"))


def _selected(eqn: Any, only: frozenset[str] | None) -> bool:
    if only is None:
        return True
    if eqn.primitive.name in only:
        return True
    locations = [o for o in only if ":" in o]
    if not locations:
        return False
    frames = user_frames(eqn.source_info)
    return any(_frame_matches(spec, f) for spec in locations for f in frames)


def _rounds_output(eqn: Any) -> bool:
    """Whether this equation's narrow outputs get a rounding (apart from `only`)."""
    name = eqn.primitive.name
    if name in _EXACT:
        return False
    if name == "convert_element_type" and eqn.invars[0].aval.dtype == eqn.outvars[0].aval.dtype:
        return False  # only the weak type changes
    if name == "reduce_precision":  # already rounded, unless to more bits than declared
        bits = _narrow(eqn.outvars[0].aval)
        return bits is not None and (eqn.params["exponent_bits"], eqn.params["mantissa_bits"]) != bits
    return True


def _where(eqn: Any) -> str:
    """'linear.py:700 (from model.py:21)': the innermost user frame, and the innermost one
    outside installed packages when that is another frame."""
    frames = user_frames(eqn.source_info)
    if not frames:
        return "<unknown>"
    text = lambda f: f"{Path(f.file_name).name}:{f.start_line}"  # noqa: E731
    own = next((f for f in frames if not any(
        part in f.file_name for part in ("site-packages", "dist-packages", "/jaxparity/"))), None)
    if own is None or own is frames[0]:
        return text(frames[0])
    return f"{text(frames[0])} (from {text(own)})"


# -------------------------------------------------------------------- the rewriter
class _Rewriter:
    """Evaluates jaxprs with roundings inserted; caches rewritten sub-jaxprs by identity."""

    def __init__(self, only: frozenset[str] | None) -> None:
        self.only = only
        self._closed: dict[Any, jcore.ClosedJaxpr] = {}  # Jaxpr/ClosedJaxpr hash by identity

    # -- sub-jaxprs
    def rewrite_closed(self, closed: jcore.ClosedJaxpr) -> jcore.ClosedJaxpr:
        """A ClosedJaxpr with the same signature as `closed`, with roundings inserted."""
        hit = self._closed.get(closed)
        if hit is not None:
            return hit
        jaxpr, consts = closed.jaxpr, closed.consts

        def body(*args: Any) -> list[Any]:
            return self.eval_jaxpr(jaxpr, consts, args)

        body.__name__ = getattr(jaxpr.debug_info, "func_name", None) or "rounded"
        specs = [_spec(v.aval) for v in jaxpr.invars]
        new = jax.make_jaxpr(body)(*specs)
        if [v.aval for v in new.jaxpr.outvars] != [v.aval for v in jaxpr.outvars]:
            # Should not happen (each rounding keeps its operand's aval); keep the original.
            new = closed
        self._closed[closed] = new
        return new

    # -- evaluation
    def plan(self, jaxpr: Any) -> dict[int, Callable[[Callable[[Any], Any]], list[Any]]]:
        """Equations (by position in ``jaxpr``) computed otherwise: each maps to a function of the
        environment's reader that returns the equation's outputs. None here; see ``conditioning``."""
        return {}

    def eval_jaxpr(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        env: dict[Any, Any] = {}
        env.update(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))

        def read(v: Any) -> Any:
            return v.val if isinstance(v, jcore.Literal) else env[v]

        plans = self.plan(jaxpr)
        for k, eqn in enumerate(jaxpr.eqns):
            invals = [read(v) for v in eqn.invars]
            name_stack = current_name_stack() + eqn.source_info.name_stack
            with user_context(eqn.source_info.traceback, name_stack=name_stack), \
                    eqn.ctx.manager:
                outs = plans[k](read) if k in plans else self.eval_eqn(eqn, invals)
            for v, o in zip(eqn.outvars, outs):
                env[v] = o  # a DropVar is never read again
        return [read(v) for v in jaxpr.outvars]

    def eval_eqn(self, eqn: Any, invals: list[Any]) -> list[Any]:
        prim, params, name = eqn.primitive, eqn.params, eqn.primitive.name
        if name in _INLINE_CALLS:
            sub = params[_INLINE_CALLS[name]]
            if isinstance(sub, jcore.ClosedJaxpr):
                return self.eval_jaxpr(sub.jaxpr, sub.consts, invals)
            return self.eval_jaxpr(sub, (), invals)
        if name in _REMAT and isinstance(params.get("jaxpr"), jcore.Jaxpr):
            sub = params["jaxpr"]
            fun = jax.checkpoint(lambda *a: self.eval_jaxpr(sub, (), a),
                                 prevent_cse=params.get("prevent_cse", True),
                                 policy=params.get("policy"))
            return list(fun(*invals))
        rewritten = dict(params)
        inner_rounded = False
        if name in _CLOSED_CALLS and isinstance(params.get(_CLOSED_CALLS[name]), jcore.ClosedJaxpr):
            key = _CLOSED_CALLS[name]
            rewritten[key] = self.rewrite_closed(params[key])
            inner_rounded = True
        elif name in _CONTROL_FLOW:
            for key in _CONTROL_FLOW[name]:
                value = params[key]
                if isinstance(value, tuple):
                    rewritten[key] = tuple(self.rewrite_closed(c) for c in value)
                else:
                    rewritten[key] = self.rewrite_closed(value)
            inner_rounded = True
        out = bind(prim, invals, rewritten)
        outs = list(out) if prim.multiple_results else [out]
        if inner_rounded or not _rounds_output(eqn) or not _selected(eqn, self.only):
            return outs
        for i, v in enumerate(eqn.outvars):
            bits = _narrow(v.aval)
            if bits is not None:
                outs[i] = _round(outs[i], bits)
        return outs

    # -- listing (no evaluation)
    def sites(self, jaxpr: Any, depth: int = 0) -> list[str]:
        found: list[str] = []
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            subs: list[Any] = []
            if name in _INLINE_CALLS or name in _CLOSED_CALLS:
                subs = [eqn.params[(_INLINE_CALLS | _CLOSED_CALLS)[name]]]
            elif name in _REMAT:
                subs = [eqn.params.get("jaxpr")]
            elif name in _CONTROL_FLOW:
                for key in _CONTROL_FLOW[name]:
                    v = eqn.params[key]
                    subs.extend(v if isinstance(v, tuple) else [v])
            if subs and all(isinstance(s, (jcore.Jaxpr, jcore.ClosedJaxpr)) for s in subs):
                for s in subs:
                    found.extend(self.sites(s.jaxpr if isinstance(s, jcore.ClosedJaxpr) else s,
                                            depth + 1))
                continue
            if not _rounds_output(eqn) or not _selected(eqn, self.only):
                continue
            narrow = [v.aval for v in eqn.outvars if _narrow(v.aval) is not None]
            if narrow:
                types = ", ".join(a.str_short() for a in narrow)
                found.append(f"{'  ' * depth}{name} -> {types} at {_where(eqn)}")
        return found


def _spec(aval: Any) -> Any:
    if hasattr(aval, "shape") and hasattr(aval, "dtype"):
        return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=getattr(aval, "weak_type", False))
    raise TypeError(f"round_like_declared: cannot re-trace a sub-program taking a {aval}")


# --------------------------------------------------------------- the transform
def _is_dynamic(x: Any) -> bool:
    """Array-valued leaves are traced; everything else (Python scalars...) is static."""
    return isinstance(x, (jax.Array, np.ndarray, np.generic))


def _trace_key(leaves: Sequence[Any]) -> Hashable | None:
    key: list[tuple[Any, ...]] = []
    for x in leaves:
        if _is_dynamic(x):
            aval = typeof(x)
            key.append(("a", aval.shape, aval.dtype, getattr(aval, "weak_type", False)))
        else:
            try:
                hash(x)
            except TypeError:
                return None
            key.append(("s", type(x), x))
    return tuple(key)


def rewritten(fn: Callable, rewriter: _Rewriter) -> Callable:
    """``fn`` re-emitted equation by equation through ``rewriter`` (under the caller's trace: eagerly,
    under ``jax.jit``, ``jax.export`` or ``jax2tf``). Array leaves of the arguments are traced, other
    leaves are static; the traced jaxpr is cached per pytree structure, shapes, dtypes and static values."""
    cache: dict[Hashable, tuple[jcore.ClosedJaxpr, Any]] = {}

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        dynamic = [i for i, x in enumerate(leaves) if _is_dynamic(x)]
        key = _trace_key(leaves)
        key = None if key is None else (treedef, key)
        hit = cache.get(key) if key is not None else None
        if hit is None:
            def flat_fn(*dyn: Any) -> Any:
                full = list(leaves)
                for i, x in zip(dynamic, dyn):
                    full[i] = x
                a, kw = jax.tree_util.tree_unflatten(treedef, full)
                return fn(*a, **kw)

            specs = [_spec(typeof(leaves[i])) for i in dynamic]
            closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*specs)
            hit = (closed, jax.tree_util.tree_structure(out_shape))
            # Consts that are tracers of an enclosing trace must not outlive this call.
            if key is not None and not any(isinstance(c, _Tracer) for c in closed.consts):
                cache[key] = hit
        closed, out_tree = hit
        outs = rewriter.eval_jaxpr(closed.jaxpr, closed.consts, [leaves[i] for i in dynamic])
        return jax.tree_util.tree_unflatten(out_tree, outs)

    return call


def round_like_declared(fn: Callable, *, only: Collection[str] | None = None) -> Callable:
    """``fn`` with ``lax.reduce_precision`` after every equation whose declared output is a narrow
    float, so compiled paths (jit, export, jax2tf/TF Serving) round where the program says.

    The result takes and returns the same pytrees as ``fn`` and computes the same jaxpr; eagerly
    its outputs equal ``fn``'s bit for bit (eager already rounds each result). It can be called
    eagerly or under ``jax.jit``/``jax.export``/``jax2tf.convert``.

    ``only`` restricts where roundings go: a collection of primitive names
    (``{"conv_general_dilated", "dot_general"}``) and/or source locations written
    ``"FILE:LINE"`` (``"model.py:21"``; FILE may be a basename or any path suffix; it matches if
    any user frame of the equation's traceback, flax's own files included, is at that line).
    ``None`` (default) rounds everywhere; an empty collection inserts nothing.

    Array leaves of the arguments are traced; other leaves (Python scalars, strings) are static.
    The traced jaxpr is cached per pytree structure, shapes, dtypes and static values.
    """
    only_set = _normalize_only(only)
    rounded = rewritten(fn, _Rewriter(only_set))
    rounded.round_like_declared_only = only_set  # type: ignore[attr-defined]
    return rounded


def inserted_roundings(fn: Callable, args: Sequence[Any], *, only: Collection[str] | None = None
                       ) -> list[str]:
    """Where ``round_like_declared(fn, only=only)`` rounds for these ``args``, one line each:
    ``'conv_general_dilated -> bf16[1,1,2] at linear.py:563'`` (nested ones indented)."""
    closed = jax.make_jaxpr(fn)(*args)
    return _Rewriter(_normalize_only(only)).sites(closed.jaxpr)


# ----------------------------------------------------------------- fixed case file
def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def write_fixed_case(case_spec: str, out_path: str | os.PathLike, *, only: Collection[str] | None = None,
                     serving_flags: str | None = None) -> str:
    """Write a case file to ``out_path`` whose ``make()`` returns the case of ``case_spec``
    (``FILE.py`` or ``FILE.py:FACTORY``) with its function wrapped in ``round_like_declared``.

    The written file imports the original by absolute path (importlib), so it runs from anywhere
    jaxparity is installed. Its docstring says what changed and why, lists the roundings inserted
    for the case's own inputs (when the case loads here), and, given ``serving_flags``
    (``"XLA_FLAGS=--xla_allow_excess_precision=false"``, or the path spec
    ``"savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false"``), the flag-based alternative.
    Returns the text written.
    """
    from ..case import parse_case_spec

    source, factory = parse_case_spec(case_spec)
    only_set = _normalize_only(only)

    sites: list[str] | None
    try:
        fn, args = _load_factory(source, factory)()
        sites = inserted_roundings(fn, tuple(args) if isinstance(args, (tuple, list)) else (args,),
                                   only=only_set)
    except Exception as e:  # the file still works; the docstring just cannot list the sites
        sites = None
        load_error = f"{type(e).__name__}: {e}"

    where = ("after every operation whose declared result is a narrow float (bfloat16, float16, "
             "float8)" if only_set is None else
             f"only after operations matching {sorted(only_set)!r} (primitive names or FILE:LINE)")
    lines = [
        f"{source.name}:{factory} with every narrow-float result rounded where the program declares it.",
        "",
        f"Original case: {source}:{factory}",
        "",
        *textwrap.wrap("What changed: the function is wrapped in jaxparity.fixes.round_like_declared, "
                       "which inserts lax.reduce_precision(y, exponent_bits, mantissa_bits) "
                       f"{where}.", 88),
        "",
        "Why: on CPU, jax.jit, jax.export and a jax2tf SavedModel served by TensorFlow let XLA",
        "compute a bfloat16 operation in float32 and pass the float32 value on without rounding",
        "it to bfloat16 as the program declares (excess precision), so they disagree with eager",
        "JAX, where every operation's result is stored in its declared dtype. reduce_precision",
        "forces that rounding inside the compiled program, with no compiler flag, so every path",
        "computes what eager computes.",
    ]
    if sites:
        lines += ["", "Roundings inserted for the case's example inputs:"]
        lines += [f"  {s}" for s in sites]
    elif sites is not None:
        lines += ["", "No rounding is inserted for the case's example inputs (no narrow-float results"
                  + (" match `only`)." if only_set is not None else ").")]
    else:
        lines += ["", f"(The rounding sites could not be listed: loading the case failed with {load_error})"]
    if serving_flags:
        # Either the variable itself or a jaxparity path spec ("savedmodel:XLA_FLAGS=...").
        head, colon, rest = serving_flags.partition(":")
        settings = rest if colon and head.isidentifier() and head.islower() else serving_flags
        lines += [
            "",
            "Alternative without changing the model: leave the function as it is and set",
            *(f"    {item.strip()}" for item in settings.split(",") if item.strip()),
            "in the TensorFlow Serving process (for jax.jit / jax.export, the compile option",
            "xla_allow_excess_precision=False).",
        ]
    doc = _docstring_safe("\n".join(lines))
    only_literal = "None" if only_set is None else f"frozenset({sorted(only_set)!r})"
    text = f'''"""{doc}
"""

import importlib.util
import os
import sys

from jaxparity.fixes import round_like_declared

ORIGINAL = {str(source)!r}
FACTORY = {factory!r}
ONLY = {only_literal}


{LOADER}

def make():
    """The original case's (fn, args), with fn rounding every result to its declared dtype."""
    fn, args = getattr(_load_original(), FACTORY)()
    return round_like_declared(fn, only=ONLY), args
'''
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


# The function a written case file imports its original with (``ORIGINAL`` is the original's absolute path).
LOADER = '''def _load_original():
    """Import the original case file by its absolute path."""
    name = "jaxparity_original_" + os.path.splitext(os.path.basename(ORIGINAL))[0]
    spec = importlib.util.spec_from_file_location(name, ORIGINAL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses (flax modules) look their module up here
    folder = os.path.dirname(ORIGINAL)
    sys.path.insert(0, folder)  # let the original import its neighbours
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module
'''


def _load_factory(path: Path, factory: str) -> Callable[[], Any]:
    name = f"jaxparity_original_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return getattr(module, factory)
