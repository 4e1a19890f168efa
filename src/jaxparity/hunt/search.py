"""The search: first guesses aimed at the model's hazards, then mutations of what diverged most.

Each round is a batch of candidate inputs, every one projected into the domain, run on both paths in
the hunt's worker (``run_many``: each path compiled once, the batch in one call per path) and ranked
(``score.divergence``). The first rounds are the example, the domain's edges (its bounds, zero, the
dtype's subnormals, tiny and largest values, where the box holds them: whole leaves, one row, a few
elements), uniform draws, and inputs driven by Newton steps to each hazard site (``probe.target``).
Then each round mutates parents (the worst input of each kind found so far, and inputs that were the
first to bring a site to its hazard) by operators whose credit grows with the improvements they make:
a few elements moved by a few ULPs (a threshold's two sides), jittered at a random scale, set to an
edge, crossed with another parent, aimed again at a site, or drawn afresh.

Everything random comes from one generator seeded by ``seed``: the same seed and budget give the same
search (a ``time`` limit stops it wherever the clock says).

``search_case`` is one search of a case on this machine: its worker loaded, each path run once, the
domain stated, the search run, its findings as a ``HuntResult``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..metrics import Tolerance
from .domain import Domain, _step
from .hazards import finfo
from .probe import Plan
from .result import Finding, HuntResult, HuntSite
from .score import Divergence, divergence, output_scales

__all__ = ["Candidate", "Inputs", "Search", "SearchState", "search_case"]

Inputs = dict[tuple[int, int], dict[str, np.ndarray]]  # (island, evaluation) -> the varied leaves of that input
# hazards aimed at first: the jumps (two paths a ULP apart give results far apart there), then the ranges
AIM_ORDER = ("tie", "threshold", "overflow", "subnormal", "large argument", "cancellation")
OPERATORS = ("nudge", "jitter", "edge", "cross", "aim", "fresh")
CORPUS_PER_SITE = 8  # inputs kept as parents for each hazard site they reach
SEEDED = 384  # the first guesses are sized for this many evaluations, whatever the budget
SEED_ROUNDS = 2  # rounds of first guesses alone, before rounds of mutations come between them


@dataclass(eq=False)  # by identity: its arrays have no truth value
class Candidate:
    arrays: dict[str, np.ndarray]
    center: int
    origin: str  # how it was made: "the example", "edge: subnormal in arg1", "aimed at #12 floor (x.py:3)"
    operator: str = "seed"
    parent: int | None = None  # the evaluation number of its parent
    index: int = 0  # its evaluation number (1-based), once evaluated
    divergence: Divergence | None = None
    reached: tuple[int, ...] = ()  # sites it brings to their hazard
    # the input elements that move the site it was aimed at most: a few ULPs of them cross its threshold
    levers: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class _Aim:
    """A first guess still to make: ``start`` driven by Newton steps toward target ``target`` of ``site``."""

    start: Candidate
    site: int
    target: int


@dataclass
class SearchState:
    """What the search has seen: the best input of each kind, the progress, and each site's coverage."""

    evaluations: int = 0
    # (output, kind, the last hazard site it reaches or -1) -> the worst input of that kind
    archive: dict[tuple[str, str, int], Candidate] = field(default_factory=dict)
    # (evaluations, the best's difference against its output's scale (inf: NaN or a failure), its kind, seconds)
    progress: list[tuple[int, float, str, float]] = field(default_factory=list)
    first_reach: dict[int, int] = field(default_factory=dict)  # site -> the first evaluation at its hazard
    reach_count: dict[int, int] = field(default_factory=dict)
    # site -> evaluations at its hazard on which the paths part beyond rounding (rounding noise is everywhere)
    diverged_at: dict[int, int] = field(default_factory=dict)
    corpus: list[Candidate] = field(default_factory=list)  # the first to reach each site: parents for its region
    failed_both: int = 0  # inputs on which both paths fail (not the model's inputs)
    origins: dict[str, int] = field(default_factory=dict)  # how many candidates each operator made
    first_found: int | None = None  # the first evaluation whose input breaks the tolerance
    first_kind: dict[str, int] = field(default_factory=dict)  # kind of divergence -> the first evaluation of it
    best: Candidate | None = None


class Search:
    def __init__(self, runner: Any, domain: Domain, plan: Plan, varied: list[str], baseline: str, path: str,
                 tolerance: Tolerance, seed: int | tuple[int, ...], budget: int, seconds: float | None = None,
                 batch: int = 24, timeout: float | None = None,
                 progress: Callable[[SearchState], None] | None = None) -> None:
        self.runner, self.domain, self.plan, self.varied = runner, domain, plan, varied
        self.baseline, self.path, self.tolerance = baseline, path, tolerance
        self.rng = np.random.default_rng(seed)
        self.budget, self.seconds, self.batch, self.timeout = budget, seconds, batch, timeout
        self.report = progress
        self.state = SearchState()
        self.credit = {op: 1.0 for op in OPERATORS}
        self.scales: dict[str, float] | None = None  # each output's magnitude on the example (score.divergence)
        self._start = 0.0

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> SearchState:
        """The first guesses, then by turns a round of them and a round of mutations of what they found, then
        mutations alone, batch by batch until the budget or the time is spent. The order of rounds is the same
        whatever the budget (aimed guesses resolved as their batch comes), so a larger budget evaluates the
        same inputs first: it never finds less."""
        self._start = time.perf_counter()
        pending: list[Candidate | _Aim] = self._seeds()
        rounds = 0
        while pending and not self._done():
            rounds += 1
            if rounds > SEED_ROUNDS and rounds % 2 == 1 and self._parents():
                # after the first rounds of guesses, every other round mutates what they found
                self._evaluate(self._children(self._room()))
                continue
            part, pending = pending[:self._room()], pending[self._room():]
            aims = [x for x in part if isinstance(x, _Aim)]
            made = iter(self._aim([(a.start, a.site, a.target) for a in aims], len(aims), grouped=True))
            batch: list[Candidate] = []
            for x in part:
                batch += next(made) if isinstance(x, _Aim) else [x]
            pending = [*batch[self._room():], *pending]  # a ladder beyond the batch: first in the next one
            self._evaluate(batch[:self._room()])
        while not self._done():
            self._evaluate(self._children(self._room()))
        return self.state

    def _done(self) -> bool:
        if self.state.evaluations >= self.budget:
            return True
        return self.seconds is not None and time.perf_counter() - self._start >= self.seconds

    def _room(self) -> int:
        return max(1, min(self.batch, self.budget - self.state.evaluations))

    # -- first guesses --------------------------------------------------------------------------
    def _seeds(self) -> list[Candidate | _Aim]:
        """The first guesses, in the order they are evaluated: the example (or each real input), then by turns
        an input aimed at a hazard (jumps first: ties and thresholds, then overflow, subnormals, large
        arguments, cancellation), an edge of the domain and a uniform draw."""
        d, rng = self.domain, self.rng
        seeds: list[Candidate] = []
        for k, label in enumerate(d.center_labels):
            inside = d.project(d.centers[k], k)
            moved = any(not np.array_equal(inside[n], np.asarray(d.centers[k][n])) for n in inside)
            seeds.append(Candidate(inside, k, label + (" (moved into the domain)" if moved else "")))
        edges = self._edges(0)
        rng.shuffle(edges)  # type: ignore[arg-type]
        seeds += edges[:max(4, SEEDED // 6)]
        seeds += [Candidate(d.uniform(rng, k := int(rng.integers(len(d.centers)))), k, "uniform in the domain",
                            "fresh") for _ in range(SEEDED // 24)]
        sites = sorted(self.plan.sites, key=lambda s: AIM_ORDER.index(s.hazard) if s.hazard in AIM_ORDER else 99)
        pairs = [(site.id, j) for site in sites for j in range(len(site.targets))]
        starts = [seeds[0]] + [Candidate(d.uniform(rng, k := int(rng.integers(len(d.centers)))), k, "uniform")
                               for _ in range(3)]
        aimed: list[Candidate | _Aim] = [_Aim(starts[i % len(starts)], *pairs[i % len(pairs)])
                                         for i in range(min(SEEDED // 3, 8 * len(pairs)))] if pairs else []
        out: list[Candidate | _Aim] = []
        groups: list[list] = [list(seeds[:len(d.centers)]), aimed, list(seeds[len(d.centers):])]
        while any(groups):
            for g in groups:
                if g:
                    out.append(g.pop(0))
        return out

    def _edge_values(self, name: str, center: int) -> list[tuple[float, str]]:
        """The values worth trying in leaf ``name`` that its box holds: its bounds, 0, ±1, and the dtype's
        subnormals, smallest normal and largest finite value."""
        leaf = next(x for x in self.domain.leaves if x.name == name)
        lo_a, hi_a = self.domain.bounds(name, center)
        lo, hi = float(np.min(lo_a.astype(np.float64))), float(np.max(hi_a.astype(np.float64)))
        values = [(lo, "its low bound"), (hi, "its high bound"), (0.0, "zero"), (1.0, "one"), (-1.0, "minus one")]
        if not leaf.integer:
            info = finfo(np.dtype(leaf.dtype))
            for v, what in ((float(info.smallest_subnormal), "the smallest subnormal"),
                            (float(info.tiny) / 4, "a subnormal"), (float(info.tiny), "the smallest normal"),
                            (float(info.max), "the largest finite value")):
                values += [(v, what), (-v, f"minus {what}")]
        return [(v, w) for v, w in values if lo <= v <= hi]

    def _edges(self, center: int, parent: Candidate | None = None, one: bool = False) -> list[Candidate]:
        """Candidates with an edge value in a whole leaf, in one row (along its last axis) or in a few elements;
        ``one``: a single such candidate, of ``parent``."""
        d, rng = self.domain, self.rng
        base = parent.arrays if parent is not None else d.project(d.centers[center], center)
        out = []
        leaves = [x for x in d.leaves if x.shape and int(np.prod(x.shape)) > 0] or list(d.leaves)
        for leaf in ([leaves[int(rng.integers(len(leaves)))]] if one else leaves):
            values = self._edge_values(leaf.name, center)
            if one and values:
                values = [values[int(rng.integers(len(values)))]]
            for v, what in values:
                shapes = ("whole", "row", "some") if not one else (("whole", "row", "some")[int(rng.integers(3))],)
                for how in shapes:
                    x = np.array(base[leaf.name], copy=True)
                    where = self._positions(x.shape, how)
                    x[where] = np.asarray(v).astype(x.dtype)
                    words = {"whole": "", "row": " (one row)", "some": " (some elements)"}[how]
                    out.append(Candidate(d.project({**base, leaf.name: x}, center), center,
                                         f"edge: {what} in {leaf.name}{words}", "edge",
                                         parent.index if parent is not None else None))
        return out

    def _positions(self, shape: tuple[int, ...], how: str) -> Any:
        rng = self.rng
        if how == "whole" or not shape:
            return (...,)
        if how == "row":
            index = tuple(int(rng.integers(s)) for s in shape[:-1])
            return index + (slice(None),)
        mask = rng.random(shape) < max(1.0 / max(int(np.prod(shape)), 1), rng.choice([0.01, 0.1, 0.3]))
        return mask

    def _aim(self, requests: list[tuple[Candidate, int, int]], limit: int, grouped: bool = False) -> list:
        """Newton steps toward each (parent, site, target), at most ``limit`` of them, in the worker: the inputs
        they reach (an aimed input at a threshold with two of its levers' neighbours); ``grouped``: a list of
        them per request (empty where aiming failed)."""
        from ..execution.isolated import TaskError, WorkerDied

        if not requests or limit <= 0:
            return []
        if len(requests) > limit:
            keep = self.rng.choice(len(requests), size=limit, replace=False)
            requests = [requests[i] for i in sorted(keep)]
        try:
            moved = self.runner.task("jaxparity.hunt.probe:target", self.varied, self.domain,
                                     [(c.arrays, c.center, s, j) for c, s, j in requests], timeout=self._task_time())
        except (TaskError, WorkerDied, TimeoutError):
            moved = []  # aiming is a help, never a failure of the hunt
        groups: list[list[Candidate]] = []
        for (parent, s, j), (arrays, at, levers) in zip(requests, moved):
            site = self.plan.sites[s]
            aimed = Candidate(self.domain.project(arrays, parent.center), parent.center,
                              f"aimed at {site.hazard} of {site.describe()}" + ("" if at else " (not reached)"), "aim",
                              parent.index or None, levers=tuple(levers))
            group = [aimed]
            if at and levers and site.targets[j][1] <= 4:  # a threshold: its levers a ULP or two either side
                group += [self._lever_step(aimed, 2) for _ in range(2)]
            groups.append(group)
        groups += [[] for _ in range(len(requests) - len(groups))]
        return groups if grouped else [c for g in groups for c in g]

    def _lever_step(self, c: Candidate, most: int) -> Candidate:
        """``c`` with each of its levers moved by up to ``most`` ULPs either way: the two paths' roundings of a
        value at a threshold fall on either side of it for some of these."""
        arrays = {name: np.array(x, copy=True) for name, x in c.arrays.items()}
        for name, index in c.levers:
            flat = arrays[name].reshape(-1)
            flat[index] = _ulp_move(flat[index:index + 1], int(self.rng.integers(-most, most + 1)))[0]
        return Candidate(self.domain.project(arrays, c.center), c.center,
                         f"{c.origin}, {len(c.levers)} input element{'s' if len(c.levers) > 1 else ''} moved by up "
                         f"to {most} ULP", "nudge", c.index or None, levers=c.levers)

    def _task_time(self) -> float | None:
        return None if self.timeout is None else self.timeout * 10

    # -- mutations ------------------------------------------------------------------------------
    def _parents(self) -> list[Candidate]:
        archive = sorted(self.state.archive.values(), key=lambda c: c.divergence.rank if c.divergence else (),
                         reverse=True)
        return archive + [c for c in self.state.corpus if c not in archive]

    def _children(self, n: int) -> list[Candidate]:
        rng = self.rng
        parents = self._parents()
        ops = list(OPERATORS)
        weights = np.array([self.credit[o] for o in ops])
        out: list[Candidate] = []
        aims: list[tuple[Candidate, int, int]] = []
        for _ in range(n):
            op = ops[int(rng.choice(len(ops), p=weights / weights.sum()))]
            if not parents or op == "fresh":
                k = int(rng.integers(len(self.domain.centers)))
                out.append(Candidate(self.domain.uniform(rng, k), k, "uniform in the domain", "fresh"))
                continue
            # the worst first: a parent's chance falls with its place in the ranking
            ranks = 1.0 / (1.0 + np.arange(len(parents)))
            parent = parents[int(rng.choice(len(parents), p=ranks / ranks.sum()))]
            if op == "aim" and self.plan.sites:
                site, j = self._site_for(parent)
                aims.append((parent, site, j))
                continue
            if op == "edge":
                out += self._edges(parent.center, parent, one=True)[:1]
                continue
            if op == "cross" and len(parents) > 1:
                other = parents[int(rng.integers(len(parents)))]
                arrays = {}
                for name, x in parent.arrays.items():
                    mask = rng.random(np.shape(x)) < 0.5
                    arrays[name] = np.where(mask, x, other.arrays[name]) if other.center == parent.center else x
                out.append(self._child(parent, arrays, "cross",
                                       f"a cross of evaluations {parent.index} and {other.index}"))
                continue
            if op == "nudge" and parent.levers and rng.random() < 0.7:
                out.append(self._lever_step(parent, int(rng.integers(1, 5))))
                continue
            arrays = dict(parent.arrays)
            floats = [x for x in self.domain.leaves if not x.integer] or list(self.domain.leaves)
            leaf = floats[int(rng.integers(len(floats)))]
            x = np.array(arrays[leaf.name], copy=True)
            where = self._positions(x.shape, "some") if rng.random() < 0.5 else self._one(x.shape)
            if op == "nudge" and not leaf.integer:
                steps = int(rng.integers(1, 9)) * (1 if rng.random() < 0.5 else -1)
                x[where] = _ulp_move(x[where], steps)
                words = f"{abs(steps)} ULP {'up' if steps > 0 else 'down'}"
            else:  # jitter, at a random scale of the box
                lo, hi = (b.astype(np.float64) for b in self.domain.bounds(leaf.name, parent.center))
                scale = (hi - lo) * 10.0 ** -rng.uniform(0, 5)
                moved = x.astype(np.float64) + rng.standard_normal(x.shape) * scale
                x[where] = moved[where].astype(x.dtype) if not leaf.integer else np.round(moved[where]).astype(x.dtype)
                words = "jittered"
                op = "jitter"
            arrays[leaf.name] = x
            out.append(self._child(parent, arrays, op, f"evaluation {parent.index} with {leaf.name} {words}"))
        if aims:
            out += self._aim(aims, len(aims))
        return out[:n] if out else [Candidate(self.domain.uniform(rng), 0, "uniform in the domain", "fresh")]

    def _one(self, shape: tuple[int, ...]) -> Any:
        return tuple(int(self.rng.integers(s)) for s in shape) if shape else (...,)

    def _child(self, parent: Candidate, arrays: dict[str, np.ndarray], op: str, origin: str) -> Candidate:
        return Candidate(self.domain.project(arrays, parent.center), parent.center, origin, op, parent.index)

    def _site_for(self, parent: Candidate) -> tuple[int, int]:
        """A site to aim at from ``parent``: one it reached (to land on the hazard's other side), else one rarely
        reached so far."""
        rng = self.rng
        sites = self.plan.sites
        if parent.reached and rng.random() < 0.5:
            s = parent.reached[int(rng.integers(len(parent.reached)))]
        else:
            counts = np.array([self.state.reach_count.get(s.id, 0) for s in sites], float)
            w = 1.0 / (1.0 + counts)
            s = int(rng.choice(len(sites), p=w / w.sum()))
        return s, int(rng.integers(len(sites[s].targets)))

    # -- evaluation ----------------------------------------------------------------------------
    def _evaluate(self, batch: list[Candidate]) -> None:
        from ..execution.isolated import TaskError, WorkerDied

        st = self.state
        self.runner.send_samples([c.arrays for c in batch])
        outs = {}
        for spec in (self.baseline, self.path):
            runs = [r[0] for part in self.runner.run_many(spec, range(len(batch)), 1, self.timeout, chunk=1)
                    for r in part]
            outs[spec] = [r.outputs if r.status == "ok" and r.outputs is not None else f"{r.status}: {r.message}"
                          for r in runs]
        if self.scales is None:  # the first batch starts with the example: its outputs set each output's scale
            first = outs[self.baseline][0]
            self.scales = output_scales(first) if not isinstance(first, str) else {}
        near = None
        if self.plan.sites:
            try:
                near = self.runner.task("jaxparity.hunt.probe:reach", self.varied, [c.arrays for c in batch],
                                        timeout=self._task_time())
            except (TaskError, WorkerDied, TimeoutError):
                near = None
        for i, c in enumerate(batch):
            st.evaluations += 1
            c.index = st.evaluations
            st.origins[c.operator] = st.origins.get(c.operator, 0) + 1
            c.divergence = divergence(outs[self.baseline][i], outs[self.path][i], self.tolerance, self.scales,
                                      self.plan.narrowest)
            if near is not None:
                c.reached = tuple(int(s) for s in np.flatnonzero(near[i] <= 1.0))
            self._record(c)
        best = st.best.divergence if st.best is not None and st.best.divergence is not None else None
        st.progress.append((st.evaluations, best.severity if best else 0.0, best.kind if best else "none",
                            time.perf_counter() - self._start))
        for op in self.credit:  # old credit fades, so an operator that stops helping loses its share
            self.credit[op] = max(0.2, self.credit[op] * 0.95)
        if self.report:
            self.report(st)

    def _record(self, c: Candidate) -> None:
        st = self.state
        d = c.divergence
        if d is None:
            st.failed_both += 1
            return
        new_site = False
        parted = d.kind not in ("none", "rounding")  # a jump, NaN on one side, a failure: not rounding noise
        for s in c.reached:
            st.reach_count[s] = st.reach_count.get(s, 0) + 1
            if parted:
                st.diverged_at[s] = st.diverged_at.get(s, 0) + 1
            if s not in st.first_reach:
                st.first_reach[s] = c.index
                new_site = True
        # parents for a region: the first inputs to reach each site, a few per site (where it flips)
        if c.reached and sum(1 for x in st.corpus if set(x.reached) & set(c.reached)) < CORPUS_PER_SITE * len(
                c.reached):
            st.corpus.append(c)
        if d.breaks and st.first_found is None:
            st.first_found = c.index
        if d.kind != "none":
            st.first_kind.setdefault(d.kind, c.index)
        key = (d.output, d.kind, max(c.reached, default=-1))
        improved = d.kind != "none" and (key not in st.archive or d.rank > _scored(st.archive[key]).rank)
        if improved:
            st.archive[key] = c
        if st.best is None or d.rank > _scored(st.best).rank:
            st.best = c
        if c.operator in self.credit and (improved or new_site):
            self.credit[c.operator] += 1.0


def _scored(c: Candidate) -> Divergence:
    """The divergence of an evaluated candidate: every one in the archive, and the best, has one."""
    assert c.divergence is not None
    return c.divergence


def _ulp_move(x: np.ndarray, steps: int) -> np.ndarray:
    """``x`` moved ``steps`` representable values of its own dtype (toward +inf where positive)."""
    x = np.asarray(x)
    for _ in range(abs(steps)):
        x = _step(x, steps > 0)
    return x


def search_case(case: str, specs: Sequence[str], budget: int, seconds: float | None, domain: Sequence[str],
                seed: int | tuple[int, ...], tolerance: Tolerance, timeout: float | None, batch: int = 24,
                progress: Callable[[str, Any], None] | None = None, island: int = 0) -> tuple[HuntResult, Inputs]:
    """One search on this machine: its result (no inputs saved, none explained) and the inputs of its
    findings, by (island, evaluation)."""
    from ..case import CaseError
    from ..execution.isolated import TaskError, WorkerDied
    from ..execution.runners import Runners
    from ..execution.samples import drawn_names
    from .domain import parse_domain

    start = time.perf_counter()
    with Runners(case, None) as runners:
        info = runners.load()
        runner = runners.home
        for spec in specs:  # each path once on the case's own inputs: it runs here, and compiles now
            run = runners.run(spec, timeout)
            if run.status == "unavailable":
                raise ValueError(f"{spec} cannot run here: {run.message}")
            if run.status != "ok" and spec == specs[0]:
                failure = runner.call_failure()
                if failure:
                    raise CaseError(f"{info.name}: the function fails on its own inputs, called plainly: {failure}")
            if run.status != "ok":
                message = (run.message or run.status).splitlines()[0]
                raise ValueError(f"{spec} fails on the case's own inputs ({message}): `jaxparity compare` says why; "
                                 "a hunt searches where two paths that run part")
        keys = runner.keys()
        example = {name: x for name, x in runner.arrays().items() if name not in keys}  # keys stay as they are
        dom = parse_domain(domain, example, drawn_names(example, info.data))
        varied = dom.names
        try:
            plan = runner.task("jaxparity.hunt.probe:plan", varied)
        except (TaskError, WorkerDied, TimeoutError) as e:  # no site to aim at: the search alone finds what it can
            plan = Plan((), {}, 0, (f"the model's hazard sites could not be found ({str(e).splitlines()[0][:200]}): "
                                    "the search was guided by the divergence alone",))
        if progress:
            progress("ready", (dom, plan))
        search = Search(runner, dom, plan, varied, specs[0], specs[1], tolerance, seed, budget, seconds, batch,
                        timeout, (lambda st: progress("search", st)) if progress else None)
        state = search.run()
    # the worst input of each kind of divergence at each output (the search keeps one per hazard site too)
    ranked, seen = [], set()
    for c in sorted(state.archive.values(), key=lambda c: _scored(c).rank, reverse=True):
        if (_scored(c).output, _scored(c).kind) not in seen:
            seen.add((_scored(c).output, _scored(c).kind))
            ranked.append(c)
    notes = list(plan.notes)
    findings, inputs = [], {}
    for c in ranked:
        if dom.contains(c.arrays) is None:  # never: every candidate is projected; said if it ever happens
            notes.append(f"evaluation {c.index} lies outside the domain and is not reported")
            continue
        d = _scored(c)
        reached = tuple(f"{plan.sites[s].hazard} of {plan.sites[s].describe()}" for s in c.reached)
        findings.append(Finding(d.kind, d.output, d.max_ulp, d.max_abs, d.max_rel, d.scaled, d.n_differ, d.size,
                                d.breaks, c.index, c.origin, d.index, d.baseline_value, d.path_value, d.message,
                                reached, island=island))
        inputs[(island, c.index)] = c.arrays
    if seconds is not None:
        notes.append(f"stopped by --time {seconds:g}: another machine evaluates another number of inputs in it "
                     "(the same seed and --budget repeat a search exactly)")
    if state.failed_both:
        notes.append(f"{state.failed_both} input{'s' if state.failed_both > 1 else ''} failed on both paths (not "
                     "inputs the model takes): not counted as divergences")
    sites = tuple(HuntSite(s.op, s.primitive, s.hazard, s.what, s.where, s.module, state.reach_count.get(s.id, 0),
                           state.first_reach.get(s.id), state.diverged_at.get(s.id, 0), s.loop) for s in plan.sites)
    seed_value = seed if isinstance(seed, int) else int(seed[0])
    result = HuntResult(info.name, specs[0], specs[1], tuple(dom.describe()), dom.source, seed_value, budget,
                        state.evaluations, time.perf_counter() - start, tolerance.describe(), tuple(findings),
                        tuple(state.progress), sites, dict(plan.considered), dict(state.origins), state.first_found,
                        dict(state.first_kind), state.failed_both, seconds, 1, tuple(notes), case)
    return result, inputs
