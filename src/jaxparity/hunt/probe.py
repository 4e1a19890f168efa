"""What the hunt computes beside the model, in the worker that holds the case: the model's hazard sites
(ops of ``hazards.HAZARDS`` whose inputs depend on the varied data), how near each candidate input
brings each site to its hazard, and Newton steps on the model's own inputs that drive one site there.

The functions here are the worker's tasks (``IsolatedRunner.task``): each takes the loaded case first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..rounding import is_float_dtype
from .hazards import Hazard, hazards_of

__all__ = ["Site", "plan", "reach", "target"]

MAX_SITES = 24  # per hazard kind, spread over the program: a sample of a large model's many adds


@dataclass(frozen=True)
class Site:
    """One op at one of its hazards."""

    id: int
    op: int  # its index in the case's flat program (in the scan's body, where ``loop`` is set)
    primitive: str
    hazard: str
    what: str
    where: str  # the user's line, or where the primitive was made
    module: str  # its Flax module path ("" outside modules)
    targets: tuple[tuple[float, float], ...]
    loop: int | None = None  # the scan (its index in the case's program) whose body holds the op

    def describe(self) -> str:
        inside = f"scan #{self.loop}: " if self.loop is not None else ""
        return f"{inside}#{self.op} {self.primitive} ({self.where})"


@dataclass(frozen=True)
class Plan:
    sites: tuple[Site, ...]
    considered: dict[str, int]  # hazard kind -> ops of that kind depending on the data (before sampling)
    in_loops: int  # while loops and conditionals that read the data: the ops inside are reached, not aimed at
    notes: tuple[str, ...] = ()
    narrowest: str | None = None  # the narrowest float dtype the program computes in


class _Model:
    """The case's program, its sites and the jitted measures, made once per worker and varied set."""

    def __init__(self, case: Any, varied: Sequence[str]) -> None:
        import jax

        from ..execution.samples import InputSlots
        from ..localize.program import flatten, is_numeric
        from ..pytree import argument_leaves

        self.case = case
        self.slots = InputSlots(case.args)
        names = [n for n, _ in argument_leaves(case.args)]
        self.positions = {n: i for i, n in enumerate(names) if n in set(varied)}
        self.program = program = flatten(case.fn, case.args)
        dependent = {program.arg_ids[i] for i in self.positions.values()}
        found: list[tuple[Any, Hazard, int | None]] = []  # (op, hazard, the scan whose body holds it)
        considered: dict[str, int] = {}
        in_loops = 0
        for op in program.ops:
            reads = [not hasattr(r, "val") and r in dependent for r in op.inputs]
            if any(reads):
                dependent.update(v for v in op.outputs if v is not None)
                if op.info.primitive == "scan":  # its body's ops are aimed at, each iteration's values stacked
                    found += [(inner, hazard, op.info.index) for inner, hazard in _in_body(op)]
                elif op.info.primitive in ("while", "cond"):
                    in_loops += 1
            for hazard in hazards_of(op.eqn):
                if reads[hazard.operand] or (hazard.name in ("tie", "cancellation") and any(reads)):
                    found.append((op, hazard, None))
        for _, hazard, _ in found:
            considered[hazard.name] = considered.get(hazard.name, 0) + 1
        chosen: list[tuple[Any, Hazard, int | None]] = []
        for kind in considered:
            mine = [f for f in found if f[1].name == kind]
            if len(mine) > MAX_SITES:  # spread over the program, the first and the last kept
                mine = [mine[round(i * (len(mine) - 1) / (MAX_SITES - 1))] for i in range(MAX_SITES)]
            chosen += mine
        chosen.sort(key=lambda f: (f[0].info.index if f[2] is None else f[2], f[0].info.index))
        self.hazards: list[tuple[Any, Hazard, int | None]] = []
        sites: list[Site] = []
        for op, hazard, loop in chosen:
            dtype = np.dtype(op.eqn.invars[hazard.operand].aval.dtype)
            info = op.info
            sites.append(Site(len(sites), info.index, info.primitive, hazard.name, hazard.what,
                              info.user_source or info.source or "unknown line", info.name_stack,
                              tuple((float(t), float(w)) for t, w in hazard.targets(dtype)), loop))
            self.hazards.append((op, hazard, loop))
        self.sites = tuple(sites)
        floats = {np.dtype(a.dtype) for a in program.avals.values() if is_numeric(a) and
                  is_float_dtype(np.dtype(a.dtype))}
        self.narrowest = str(min(floats, key=lambda t: t.itemsize)) if floats else None
        self.considered = considered
        self.in_loops = in_loops
        self._measures = jax.jit(self._all_measures)
        self._steps: dict[int, Any] = {}

    def flat(self, arrays: dict[str, np.ndarray]) -> list[Any]:
        import jax

        return jax.tree_util.tree_leaves(self.slots.fill(arrays, "candidate"))

    def _site_measures(self, flat: Sequence[Any], which: Sequence[int]) -> list[Any]:
        """The measures of sites ``which`` on the program's inputs ``flat``; a site in a scan's body has one
        measure per iteration, stacked first."""
        from ..localize.program import bind_op

        in_scans: dict[int, list[int]] = {}
        for k in which:
            if (loop := self.hazards[k][2]) is not None:
                in_scans.setdefault(loop, []).append(k)
        inner: dict[int, Any] = {}

        def apply(op: Any, ins: list[Any]) -> Any:
            ks = in_scans.get(op.info.index)
            if not ks:
                return bind_op(op, ins)
            outs, measures = _scan_measuring(op, ins, [self.hazards[k] for k in ks])
            inner.update(zip(ks, measures))
            return outs

        values = self.program.evaluate(flat, apply)
        return [inner[k] if k in inner else _measure(*self.hazards[k][:2], values) for k in which]

    def _all_measures(self, flat: Sequence[Any]) -> list[Any]:
        return self._site_measures(flat, range(len(self.hazards)))

    def distances(self, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        """How near the candidate brings each site to its hazard: the smallest |measure - target| / width
        over its elements and targets (<= 1: at the hazard), and each site's measure."""
        measures = [np.asarray(m, np.float64) for m in self._measures(self.flat(arrays))]
        near = np.array([_nearest(m, site.targets)[0] for m, site in zip(measures, self.sites)])
        return near, measures

    def step_fn(self, k: int) -> Any:
        """value_and_grad of site ``k``'s measure at one element, over the varied float leaves."""
        if k not in self._steps:
            import jax
            import jax.numpy as jnp

            def scalar(variables: dict[str, Any], flat: list[Any], element: Any, goal: Any) -> Any:
                flat = list(flat)
                for name, value in variables.items():
                    i = self.positions[name]
                    flat[i] = value.astype(flat[i].dtype)
                (m,) = self._site_measures(flat, [k])
                return jnp.ravel(m)[element] - goal

            self._steps[k] = jax.jit(jax.value_and_grad(scalar))
        return self._steps[k]


def _measure(op: Any, hazard: Hazard, values: dict) -> Any:
    ins = [r.val if hasattr(r, "val") else values[r] for r in op.inputs]
    return hazard.measure(ins, op.eqn.params, op.info.primitive)


def _in_body(op: Any) -> list[tuple[Any, Hazard]]:
    """The ops of a scan's body (one level) at one of their hazards: every one, since what enters the body
    (its carry, the slices it scans) may depend on the data from the second iteration on."""
    from ..localize.loops.structure import body_of

    try:
        body = body_of(op)
    except Exception:  # noqa: BLE001 - a body that cannot be opened is reached by the search, not aimed at
        return []
    return [(inner, hazard) for inner in body.program.ops for hazard in hazards_of(inner.eqn)]


def _scan_measuring(op: Any, ins: list[Any], sites: Sequence[tuple[Any, Hazard, int | None]]
                    ) -> tuple[list[Any], list[Any]]:
    """The scan ``op`` run by ``lax.scan`` on its body's ops, each iteration also measuring ``sites``: its
    outputs, and each site's measures stacked by iteration (in the order the iterations ran)."""
    from jax import lax

    from ..localize.loops.structure import body_of
    from ..localize.program import bind_op

    body = body_of(op)
    consts, init, xs = body.split(ins)
    prog, n = body.program, body.n_carry

    def step(carry: Any, x: Any) -> Any:
        values = prog.evaluate(list(consts) + list(carry) + list(x), bind_op)
        outs = prog.outputs(values)
        return list(outs[:n]), (list(outs[n:]), [_measure(inner, hazard, values) for inner, hazard, _ in sites])

    carry, (ys, measures) = lax.scan(step, list(init), list(xs), length=body.trips,
                                     reverse=bool(body.params["reverse"]), unroll=body.params.get("unroll", 1))
    return list(carry) + list(ys), measures


def _nearest(measure: np.ndarray, targets: Sequence[tuple[float, float]]) -> tuple[float, int, int]:
    """(the smallest |m - t| / w, the element where it is, the target) over every element and target."""
    m = measure.reshape(-1)
    if not m.size:
        return np.inf, 0, 0
    best = (np.inf, 0, 0)
    for j, (t, w) in enumerate(targets):
        d = np.abs(m - t) / w
        d = np.where(np.isnan(d), np.inf, d)
        e = int(np.argmin(d))
        if d[e] < best[0]:
            best = (float(d[e]), e, j)
    return best


_MODELS: dict[tuple, _Model] = {}


def _model(case: Any, varied: Sequence[str]) -> _Model:
    key = (id(case), tuple(varied))
    if key not in _MODELS:
        _MODELS.clear()  # one case per worker
        _MODELS[key] = _Model(case, varied)
    return _MODELS[key]


# -- the worker's tasks --------------------------------------------------------------------------

def plan(case: Any, varied: Sequence[str]) -> Plan:
    """The case's hazard sites over the varied leaves."""
    model = _model(case, varied)
    notes: tuple[str, ...] = ()
    if model.in_loops:
        notes = (f"{model.in_loops} while loop{'s' if model.in_loops > 1 else ''} or cond{'s' if model.in_loops > 1 else ''} "
                 "read the varied inputs: the ops inside them are reached by the search, not aimed at (a scan's are)",)
    return Plan(model.sites, model.considered, model.in_loops, notes, model.narrowest)


def reach(case: Any, varied: Sequence[str], candidates: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
    """(candidates, sites): how near each candidate brings each site to its hazard (<= 1: at it; inf where
    the measure could not be computed)."""
    model = _model(case, varied)
    out = np.full((len(candidates), len(model.sites)), np.inf)
    for i, arrays in enumerate(candidates):
        try:
            out[i] = model.distances(arrays)[0]
        except Exception:  # noqa: BLE001 - a candidate the model cannot take: it reaches nothing
            pass
    return out


def target(case: Any, varied: Sequence[str], domain: Any,
           requests: Sequence[tuple[dict[str, np.ndarray], int, int, int]], steps: int = 6, elements: int = 4
           ) -> list[tuple[dict[str, np.ndarray], bool, tuple[tuple[str, int], ...]]]:
    """Each request (candidate, its center in ``domain``, site, target) moved by Newton steps on the varied
    float leaves until the site's nearest element is at the target (within a quarter of its width), then
    its next nearest, up to ``elements`` of them (where each depends on inputs of its own, as in an
    elementwise op or a row's argmax, they all end at the hazard: as many chances for the two paths to
    part), projected into the domain after each step. Returns per request (candidate, at the hazard, the
    levers: for each element aimed at, the input element (leaf, flat index) it moves with most, where a
    few ULPs cross a threshold)."""
    model = _model(case, varied)
    floats = [leaf.name for leaf in domain.leaves if not leaf.integer and leaf.name in model.positions]
    out = []
    for arrays, center, k, j in requests:
        arrays = dict(arrays)
        levers: list[tuple[str, int]] = []
        at = False
        try:
            goal, width = model.sites[k].targets[j]
            _, measures = model.distances(arrays)
            d = np.abs(measures[k].reshape(-1) - goal)
            order = [int(e) for e in np.argsort(np.where(np.isnan(d), np.inf, d), kind="stable")[:elements]]
            for n, element in enumerate(order):
                moved, reached, lever = _newton(model, k, element, goal, width, arrays, floats, domain, center, steps)
                if n > 0 and (not reached or lever is None or lever in levers):
                    break  # not one of its own: the elements already aimed at stay where they were
                arrays, at = moved, at or reached
                if lever is not None:
                    levers.append(lever)
        except Exception:  # noqa: BLE001 - a site the model's inputs cannot reach by steps: no candidate
            pass
        out.append((arrays, at, tuple(levers)))
    return out


def _newton(model: _Model, k: int, element: int, goal: float, width: float, arrays: dict[str, np.ndarray],
            floats: Sequence[str], domain: Any, center: int, steps: int
            ) -> tuple[dict[str, np.ndarray], bool, tuple[str, int] | None]:
    """Newton steps driving element ``element`` of site ``k``'s measure to ``goal``: (the inputs, whether it
    got within a quarter of ``width``, its lever: the input element it moves with most)."""
    import jax.numpy as jnp

    step = model.step_fn(k)
    lever = None
    for _ in range(steps):
        variables = {n: jnp.asarray(np.asarray(arrays[n], np.float32)) for n in floats}
        gap, grad = step(variables, model.flat(arrays), element, goal)
        gap = float(gap)
        sizes = {n: np.abs(np.asarray(g, np.float64)).reshape(-1) for n, g in grad.items()}
        name = max(sizes, key=lambda n: sizes[n].max(initial=0.0), default=None)
        if name is not None and sizes[name].size and sizes[name].max() > 0:
            lever = (name, int(np.argmax(sizes[name])))
        if abs(gap) <= width / 4:
            return arrays, True, lever
        norm = sum(float(jnp.vdot(g, g)) for g in grad.values())
        if not np.isfinite(gap) or not np.isfinite(norm) or norm == 0:
            return arrays, False, lever
        moved = {n: np.asarray(variables[n]) - gap * np.asarray(grad[n]) / norm for n in floats}
        arrays = domain.project({**arrays, **moved}, center)
    _, measures = model.distances(arrays)
    return arrays, abs(float(measures[k].reshape(-1)[element]) - goal) <= width, lever
