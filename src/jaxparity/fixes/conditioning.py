"""A model-side fix for ill-conditioned forms: the program re-emitted with each recognised form computed
in a well-conditioned one that is equal to it in exact arithmetic.

Recognised forms (matched on the jaxpr, at any depth: inside ``jit``, ``scan``, ``while``, ``cond``):

* **one-pass variance** ``mean(x²) − mean(x)²`` (flax's ``LayerNorm``/``BatchNorm``/``GroupNorm`` with
  ``use_fast_variance=True``, the default in recent flax): the difference of two nearly equal numbers
  when ``|mean(x)|`` is large against ``std(x)``. Each mean carries a relative rounding error of a few
  unit roundoffs ``u``; the difference carries ``u · mean(x²) / var(x)``, so two runtimes that sum in
  different orders (both within the sum's error bound) give variances that differ in their leading
  digits. Computed as ``mean((x − mean(x))²)`` (two passes), using the program's own ``mean(x)``.
* **log-sum-exp without a shift** ``log(Σ exp(x))``: overflows to inf for large ``x`` and loses the small
  terms' digits. Computed as ``m + log(Σ exp(x − m))`` with ``m = max(x)`` (finite maxima only, as
  ``jax.nn.logsumexp`` does).
* **softmax without a shift** ``exp(x) / Σ exp(x)``: inf / inf = NaN once one ``x`` passes 88 (float32).
  Computed as ``exp(x − m) / Σ exp(x − m)``.
* **log of a product** ``log(Π x)``: the product underflows to 0 or overflows to inf long before its log
  does. Computed as ``Σ log|x| + log(Π sign x)``.
* **log(1 + x)** and **exp(x) − 1**: a small ``x``'s digits rounded away in ``1 + x``, or cancelled in the
  subtraction. Computed as ``log1p(x)`` and ``expm1(x)``.
* **centering on the mean** ``x − mean(x)`` of values far from zero (a layer norm of activations offset by
  1e7, ``jnp.var``'s own first pass): the mean's sum carries rounding of the size of ``|x|``, the difference
  is of the size of the spread, so two summation orders (both within the sum's error bound) give centred
  values that differ in their leading digits. Computed on data shifted by one of its own elements,
  ``(x − x₀) − mean(x − x₀)`` (the shifted-data algorithm; ``x₀`` the first element along the averaged axes,
  0 where it is not finite): the sum is then of the small differences, often exactly.

``well_conditioned(fn)`` takes and returns what ``fn`` does and works eagerly and under ``jax.jit``,
``jax.export`` and ``jax2tf`` (it is built on ``rounding.rewritten``); ``rewrites(fn, args)`` lists what
it changes for those arguments. Masked or cross-device means (flax's ``mask=``, ``axis_name=``) are not
recognised and are left as written.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.extend.core as jcore
from jax import lax

from ..jaxcompat import user_frames
from .rounding import _normalize_only, _Rewriter, _selected, _where, rewritten

__all__ = ["REMEDIES", "forms_at", "rewrites", "well_conditioned"]

ONE_PASS_VARIANCE = "one-pass variance"
UNSHIFTED_LOGSUMEXP = "unshifted log-sum-exp"
UNSHIFTED_SOFTMAX = "unshifted softmax"
LOG_OF_PRODUCT = "log of a product"
LOG_ONE_PLUS = "log of 1 + x"
EXP_MINUS_ONE = "exp(x) − 1"
CENTERING = "centering on the mean"


@dataclass(frozen=True)
class _Mean:
    """``scale(reduce_sum(x, axes))``: a mean (or any scaled sum) of ``x`` over ``axes``."""

    x: Any
    axes: tuple[int, ...]
    total: Any  # the reduce_sum's output var
    sum_eqn: Any
    scale_eqn: Any
    expand_eqn: Any = None  # ``keepdims``: the broadcast_in_dim that gives the sum its reduced axes back as size 1


def _producers(jaxpr: Any) -> dict[Any, tuple[int, Any]]:
    return {v: (k, e) for k, e in enumerate(jaxpr.eqns) for v in e.outvars if not isinstance(v, jcore.Literal)}


def _made(v: Any, producers: dict[Any, tuple[int, Any]]) -> Any | None:
    if isinstance(v, jcore.Literal):
        return None
    hit = producers.get(v)
    return hit[1] if hit is not None else None


def _is_scalar(v: Any) -> bool:
    return getattr(v.aval, "shape", None) == ()


def _mean_of(v: Any, producers: dict[Any, tuple[int, Any]]) -> _Mean | None:
    e = _made(v, producers)
    if e is None or e.primitive.name not in ("div", "mul"):
        return None
    for k, total in enumerate(e.invars):
        other = e.invars[1 - k]
        if e.primitive.name == "div" and k == 1:
            break  # n / sum is not a mean
        s = _made(total, producers)
        expand = None
        if s is not None and s.primitive.name == "broadcast_in_dim" and _keeps_dims(s):
            expand, s = s, _made(s.invars[0], producers)
        if s is not None and s.primitive.name == "reduce_sum" and _is_scalar(other):
            return _Mean(s.invars[0], tuple(s.params["axes"]), total, s, e, expand)
    return None


def _keeps_dims(e: Any) -> bool:
    """A broadcast_in_dim that only inserts size-1 axes (``keepdims=True`` after a reduction)."""
    shape, dims = e.outvars[0].aval.shape, tuple(e.params["broadcast_dimensions"])
    operand = e.invars[0].aval.shape
    return (len(shape) > len(operand) and all(shape[d] == n for d, n in zip(dims, operand))
            and all(shape[d] == 1 for d in range(len(shape)) if d not in dims))


def _square_of(v: Any, producers: dict[Any, tuple[int, Any]]) -> Any | None:
    e = _made(v, producers)
    if e is None:
        return None
    name = e.primitive.name
    if name == "square" or (name == "integer_pow" and e.params.get("y") == 2):
        return e.invars[0]
    if name == "mul" and e.invars[0] is e.invars[1] and not isinstance(e.invars[0], jcore.Literal):
        return e.invars[0]
    return None


def _variance(eqn: Any, producers: dict[Any, tuple[int, Any]]) -> Callable[[Callable[[Any], Any]], list[Any]] | None:
    """``sub(mean(x²), mean(x)²)`` → ``mean((x − mean(x))²)`` with the program's own ``mean(x)``."""
    if eqn.primitive.name != "sub":
        return None
    of_squares = _mean_of(eqn.invars[0], producers)
    mean_var = _square_of(eqn.invars[1], producers)
    if of_squares is None or mean_var is None:
        return None
    x = _square_of(of_squares.x, producers)
    mean = _mean_of(mean_var, producers)
    if x is None or mean is None or mean.x is not x or mean.axes != of_squares.axes:
        return None

    def two_pass(read: Callable[[Any], Any]) -> list[Any]:
        xs, m = read(x), read(mean_var)
        kept = (tuple(range(xs.ndim)) if m.ndim == xs.ndim  # keepdims: the reduced axes are there, of size 1
                else tuple(d for d in range(xs.ndim) if d not in of_squares.axes))
        d = lax.sub(xs, lax.broadcast_in_dim(m, xs.shape, kept))
        total = of_squares.sum_eqn.primitive.bind(lax.mul(d, d), **of_squares.sum_eqn.params)
        if of_squares.expand_eqn is not None:
            total = of_squares.expand_eqn.primitive.bind(total, **of_squares.expand_eqn.params)
        scale = of_squares.scale_eqn
        ins = [total if v is of_squares.total else read(v) for v in scale.invars]
        return [scale.primitive.bind(*ins, **scale.params)]

    return two_pass


def _shifted_exp(xs: Any, axes: tuple[int, ...]) -> tuple[Any, Any, tuple[int, ...]]:
    """(exp(x − m), m, the axes kept), ``m`` the finite maximum of ``xs`` over ``axes`` (0 where it is not finite,
    as ``jax.nn.logsumexp`` does; no gradient flows through it)."""
    m = lax.reduce_max(xs, axes)
    m = lax.stop_gradient(lax.select(lax.is_finite(m), m, lax.full_like(m, 0)))
    kept = tuple(d for d in range(xs.ndim) if d not in axes)
    return lax.exp(lax.sub(xs, lax.broadcast_in_dim(m, xs.shape, kept))), m, kept


def _logsumexp(eqn: Any, producers: dict[Any, tuple[int, Any]]) -> Callable[[Callable[[Any], Any]], list[Any]] | None:
    """``log(reduce_sum(exp(x)))`` → ``m + log(reduce_sum(exp(x − m)))``, ``m`` the finite maximum."""
    if eqn.primitive.name != "log":
        return None
    s = _made(eqn.invars[0], producers)
    if s is None or s.primitive.name != "reduce_sum":
        return None
    e = _made(s.invars[0], producers)
    if e is None or e.primitive.name != "exp":
        return None
    x, axes = e.invars[0], tuple(s.params["axes"])

    def shifted(read: Callable[[Any], Any]) -> list[Any]:
        ex, m, _ = _shifted_exp(read(x), axes)
        return [lax.add(lax.log(s.primitive.bind(ex, **s.params)), m)]

    return shifted


def _literal(v: Any, value: float) -> bool:
    return isinstance(v, jcore.Literal) and float(v.val) == value


def _through_broadcast(v: Any, producers: dict[Any, tuple[int, Any]]) -> Any:
    """``v``, or what a broadcast_in_dim (keepdims, or to the full shape) made it from."""
    e = _made(v, producers)
    return e.invars[0] if e is not None and e.primitive.name == "broadcast_in_dim" else v


def _softmax(eqn: Any, producers: dict[Any, tuple[int, Any]]) -> Callable[[Callable[[Any], Any]], list[Any]] | None:
    """``exp(x) / sum(exp(x))`` → ``exp(x − m) / sum(exp(x − m))``, ``m`` the finite maximum over the summed axes:
    the same values where nothing overflows, none of exp's inf / inf = NaN where something does."""
    if eqn.primitive.name != "div":
        return None
    e = _made(eqn.invars[0], producers)
    s = _made(_through_broadcast(eqn.invars[1], producers), producers)
    if e is None or e.primitive.name != "exp" or s is None or s.primitive.name != "reduce_sum" or s.invars[0] is not \
            e.outvars[0]:
        return None
    x, axes = e.invars[0], tuple(s.params["axes"])
    shape = eqn.outvars[0].aval.shape

    def shifted(read: Callable[[Any], Any]) -> list[Any]:
        ex, _, kept = _shifted_exp(read(x), axes)
        total = s.primitive.bind(ex, **s.params)
        return [lax.div(lax.broadcast_in_dim(ex, shape, tuple(range(len(shape)))) if ex.shape != shape else ex,
                        lax.broadcast_in_dim(total, shape, kept))]

    return shifted


def _log_of_product(eqn: Any, producers: dict[Any, tuple[int, Any]]) -> Callable[[Callable[[Any], Any]], list[Any]] | None:
    """``log(prod(x))`` → ``sum(log|x|) + log(prod(sign x))``: no underflow to 0 (−inf) or overflow to inf of the
    product of many factors; a zero factor still gives −inf, a negative product NaN."""
    if eqn.primitive.name != "log":
        return None
    p = _made(eqn.invars[0], producers)
    if p is None or p.primitive.name != "reduce_prod":
        return None
    x = p.invars[0]

    def in_logs(read: Callable[[Any], Any]) -> list[Any]:
        import jax.numpy as jnp

        xs, axes = read(x), tuple(p.params["axes"])
        return [lax.add(jnp.sum(lax.log(lax.abs(xs)), axis=axes), lax.log(jnp.prod(lax.sign(xs), axis=axes)))]

    return in_logs


def _log_one_plus(eqn: Any, producers: dict[Any, tuple[int, Any]]) -> Callable[[Callable[[Any], Any]], list[Any]] | None:
    """``log(1 + x)`` → ``log1p(x)``: the digits of a small x are kept, not rounded away in 1 + x."""
    if eqn.primitive.name != "log":
        return None
    a = _made(eqn.invars[0], producers)
    if a is None or a.primitive.name != "add":
        return None
    x = a.invars[1] if _literal(a.invars[0], 1.0) else a.invars[0] if _literal(a.invars[1], 1.0) else None
    if x is None:
        return None
    return lambda read: [lax.log1p(read(x))]


def _exp_minus_one(eqn: Any, producers: dict[Any, tuple[int, Any]]) -> Callable[[Callable[[Any], Any]], list[Any]] | None:
    """``exp(x) − 1`` → ``expm1(x)``: no cancellation for small x."""
    if eqn.primitive.name != "sub" or not _literal(eqn.invars[1], 1.0):
        return None
    e = _made(eqn.invars[0], producers)
    if e is None or e.primitive.name != "exp":
        return None
    return lambda read: [lax.expm1(read(e.invars[0]))]


def _centering(eqn: Any, producers: dict[Any, tuple[int, Any]]) -> Callable[[Callable[[Any], Any]], list[Any]] | None:
    """``x − mean(x)`` → ``(x − x₀) − mean(x − x₀)``, ``x₀`` the first element of ``x`` along the averaged axes
    (0 where it is not finite): equal in exact arithmetic, and its sum is of the spread, not of the offset."""
    if eqn.primitive.name != "sub" or isinstance(eqn.invars[0], jcore.Literal):
        return None
    mean = _mean_of(eqn.invars[1], producers)
    if mean is None or mean.x is not eqn.invars[0] or mean.scale_eqn.primitive.name != "div":
        return None
    x = eqn.invars[0]
    if not jax.numpy.issubdtype(x.aval.dtype, jax.numpy.floating):
        return None

    def shifted(read: Callable[[Any], Any]) -> list[Any]:
        xs = read(x)
        first = lax.slice(xs, (0,) * xs.ndim, tuple(1 if d in mean.axes else n for d, n in enumerate(xs.shape)))
        first = lax.select(lax.is_finite(first), first, lax.full_like(first, 0))
        d = lax.sub(xs, lax.broadcast_in_dim(first, xs.shape, tuple(range(xs.ndim))))
        total = mean.sum_eqn.primitive.bind(d, **mean.sum_eqn.params)
        if mean.expand_eqn is not None:
            total = mean.expand_eqn.primitive.bind(total, **mean.expand_eqn.params)
        ins = [total if v is mean.total else read(v) for v in mean.scale_eqn.invars]
        m = mean.scale_eqn.primitive.bind(*ins, **mean.scale_eqn.params)
        return [eqn.primitive.bind(d, m, **eqn.params)]

    return shifted


_FORMS = ((ONE_PASS_VARIANCE, _variance), (UNSHIFTED_LOGSUMEXP, _logsumexp), (UNSHIFTED_SOFTMAX, _softmax),
          (LOG_OF_PRODUCT, _log_of_product), (LOG_ONE_PLUS, _log_one_plus), (EXP_MINUS_ONE, _exp_minus_one),
          (CENTERING, _centering))
# Each form's well-conditioned form, as the change at the user's line.
REMEDIES = {
    ONE_PASS_VARIANCE: "compute the variance in two passes, mean((x − mean(x))²) (flax: use_fast_variance=False)",
    UNSHIFTED_LOGSUMEXP: "jax.nn.logsumexp(x) (shifted by the maximum) instead of jnp.log(jnp.sum(jnp.exp(x)))",
    UNSHIFTED_SOFTMAX: "jax.nn.softmax(x) (shifted by the maximum) instead of jnp.exp(x) / jnp.sum(jnp.exp(x))",
    LOG_OF_PRODUCT: "jnp.sum(jnp.log(x)) (a sum of logarithms) instead of jnp.log(jnp.prod(x))",
    LOG_ONE_PLUS: "jnp.log1p(x) instead of jnp.log(1 + x)",
    EXP_MINUS_ONE: "jnp.expm1(x) instead of jnp.exp(x) - 1",
    CENTERING: "center on a sample first, (x − x₀) − mean(x − x₀) with x₀ one element of x, instead of x − mean(x)",
}


def _subjaxprs(eqn: Any) -> list[Any]:
    found = []
    for value in eqn.params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, jcore.ClosedJaxpr):
                found.append(v.jaxpr)
            elif isinstance(v, jcore.Jaxpr):
                found.append(v)
    return found


class _Conditioner(_Rewriter):
    """Evaluates jaxprs with the recognised forms computed in their well-conditioned forms."""

    def __init__(self, at: frozenset[str] | None, forms: frozenset[str] | None) -> None:
        super().__init__(frozenset())  # inserts no roundings
        self.at, self.forms = at, forms
        self._plans: dict[Any, dict[int, Any]] = {}
        # sub-jaxprs of a selected call (jnp.var's): their equations without a frame of their own (a cached trace)
        # are at the call's line
        self._inside: set[int] = set()

    def matches(self, jaxpr: Any) -> list[tuple[int, str, Any]]:
        producers = _producers(jaxpr)
        found = []
        inherit = id(jaxpr) in self._inside
        for k, eqn in enumerate(jaxpr.eqns):
            chosen = _selected(eqn, self.at) or (inherit and not user_frames(eqn.source_info))
            if chosen:
                self._inside.update(id(sub) for sub in _subjaxprs(eqn))
            if not chosen:
                continue
            for form, match in _FORMS:
                if self.forms is not None and form not in self.forms:
                    continue
                plan = match(eqn, producers)
                if plan is not None:
                    found.append((k, form, plan))
                    break
        return found

    def plan(self, jaxpr: Any) -> dict[int, Any]:
        hit = self._plans.get(jaxpr)
        if hit is None:
            hit = self._plans[jaxpr] = {k: plan for k, _, plan in self.matches(jaxpr)}
        return hit

    def listing(self, jaxpr: Any, outer: str | None = None) -> list[str]:
        """``outer``: where the call holding ``jaxpr`` is (a site inside a cached jnp.var has no frame of its own)."""
        def where(eqn: Any) -> str:
            w = _where(eqn)
            return outer if w == "<unknown>" and outer else w

        lines = [f"{form} at {where(jaxpr.eqns[k])}" for k, form, _ in self.matches(jaxpr)]
        for eqn in jaxpr.eqns:
            for sub in _subjaxprs(eqn):
                lines += self.listing(sub, where(eqn))
        return lines


def well_conditioned(fn: Callable, *, at: Collection[str] | None = None,
                     forms: Collection[str] | None = None) -> Callable:
    """``fn`` with every recognised ill-conditioned form (see the module docstring) computed in its
    well-conditioned form. ``at`` restricts it to source locations (``"model.py:21"``, matched against
    every user frame of the op's traceback, as ``round_like_declared``'s ``only``); ``forms`` to some of
    the names above (``REMEDIES`` holds them, with each one's change). Where nothing is recognised the
    result computes what ``fn`` computes."""
    conditioner = _Conditioner(_normalize_only(at), frozenset(forms) if forms is not None else None)
    fixed = rewritten(fn, conditioner)
    fixed.well_conditioned_at = conditioner.at  # type: ignore[attr-defined]
    return fixed


def forms_at(fn: Callable, args: Sequence[Any], at: Collection[str] | None = None) -> list[str]:
    """The recognised forms ``well_conditioned(fn, at=at)`` rewrites for these ``args``, by name, each once."""
    found = [line.split(" at ", 1)[0] for line in rewrites(fn, args, at=at)]
    return list(dict.fromkeys(found))


def rewrites(fn: Callable, args: Sequence[Any], *, at: Collection[str] | None = None,
             forms: Collection[str] | None = None) -> list[str]:
    """What ``well_conditioned(fn, at=at)`` rewrites for these ``args``, one line each:
    ``'one-pass variance at normalization.py:104 (from model.py:9)'``."""
    closed = jax.make_jaxpr(fn)(*args)
    return _Conditioner(_normalize_only(at), frozenset(forms) if forms is not None else None).listing(closed.jaxpr)
