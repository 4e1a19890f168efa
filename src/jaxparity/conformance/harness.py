"""One harness through every path with ``jaxparity.compare``, and the tool's verdicts audited.

``run_harness`` keeps what the later stages need: the arguments, each path's raw outputs and
status, and the tool's own verdict and per-leaf ``n_differ``. ``audit`` then re-judges every
path against the baseline with the independent oracle and names each false verdict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import oracle
from .corpus import dtype_name, harness_args
from .symmetry import same_up_to_phase

__all__ = ["PATHS", "Audit", "HarnessRun", "PathRun", "audit", "comparable", "run_harness"]

PATHS = ("eager", "jit", "export", "declared", "f64")
BASELINE = "eager"


@dataclass(frozen=True)
class PathRun:
    """One path of one harness: what it returned and what the tool said about it."""

    spec: str
    status: str
    verdict: str
    message: str | None
    seconds: float
    outputs: tuple[tuple[str, np.ndarray], ...] | None
    tool_n_differ: tuple[int | None, ...]  # per leaf, from the tool's LeafDiff (None: no diff)
    tool_rules: tuple[str | None, ...] = ()  # per leaf: the tool's alignment rule (eigenvector signs...)


@dataclass(frozen=True)
class HarnessRun:
    """A harness and every path's run; ``error`` when the harness could not even be compared."""

    fullname: str
    group: str
    dtype: str
    primitives: tuple[str, ...]  # top-level equations of the harness's jaxpr
    eqn_params: dict[str, Any]  # the first equation's params (integer_pow's exponent)
    args: tuple[Any, ...]
    paths: dict[str, PathRun] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0

    @property
    def eager_ok(self) -> bool:
        """Eager ran (even when the comparison itself then failed: ``error`` says why)."""
        return BASELINE in self.paths and self.paths[BASELINE].status == "ok"


def _equations(fn: Any, args: list[Any]) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The primitives of the harness's top-level equations, and the params of the first. An
    equation holding a sub-jaxpr (custom_linear_solve, a loop) is several ops to ``declared``,
    which rounds each: it is listed once per inner equation, so that it never counts as one op."""
    import jax
    import jax.extend.core as jcore

    try:
        eqns = jax.make_jaxpr(fn)(*args).jaxpr.eqns
    except Exception:  # noqa: BLE001 - the comparison reports the failure itself
        return (), {}
    names = []
    for e in eqns:
        inner = [v for v in e.params.values() if isinstance(v, (jcore.Jaxpr, jcore.ClosedJaxpr))]
        inner += [x for v in e.params.values() if isinstance(v, tuple) for x in v
                  if isinstance(x, (jcore.Jaxpr, jcore.ClosedJaxpr))]
        names.append(e.primitive.name)
        names += [f"{e.primitive.name}/{i}" for i in range(sum(len(getattr(j, "jaxpr", j).eqns) for j in inner))]
    return tuple(names), dict(eqns[0].params) if eqns else {}


def _eager_runs(fn: Any, args: list[Any]) -> bool:
    import jax

    try:
        with jax.disable_jit():
            jax.block_until_ready(fn(*args))
    except Exception:  # noqa: BLE001
        return False
    return True


def run_harness(h: Any, paths: tuple[str, ...] = PATHS) -> HarnessRun:
    """Compare ``h.dyn_fun`` on its seeded arguments along ``paths`` (baseline ``eager``)."""
    import jaxparity

    start = time.perf_counter()
    base = dict(fullname=h.fullname, group=h.group_name, dtype=dtype_name(h))
    try:
        args = harness_args(h)
    except Exception as e:  # noqa: BLE001
        return HarnessRun(**base, primitives=(), eqn_params={}, args=(), error=f"argument maker failed: {e!r:.300}")
    prims, params = _equations(h.dyn_fun, args)
    try:
        result = jaxparity.compare(h.dyn_fun, *args, paths=list(paths), baseline=BASELINE)
    except Exception as e:  # noqa: BLE001
        # The tool itself failed: a tool error if the function runs eagerly, else eager's failure.
        crash = PathRun(BASELINE, "ok", "baseline", None, 0.0, None, ()) if _eager_runs(h.dyn_fun, args) else None
        return HarnessRun(**base, primitives=prims, eqn_params=params, args=tuple(args),
                          paths={} if crash is None else {BASELINE: crash},
                          error=f"jaxparity.compare raised {e!r:.300}", seconds=time.perf_counter() - start)
    runs = result._source["runs"]
    out: dict[str, PathRun] = {}
    for p in result.paths:
        run = runs.get(p.spec)
        out[p.spec] = PathRun(
            spec=p.spec, status=p.status, verdict=p.verdict, message=p.message, seconds=p.seconds,
            outputs=None if run is None else run.outputs,
            tool_n_differ=tuple(None if lf.diff is None else lf.diff.n_differ for lf in p.leaves),
            tool_rules=tuple(getattr(lf, "rule", None) for lf in p.leaves))
    return HarnessRun(**base, primitives=prims, eqn_params=params, args=tuple(args), paths=out,
                      seconds=time.perf_counter() - start)


def comparable(path: PathRun, baseline: PathRun) -> tuple[list[tuple[np.ndarray, np.ndarray]] | None, str | None]:
    """The path's leaves paired with the baseline's, in the baseline's dtype (an ``f64`` leaf is
    rounded once to it by the oracle), or ``None`` and why the structures do not match."""
    got, want = path.outputs or (), baseline.outputs or ()
    if len(got) != len(want):
        return None, f"{len(got)} outputs, baseline has {len(want)}"
    pairs = []
    for (_, g), (wname, w) in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return None, f"output {wname}: shape {g.shape}, baseline {w.shape}"
        if g.dtype != w.dtype:
            inexact = oracle.is_float(w.dtype) or oracle.is_complex(w.dtype)
            widened = g.dtype in (np.float64, np.complex128) and inexact
            if path.spec != "f64" or not widened:
                return None, f"output {wname}: dtype {g.dtype}, baseline {w.dtype}"
            g = oracle.round_to(g, w.dtype)
        pairs.append((g, w))
    return pairs, None


@dataclass(frozen=True)
class Audit:
    """The oracle's view of one path against the baseline, and how the tool's verdict compares."""

    spec: str
    n_differ: int | None  # oracle's count over all leaves (None: not comparable)
    mismatch: str | None  # structure mismatch, if any
    false_equal: bool  # tool: identical/equal (or a leaf with n_differ 0), oracle: some element differs
    false_differs: bool  # tool: differs, oracle: every element the same
    miscounted: tuple[str, ...]  # leaves whose tool n_differ is not the oracle's count


def audit(run: HarnessRun, spec: str) -> Audit | None:
    """Re-judge path ``spec`` of ``run`` against the baseline; None when either did not run."""
    path, base = run.paths.get(spec), run.paths.get(BASELINE)
    if path is None or base is None or path.status != "ok" or base.status != "ok":
        return None
    pairs, why = comparable(path, base)
    if pairs is None:
        return Audit(spec, None, why, False, False, ())
    counts = [oracle.count_differ(g, w) for g, w in pairs]
    total = sum(counts)
    names = [n for n, _ in base.outputs or ()]
    tool = list(path.tool_n_differ) + [None] * (len(counts) - len(path.tool_n_differ))
    rules = list(path.tool_rules) + [None] * (len(counts) - len(path.tool_rules))
    # A leaf the tool compared under an alignment rule (eigenvector signs, tie order) has no raw
    # count to check; its "no difference" must still hold up to a per-vector sign/phase.
    leaf_false_equal = any(t == 0 and c > 0 and not (r and same_up_to_phase(g, w))
                           for t, c, r, (g, w) in zip(tool, counts, rules, pairs))
    false_equal = (path.verdict in ("identical", "equal") and total > 0 and not any(rules)) or leaf_false_equal
    false_differs = path.verdict == "differs" and total == 0
    miscounted = tuple(f"{n}: tool {t}, oracle {c}" for n, t, c, r in zip(names, tool, counts, rules)
                       if t is not None and t != c and not r)
    return Audit(spec, total, None, false_equal, false_differs, miscounted)
