"""The changes that could make two runtimes agree on one op, as data: other formulations of the same math
(per primitive), the op computed in a wider dtype, and guards built from its trigger (indices clipped into
range, non-finite inputs replaced, float-to-integer casts kept in range). Each is a function of the op and
its inputs that replaces the op in the program (``instead``), so nothing in the user's file changes to test
it; ``code`` says it as the change at the user's line.

A formulation computes the op's own math (it must give the baseline's or the correctly rounded values on the
op's captured inputs); ``wider`` rounds less; a guard changes the result where the trigger holds (the
elements whose result the runtimes disagree on) and keeps it elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = ["Candidate", "FORMULATIONS", "candidates"]

Kind = Literal["formulation", "wider", "guard"]


@dataclass(frozen=True)
class Candidate:
    name: str  # "the logistic as 1 / (1 + exp(-x))"
    code: str  # the change at the user's line: "jax.nn.sigmoid(x) -> 1 / (1 + jnp.exp(-x))"
    kind: Kind
    instead: Callable[[Any, list[Any]], list[Any]]  # (op, its inputs) -> its outputs, as JAX values
    # Where a formulation can compute otherwise than the op at all: (the inputs' words, a test of the op's
    # inputs). An op that rounds nothing (max, a select) differs between runtimes only on such values (NaN,
    # a zero's sign); on inputs without them the formulation is the op, and re-running it can change nothing.
    # None: on any inputs (another formulation rounds otherwise).
    only_on: tuple[str, Callable[[list[np.ndarray]], bool]] | None = None


def _one(f: Callable[..., Any]) -> Callable[[Any, list[Any]], list[Any]]:
    """A single-output rewrite ``f(eqn, *inputs)``, cast to the op's declared output dtype."""

    def instead(op: Any, ins: list[Any]) -> list[Any]:
        out = f(op.eqn, *ins)
        aval = op.eqn.outvars[0].aval
        return [out.astype(aval.dtype) if out.dtype != aval.dtype else out]

    return instead


Special = tuple[str, Callable[[list[np.ndarray]], bool]]


def _f(name: str, code: str, f: Callable[..., Any], only_on: Special | None = None
       ) -> tuple[str, str, Callable[..., Any], Special | None]:
    return name, code, f, only_on


def _floats(ins: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(x, np.float64) for x in ins if np.asarray(x).dtype.kind in "fV"]


def _any_nan(ins: list[np.ndarray]) -> bool:
    return any(np.isnan(x).any() for x in _floats(ins))


def _nan_or_zeros(ins: list[np.ndarray]) -> bool:
    """A NaN, or two operands both zero (a zero's sign is all that can tell them apart)."""
    floats = _floats(ins)
    if any(np.isnan(x).any() for x in floats):
        return True
    if len(floats) < 2:
        return False
    try:
        a, b = np.broadcast_arrays(floats[0], floats[1])
    except ValueError:
        return True
    return bool(((a == 0) & (b == 0)).any())


def _nan_or_inverted(ins: list[np.ndarray]) -> bool:
    """clamp(lo, x, hi): a NaN, a zero (its sign), or lo above hi (where the orders of min and max differ)."""
    floats = _floats(ins)
    if len(floats) != 3 or any(np.isnan(x).any() for x in floats):
        return True
    lo, x, hi = floats
    return bool((lo > hi).any() or (x == 0).any())


_NAN: Special = ("a NaN", _any_nan)
_NAN_OR_ZEROS: Special = ("a NaN or two zeros", _nan_or_zeros)


def _jnp() -> Any:
    import jax.numpy as jnp

    return jnp


def _lax() -> Any:
    from jax import lax

    return lax


def _stable_logistic(e: Any, x: Any) -> Any:
    jnp = _jnp()
    z = jnp.exp(-jnp.abs(x))
    return jnp.where(x >= 0, 1 / (1 + z), z / (1 + z))


def _round_even(e: Any, x: Any) -> Any:
    """Round half to even with floor alone: every runtime computes floor and compares exactly."""
    jnp = _jnp()
    f = jnp.floor(x)
    d = x - f
    up = (d > 0.5) | ((d == 0.5) & (jnp.remainder(f, 2) != 0))
    return jnp.where(up, f + 1, f)


def _round_away(e: Any, x: Any) -> Any:
    jnp = _jnp()
    return jnp.sign(x) * jnp.floor(jnp.abs(x) + 0.5)


def _round(e: Any, x: Any) -> Any:
    return _round_even(e, x) if int(e.params.get("rounding_method", 0)) == 1 else _round_away(e, x)


def _nan_max(e: Any, a: Any, b: Any) -> Any:
    jnp = _jnp()
    m = _lax().max(a, b)
    return jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.nan, m) if jnp.issubdtype(a.dtype, jnp.floating) else m


def _nan_min(e: Any, a: Any, b: Any) -> Any:
    jnp = _jnp()
    m = _lax().min(a, b)
    return jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.nan, m) if jnp.issubdtype(a.dtype, jnp.floating) else m


def _reduce_nan(which: str) -> Callable[..., Any]:
    def f(e: Any, x: Any) -> Any:
        jnp = _jnp()
        axes = tuple(e.params["axes"])
        out = (jnp.max if which == "max" else jnp.min)(x, axis=axes)
        if not jnp.issubdtype(x.dtype, jnp.floating):
            return out
        return jnp.where(jnp.isnan(x).any(axis=axes), jnp.nan, out)

    return f


def _select_max(e: Any, a: Any, b: Any) -> Any:
    return _jnp().where(a > b, a, b)


def _select_min(e: Any, a: Any, b: Any) -> Any:
    return _jnp().where(a < b, a, b)


def _clamp_ordered(e: Any, lo: Any, x: Any, hi: Any) -> Any:
    lax = _lax()
    return lax.min(lax.max(x, lo), hi)


def _float_rem(e: Any, x: Any, y: Any) -> Any:
    jnp = _jnp()
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return _lax().rem(x, y)
    return jnp.fmod(x, y)


def _log1p_goldberg(e: Any, x: Any) -> Any:
    """log1p accurate to a few ULP from log alone: log(u) * x / (u - 1) corrects log(1 + x)'s rounding of u
    (Goldberg, "What every computer scientist should know about floating-point arithmetic", thm. 4)."""
    jnp = _jnp()
    u = 1 + x
    safe = jnp.where(u == 1, 2.0, u).astype(x.dtype)
    return jnp.where(u == 1, x, jnp.log(safe) * x / (safe - 1))


def _expm1_kahan(e: Any, x: Any) -> Any:
    """expm1 accurate to a few ULP from exp and log (Kahan): (u - 1) * x / log(u)."""
    jnp = _jnp()
    u = jnp.exp(x)
    safe = jnp.where((u == 1) | (u - 1 == -1) | jnp.isinf(u), 2.0, u).astype(x.dtype)
    out = jnp.where(u == 1, x, jnp.where(u - 1 == -1, -1.0, (safe - 1) * x / jnp.log(safe)))
    return jnp.where(jnp.isinf(u), u, out)


def _nan_first(prim: str) -> Callable[[Any, list[Any]], list[Any]]:
    """An ordering op whose NaN keys rank first, as JAX declares, made explicit: NaN keys ranked as +inf for
    argmax and top_k (-inf for argmin), the values read back from the input by the indices found."""

    def instead(op: Any, ins: list[Any]) -> list[Any]:
        import jax.numpy as jnp

        from ..mechanism.captured import bound

        x = ins[0]
        if not jnp.issubdtype(x.dtype, jnp.floating):
            return bound(op, ins)
        if prim in ("argmax", "argmin"):
            # the first NaN's index where a row holds one (a +inf before it does not win), else the plain op:
            # exactly what JAX declares, from a comparison every runtime computes alike
            axis = op.eqn.params["axes"][0]
            nan = jnp.isnan(x)
            first_nan = jnp.argmax(nan, axis=axis).astype(op.eqn.params["index_dtype"])
            plain = bound(op, [jnp.where(nan, 0, x), *ins[1:]])[0]
            return [jnp.where(nan.any(axis=axis), first_nan, plain)]
        keys = jnp.where(jnp.isnan(x), jnp.asarray(jnp.inf, x.dtype), x)
        outs = bound(op, [keys, *ins[1:]])
        return [jnp.take_along_axis(x, outs[1], axis=-1), outs[1]]

    return instead


def _integer_pow(e: Any, x: Any) -> Any:
    y = int(e.params["y"])
    out = None
    base = x if y >= 0 else 1 / x
    for _ in range(abs(y)):
        out = base if out is None else out * base
    return _jnp().ones_like(x) if out is None else out


# Other formulations of one primitive's math, as data: (name, the change at the user's line, rewrite).
FORMULATIONS: dict[str, tuple[tuple[str, str, Callable[..., Any], Special | None], ...]] = {
    "logistic": (
        _f("the logistic from exp(-|x|)", "jax.nn.sigmoid(x) -> z = jnp.exp(-jnp.abs(x)); "
           "jnp.where(x >= 0, 1 / (1 + z), z / (1 + z))", _stable_logistic),
    ),
    "tanh": (
        _f("tanh from the logistic", "jnp.tanh(x) -> 2 * jax.nn.sigmoid(2 * x) - 1",
           lambda e, x: 2 * _lax().logistic(2 * x) - 1),
    ),
    "log1p": (_f("log1p from log alone (Goldberg)", "jnp.log1p(x) -> u = 1 + x; jnp.where(u == 1, x, "
                 "jnp.log(u) * x / (u - 1))", _log1p_goldberg),),
    "expm1": (_f("expm1 from exp and log (Kahan)", "jnp.expm1(x) -> u = jnp.exp(x); jnp.where(u == 1, x, "
                 "jnp.where(u - 1 == -1, -1.0, (u - 1) * x / jnp.log(u)))", _expm1_kahan),),
    "round": (_f("round from floor", "jnp.round(x) -> floor-based rounding: f = jnp.floor(x); d = x - f; "
                 "jnp.where((d > 0.5) | ((d == 0.5) & (f % 2 != 0)), f + 1, f)", _round),),
    "max": (
        _f("max with NaN said", "jnp.maximum(a, b) -> jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.nan, "
           "jnp.maximum(a, b))", _nan_max, _NAN),
        _f("max as a select", "jnp.maximum(a, b) -> jnp.where(a > b, a, b)", _select_max, _NAN_OR_ZEROS),
    ),
    "min": (
        _f("min with NaN said", "jnp.minimum(a, b) -> jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.nan, "
           "jnp.minimum(a, b))", _nan_min, _NAN),
        _f("min as a select", "jnp.minimum(a, b) -> jnp.where(a < b, a, b)", _select_min, _NAN_OR_ZEROS),
    ),
    "reduce_max": (_f("the max with NaN said", "jnp.max(x, axis) -> jnp.where(jnp.isnan(x).any(axis), jnp.nan, "
                      "jnp.max(x, axis))", _reduce_nan("max"), _NAN),),
    "reduce_min": (_f("the min with NaN said", "jnp.min(x, axis) -> jnp.where(jnp.isnan(x).any(axis), jnp.nan, "
                      "jnp.min(x, axis))", _reduce_nan("min"), _NAN),),
    "clamp": (_f("the clip as min(max(x, lo), hi)", "jnp.clip(x, lo, hi) -> jnp.minimum(jnp.maximum(x, lo), hi)",
                 _clamp_ordered, ("a NaN, a zero or a lower bound above the upper", _nan_or_inverted)),),
    "rem": (_f("the remainder as fmod", "x % y -> jnp.fmod(x, y)", _float_rem),),
    "integer_pow": (_f("the power as products", "x ** n -> x * x * ... (n factors)", _integer_pow),),
    "pow": (_f("the power through exp and log", "x ** y -> jnp.exp(y * jnp.log(x))",
               lambda e, x, y: _jnp().exp(y * _jnp().log(x))),),
}

_NARROW = ("bfloat16", "float16")
# Ops that accumulate (a sum of many roundings): computed wider, they round once.
_ACCUMULATING = {"reduce_sum", "cumsum", "dot_general", "conv_general_dilated", "reduce_window_sum", "reduce_prod",
                 "cumprod", "add", "sub", "mul", "div", "exp", "log", "tanh", "logistic", "erf", "sqrt", "rsqrt", "pow",
                 "integer_pow", "reduce_precision"}
_INDEXING = {"gather", "dynamic_slice", "dynamic_update_slice", "scatter", "scatter-add", "scatter_add", "scatter-mul",
             "scatter_mul", "scatter-min", "scatter_min", "scatter-max", "scatter_max"}


def _widened(op: Any, ins: list[Any]) -> list[Any]:
    """The op on its narrow float inputs cast to float32, its outputs cast back: one rounding, at the end."""
    import jax.numpy as jnp

    wide = [x.astype(jnp.float32) if str(x.dtype) in _NARROW else x for x in ins]
    params = dict(op.eqn.params)
    if "preferred_element_type" in params and params["preferred_element_type"] is not None \
            and str(params["preferred_element_type"]) in _NARROW:
        params["preferred_element_type"] = jnp.float32
    outs = op.eqn.primitive.bind(*wide, **params)
    outs = list(outs) if op.eqn.primitive.multiple_results else [outs]
    avals = [v.aval for v in op.eqn.outvars]
    return [o.astype(a.dtype) for o, a in zip(outs, avals)]


def _clip_mode(op: Any, ins: list[Any]) -> list[Any]:
    """A gather or scatter whose indices are clamped into range (``mode='clip'``): what XLA does for a
    gather anyway, said explicitly so that no runtime reads or writes out of bounds."""
    from jax.lax import GatherScatterMode

    params = dict(op.eqn.params)
    params["mode"] = GatherScatterMode.CLIP
    outs = op.eqn.primitive.bind(*ins, **params)
    return list(outs) if op.eqn.primitive.multiple_results else [outs]


def _clipped_starts(op: Any, ins: list[Any]) -> list[Any]:
    """dynamic_slice / dynamic_update_slice with each start index clipped into [0, dim - size], as XLA
    clamps them: no runtime then reads or writes past the array's end."""
    import jax.numpy as jnp

    from ..mechanism.captured import bound

    name = op.eqn.primitive.name
    operand = ins[0]
    if name == "dynamic_slice":
        sizes = op.eqn.params["slice_sizes"]
        starts = ins[1:]
    else:
        sizes = ins[1].shape
        starts = ins[2:]
    clipped = [jnp.clip(s, 0, max(d - n, 0)).astype(s.dtype) for s, d, n in zip(starts, operand.shape, sizes)]
    fixed = ins[: len(ins) - len(starts)] + clipped
    return bound(op, fixed)


def _finite_inputs(op: Any, ins: list[Any]) -> list[Any]:
    """The op on its float inputs with NaN and ±inf replaced (0 and the dtype's largest values): what
    ``jnp.nan_to_num`` gives; a guard, where the trigger is a non-finite input."""
    import jax.numpy as jnp

    from ..mechanism.captured import bound

    fixed = [jnp.nan_to_num(x) if jnp.issubdtype(x.dtype, jnp.floating) else x for x in ins]
    return bound(op, fixed)


def _cast_in_range(op: Any, ins: list[Any]) -> list[Any]:
    """A float-to-integer cast of a value clipped into the integer type's range, NaN as 0: the cast is then
    defined on every input, and every runtime gives one answer."""
    import jax.numpy as jnp

    target = op.eqn.params["new_dtype"]
    info = jnp.iinfo(target)
    x = ins[0]
    # the largest float below the integer maximum (float32 rounds 2**31 - 1 up to 2**31)
    hi = np.nextafter(np.asarray(float(info.max) + 1.0, dtype=np.dtype(x.dtype)), -np.inf) \
        if np.dtype(x.dtype).kind == "f" else float(info.max)
    return [jnp.clip(jnp.nan_to_num(x, nan=0.0), float(info.min), hi).astype(target)]


def candidates(op: Any, trigger: str | None) -> Iterator[Candidate]:
    """The candidate changes for ``op`` (an ``Op`` of the flat program), formulations first, then the op
    computed wider, then guards built from its trigger (the predicate's words, or None)."""
    name = op.eqn.primitive.name
    for fname, code, f, only_on in FORMULATIONS.get(name, ()):
        yield Candidate(fname, code, "formulation", _one(f), only_on)
    if name in ("top_k", "argmax", "argmin"):
        yield Candidate(f"{name} with NaN keys ranked first explicitly", "rank NaN keys first yourself: "
                        + (f"jnp.where(jnp.isnan(x).any(axis), jnp.argmax(jnp.isnan(x), axis), "
                           f"{name}(jnp.where(jnp.isnan(x), 0, x), axis))" if name != "top_k" else
                           "top_k(jnp.where(jnp.isnan(x), jnp.inf, x)), values read back with "
                           "jnp.take_along_axis(x, indices, -1) (a NaN then ties with +inf)"),
                        "formulation", _nan_first(name), _NAN)
    in_dtypes = [str(getattr(v.aval, "dtype", "")) for v in op.eqn.invars if hasattr(v, "aval")]
    if name in _ACCUMULATING and any(d in _NARROW for d in in_dtypes):
        narrow = next(d for d in in_dtypes if d in _NARROW)
        yield Candidate(f"the {name} computed in float32", f"cast its {narrow} inputs to float32 before the "
                        f"{name}, and the result back to {narrow}: x.astype(jnp.float32) ... .astype(jnp.{narrow})",
                        "wider", _widened)
    if name == "gather" or name.startswith("scatter"):
        yield Candidate("the indices clipped into range", "jnp.take(x, i, mode='clip') / x.at[i].get(mode='clip') "
                        "(or jnp.clip the indices into [0, size - 1])", "guard", _clip_mode)
    if name in ("dynamic_slice", "dynamic_update_slice"):
        yield Candidate("the start indices clipped into range", "clip each start index into [0, dim - size] "
                        "before lax.dynamic_slice / dynamic_update_slice: jnp.clip(start, 0, dim - size)", "guard",
                        _clipped_starts)
    said = trigger or ""
    if name == "convert_element_type" and op.eqn.params.get("new_dtype") is not None \
            and np.dtype(op.eqn.params["new_dtype"]).kind in "iu" and any(
                d.startswith(("float", "bfloat")) for d in in_dtypes):
        yield Candidate("the cast kept in the integer range", "x.astype(int_t) -> jnp.clip(jnp.nan_to_num(x), "
                        "int_min, int_max).astype(int_t)", "guard", _cast_in_range)
    if any(w in said for w in ("NaN", "inf", "not finite")) and any(d.startswith(("float", "bfloat")) for d in in_dtypes):
        yield Candidate("non-finite inputs replaced", "jnp.nan_to_num(x) on its inputs (NaN -> 0, ±inf -> the "
                        "largest finite values)", "guard", _finite_inputs)
