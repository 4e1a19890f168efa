"""Compare one function across execution paths: run them, then measure each against the baseline.

``compare(fn, *args)`` runs paths in this process (for notebooks and tests);
``compare_case('model.py')`` runs them isolated in worker processes with per-path timeouts (the CLI).
Both end in ``build_result``, which knows nothing of how the outputs were obtained.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import dataclasses
import os
import re
import threading
import time
from dataclasses import dataclass

import numpy as np

from .case import Case
from .execution.envs import EnvSpec
from .equivalence import OutputRule, align
from .execution.runs import CaseInfo, PathRun, case_info
from .execution.inprocess import run_in_process
from .metrics import Tolerance, UnsupportedDtype, closer_to_ideal, diff_leaf, dtype_class, reference_error
from .rounding import round_to_dtype
from .paths import DEFAULT_BASELINE, DEFAULT_PATHS, make_path, spec_env, without_env
from .paths.reference import IDEAL_OTHER_DECISIONS, IDEAL_UNDEFINED
from .execution.runners import Runners
from .result import ArrayInfo, ComparisonResult, LeafResult, PathResult

__all__ = ["Comparison", "aggregate_samples", "build_result", "compare", "compare_samples", "compare_case", "compare_loaded", "plan_paths"]

IDEAL = "f64"

Progress = Callable[[str, PathRun | None], None]  # (spec, None) when a path starts, (spec, run) when done
Stream = Callable[[str, Any], None]  # (what, its value) as the answer forms: see compare_case


def plan_paths(paths: Sequence[str] | str | None, baseline: str) -> tuple[list[str], set[str]]:
    """The specs to run, in order, and which of them the user asked for explicitly.

    The baseline runs first and ``f64`` always runs (every path's error is measured against it).
    Every spec is validated here, before anything runs.
    """
    if isinstance(paths, str):
        paths = _split_paths(paths)
    explicit = paths is not None
    specs = list(paths) if paths is not None else list(DEFAULT_PATHS)
    made = [make_path(s) for s in [*specs, baseline]]  # validates names and options
    for path in made:
        if path.env is None and path.options:
            path.check_options()  # an XLA option this XLA does not have: before anything runs
    specs, baseline = [p.spec for p in made[:-1]], made[-1].spec
    ordered = [baseline] + [s for s in specs if s != baseline]
    if IDEAL not in ordered:
        ordered.append(IDEAL)
    requested = set(specs) | {baseline} if explicit else {baseline}
    return list(dict.fromkeys(ordered)), requested


def with_host(specs: list[str], backend: str | None) -> list[str]:
    """``specs`` (default paths, baseline first) with the host's compiled run (``paths.devices.host_twin``:
    ``jit:device=cpu``, explained against jit on the device, like against like) after the baseline, where the
    paths compute on an accelerator (``backend``) and no path runs on the host already."""
    from .paths.devices import host_twin

    if backend in (None, "cpu") or any(make_path(s).options.get("device") == "cpu" for s in specs):
        return specs
    return specs[:1] + [host_twin(make_path(specs[0]))] + specs[1:]


def _host_note(backend: str | None, baseline: str) -> tuple[str, ...]:
    from .paths.devices import host_twin

    if backend in (None, "cpu"):
        return ()
    return (f"{baseline} ran on {backend}: there each op runs the device's own kernels, as jit's do, so it shares "
            f"the device's arithmetic; {host_twin(make_path(baseline))} is the same program on the host",)


def _split_paths(text: str) -> list[str]:
    """``'eager,jit:a=1,b=2,export'`` -> ``['eager', 'jit:a=1,b=2', 'export']``.

    A comma starts a new path when what follows is a path name (``name`` or ``name:...``);
    otherwise it separates options of the current one.
    """
    out: list[str] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if out and not re.match(r"^[a-z][a-z0-9_-]*(@[A-Za-z][A-Za-z0-9_.-]*)?(:|$)", part):
            out[-1] += "," + part
        else:
            out.append(part)
    return out


def compare(
    fn: Callable[..., Any],
    *args: Any,
    paths: Sequence[str] | str | None = None,
    baseline: str = DEFAULT_BASELINE,
    tolerance: Tolerance | None = None,
    timeout: float | None = None,
    progress: Progress | None = None,
) -> Comparison:
    """Run ``fn(*args)`` along each path, in this process, and compare against ``baseline``.

    >>> result = jaxparity.compare(model.apply, variables, x, paths=["eager", "jit"])
    >>> result.passed, result.path("jit").verdict
    """
    from .case import Case, bind_static

    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    # strings, flags, a module's activations: bound in, as in a case file; a number argument stays an input
    bound, arrays, notes, roles = bind_static(fn, tuple(args), {}, numbers=True)
    case = Case(fn=bound, args=arrays, name=name, input_source="arguments of compare()", notes=notes, roles=roles)
    return compare_loaded(case, paths=paths, baseline=baseline, tolerance=tolerance, timeout=timeout,
                          progress=progress)


def compare_loaded(
    case: Case,
    *,
    paths: Sequence[str] | str | None = None,
    baseline: str = DEFAULT_BASELINE,
    tolerance: Tolerance | None = None,
    timeout: float | None = None,
    progress: Progress | None = None,
) -> Comparison:
    """``compare`` for a ``Case`` already loaded in this process (``load_case``)."""
    import jax

    specs, requested = plan_paths(paths, baseline)
    backend = jax.default_backend()
    specs = with_host(specs, backend) if paths is None else specs
    if any(spec_env(s) for s in specs):
        raise ValueError("paths in other environments (NAME@ENV) run the case in another Python: give a case "
                         "file to compare_case() or `jaxparity compare`")
    for spec in specs:  # what the paths will wait for (a serving process) loads while the first ones run
        try:
            make_path(spec).prestart()
        except Exception:  # noqa: BLE001 - a head start, never a failure
            pass
    runs = _run_each(specs, lambda s: run_in_process(make_path(s), case.fn, case.args, timeout), progress)
    runs[specs[0]] = dataclasses.replace(runs[specs[0]], notes=runs[specs[0]].notes + _host_note(backend, specs[0]))
    result = build_result(case_info(case), runs, specs[0], tolerance or Tolerance(), requested)
    return dataclasses.replace(result, _source={"case": case, "runs": runs})


def compare_case(
    case: str,
    *,
    inputs: str | None = None,
    paths: Sequence[str] | str | None = None,
    baseline: str = DEFAULT_BASELINE,
    tolerance: Tolerance | None = None,
    timeout: float | None = None,
    progress: Progress | None = None,
    explain: bool = False,
    envs: Sequence[EnvSpec] = (),
    inputs_from: str | None = None,
    log: Callable[[str], None] | None = None,
    keep_inputs: bool = False,
    jobs: int | None = None,
    stream: Stream | None = None,
    budget: float | None = None,
) -> Comparison:
    """Like ``compare`` for a case file (``FILE.py[:FACTORY]``), each path isolated in a worker.

    Independent paths run concurrently in up to ``jobs`` workers (default: the number of cores; see
    ``Runners.lanes``); the result and its order are the same as one after the other.

    Paths written ``NAME@ENV`` run in environment ENV, one of ``envs`` (built once, cached); inputs
    are drawn in this environment, or in ``inputs_from``, and moved to the others bit-exactly.
    With ``explain``, the worker then explains every diverging path (see ``explain_result``). ``stream`` is told
    as the answer forms: ("compared", the result before any explanation), ("stage", (path, stage)) as each stage
    starts, ("verdict", a ``Verdict``) as each path's is decided. An interrupt (SIGINT) or ``budget`` (seconds
    from the call) ends the explanation: the result then holds the verdicts decided so far, the paths left in
    ``partial``.
    Raises ``CaseError`` when the case cannot be loaded, ``EnvError`` for an undeclared
    environment; failing paths never raise.
    """
    began = time.monotonic()
    specs, requested = plan_paths(paths, baseline)
    with Runners(case, inputs, envs, inputs_from, log) as runners:
        runners.check(specs)
        runners.build(specs)
        backend = None
        if paths is None:  # the default comparison: on an accelerator, the host's run too
            backend = runners.load().environment.get("backend")
            specs = with_host(specs, backend)
        lanes = runners.lanes(specs, jobs if jobs is not None else (os.cpu_count() or 1))
        if len(lanes) == 1:
            info = runners.load()
            runners.home.prestart([s for s in specs if spec_env(s) is None])  # TensorFlow loads meanwhile
            runs = _run_each(specs[:1], lambda s: runners.run(s, timeout), progress)
            _model_runs(runners, runs[specs[0]], info)
            runs |= _run_each(specs[1:], lambda s: runners.run(s, timeout), progress)
        else:
            info, runs = _run_lanes(runners, specs, lanes, timeout, progress)
        runs[specs[0]] = dataclasses.replace(runs[specs[0]], notes=runs[specs[0]].notes + _host_note(backend, specs[0]))
        result = build_result(info, runs, specs[0], tolerance or Tolerance(), requested)
        source = {"case": None, "runs": runs, "inputs": runners.home.arrays() if keep_inputs else None, "info": info}
        result = dataclasses.replace(result, _source=source)
        if stream is not None:
            stream("compared", result)
            for v in result.verdicts:  # decided with the comparison: paths that agree, or could not run
                if v.kind in ("identical", "could not run"):
                    stream("verdict", v)
        if explain and _to_explain(result):
            from .explain.verdict import with_verdicts

            if progress:
                progress("explain", None)
            start = time.perf_counter()
            told = _Told(result, stream)
            try:
                found = _explain_in_env(runners, result, runs, told, None if budget is None else began + budget)
            except Stopped as e:
                left = tuple(p for p in _to_explain(result) if p not in e.found)
                if progress:
                    progress("explain", PathRun("explain", "timeout", seconds=time.perf_counter() - start))
                return with_verdicts(dataclasses.replace(result, explanations=tuple(e.found.values()), partial=left),
                                     left)
            if progress:
                progress("explain", PathRun("explain", "ok" if not isinstance(found, str) else "error",
                                            seconds=time.perf_counter() - start))
            if isinstance(found, str):
                raise ExplainError(found)
            result = with_verdicts(dataclasses.replace(result, explanations=tuple(found)))
        if explain:
            result = _toward_ideal(result, lambda *a: runners.worker(spec_env(result.baseline)).task(
                "jaxparity.explain.toward:task", *a, timeout=_TOWARD_TIMEOUT), stream)
    return result


_TOWARD_TIMEOUT = 600.0  # the change toward the f64 ideal, re-run on every path


def _toward_ideal(result: _Result, run: Callable[..., Any], stream: Stream | None = None) -> _Result:
    """``result`` with ``lost`` set where every path, the baseline too, is far from the f64 ideal
    (``explain.toward``): where the program loses its digits and the change toward the ideal, re-run on every path
    of the baseline's environment by ``run`` (the worker's task, or the function here). A failure is a note."""
    from .explain.toward import far

    hit = far(result)
    if hit is None:
        return result
    k, name, scale, errors = hit
    here = tuple((spec, e) for spec, e in errors if spec_env(spec) == spec_env(result.baseline)
                 and not make_path(spec).has("observed"))  # outputs read from a file: nothing to re-run
    if len(here) < 2:
        return result
    if stream is not None:
        stream("stage", ("", "toward the f64 ideal"))
    try:
        lost = run(k, name, scale, [(without_env(s), e) for s, e in here])
    except Exception:  # noqa: BLE001 - the verdicts stand without it (their noise judgement says neither is near)
        return result
    if lost is None:
        return result
    back = {without_env(s): s for s, _ in here}
    lost = dataclasses.replace(lost, errors=tuple((back.get(s, s), e) for s, e in lost.errors),
                               after=tuple((back.get(s, s), e) for s, e in lost.after))
    return dataclasses.replace(result, lost=lost)


class Stopped(Exception):
    """The explanation was interrupted (a signal) or ran past its budget: what it found so far, by path."""

    def __init__(self, found: dict[str, Any], why: str) -> None:
        super().__init__(why)
        self.found, self.why = found, why


class _Told:
    """What the workers say while they explain, passed on to the command's ``stream``: each stage as it starts, and
    each path's verdict as soon as its explanation is in (decided on the explanations so far). Keeps the
    explanations so far for an interrupted run."""

    def __init__(self, result: ComparisonResult, stream: Stream | None) -> None:
        self.result, self.stream = result, stream
        self.found: dict[str, Any] = {}
        self.lock = threading.Lock()

    def __call__(self, path: str, kind: str, what: Any) -> None:
        if kind == "stage":
            if self.stream is not None:
                self.stream("stage", (path, what))
            return
        from .explain.pairs import counterpart

        with self.lock:
            self.found[path] = dataclasses.replace(what, path=path, baseline=counterpart(self.result, path))
            found = tuple(self.found.values())
        if self.stream is None:
            return
        try:
            from .explain.verdict import decide

            verdicts = decide(dataclasses.replace(self.result, explanations=found))
            self.stream("verdict", next(v for v in verdicts if path in v.paths))
        except Exception:  # noqa: BLE001 - what is shown meanwhile never stops the explanation
            pass


def _model_runs(runners: Runners, base: PathRun, info: CaseInfo) -> None:
    """Raise ``CaseError`` when the baseline failed because the function fails on its own inputs, called as
    the user would call it: one error (exit 2) before the other paths run, not the same one on each."""
    from .case import CaseError

    if base.status != "error":
        return
    failure = runners.worker(spec_env(base.spec)).call_failure()
    if failure:
        raise CaseError(f"{info.name}: the function fails on its own inputs ({info.input_source}), called "
                        f"plainly: {failure}")


def _explain_in_env(runners: Runners, result: ComparisonResult, runs: dict[str, PathRun], told: _Told,
                    deadline: float | None = None) -> list | str:
    """The diverging paths explained by the worker of the baseline's environment (``eager@old`` as baseline:
    in environment old, with its JAX capturing every op), in the order compared. A path in another environment
    than the baseline's is explained from both sides' per-op values aligned by provenance (``explain.across``).
    A string where the worker failed."""
    from .explain.across import explain_across
    from .explain.pipeline import share_across
    from .paths import without_env

    env = spec_env(result.baseline)
    paths = _to_explain(result)
    here = [p for p in paths if spec_env(p) == env]
    found: dict[str, Any] = {}
    for against, group in _by_counterpart(result, here).items():  # like against like (explain.pairs)
        mine = result if against == result.baseline else dataclasses.replace(result, baseline=against)
        found.update(_explained_by_lanes(runners, mine, runs, group, told, deadline))
        where = () if env is None else (f"explained in environment {env} ({runners.describe(env)}), where it ran",)
        shared = share_across([found[p] for p in group], [[a for _, a in runs[p].outputs or ()] for p in group])
        for spec, e in zip(group, shared):
            found[spec] = dataclasses.replace(e, path=spec, baseline=against,
                                              notes=tuple(e.notes) + where + _against_note(result, spec, against))
    base_ops: list | str | None = None
    for spec in paths:
        if spec in found:
            continue
        if base_ops is None:
            base_ops = runners.worker(env).capture(without_env(result.baseline))
        found[spec] = explain_across(spec, result.baseline,
                                     runners.worker(spec_env(spec)).capture(without_env(spec)), base_ops,
                                     _where(spec_env(spec), runners), _where(env, runners))
    return [found[p] for p in paths]


def _by_counterpart(result: ComparisonResult, paths: Sequence[str]) -> dict[str, list[str]]:
    """``paths`` grouped by the run each is explained against (``explain.pairs.counterpart``), the baseline's
    first; a path with its counterpart's values bit for bit has nothing to explain (its verdict says so)."""
    from .explain.pairs import counterpart

    groups: dict[str, list[str]] = {result.baseline: []}
    for p in paths:
        against = counterpart(result, p)
        if against == result.baseline or not _same_outputs(result, p, against):
            groups.setdefault(against, []).append(p)
    return {k: v for k, v in groups.items() if v}


def _same_outputs(result: ComparisonResult, a: str, b: str) -> bool:
    from .explain.verdict import same_values

    return same_values(result, a, b)


def _against_note(result: ComparisonResult, spec: str, against: str) -> tuple[str, ...]:
    if against == result.baseline:
        return ()
    mine, theirs = result.path(spec), result.path(against)
    return (f"explained against {against} (on {theirs.device}), which computes as {spec} does: like against like, "
            f"so what differs is {mine.device}'s against {theirs.device}'s, not {result.baseline}'s way of computing",)


def _explained_by_lanes(runners: Runners, result: ComparisonResult, runs: dict[str, PathRun],
                        here: list[str], told: _Told, deadline: float | None = None) -> dict[str, Any]:
    """The paths ``here`` (of the baseline's environment) explained by its workers, each lane's group at the
    same time as the others (``Runners.explain_lanes``); a worker that dies outside any re-run costs its
    group's explanations only (said per path, the comparison stands). An interrupt or the ``deadline``
    (``time.monotonic()``) stops every worker and raises ``Stopped`` with what ``told`` holds by then."""
    from .explain.explanation import PathExplanation
    from .paths import without_env

    env = spec_env(result.baseline)
    backend = result.environment.get("backend")
    bare = {without_env(p): p for p in here}
    lanes = (runners.explain_lanes(list(bare), backend) if env is None
             else [(runners.worker(env), list(bare))])
    agreeing = [without_env(p) for p in _agreeing(result, here)]
    found: dict[str, Any] = {}

    def explain(worker: Any, group: list[str]) -> None:
        try:
            explained = worker.explain([(s, runs[bare[s]].outputs) for s in group], without_env(result.baseline),
                                       runs[result.baseline].outputs, agreeing, list(bare),
                                       told=lambda m: told(bare.get(m[1], m[1]), m[0], m[2]))
        except Exception as e:  # noqa: BLE001 - one lane's failure costs its own paths only
            explained = f"{type(e).__name__}: {e}"
        if isinstance(explained, str):  # the worker died outside any re-run: the comparison stands, said per path
            explained = [PathExplanation(bare[s], result.baseline, f"{bare[s]} could not be explained: {explained}; "
                                         "its comparison above stands", None, None, None, (), ()) for s in group]
        for s, one in zip(group, explained):
            found[bare[s]] = one

    threads = [threading.Thread(target=explain, args=lane, daemon=True) for lane in lanes]
    for t in threads:
        t.start()
    try:
        for t in threads:  # joined a moment at a time: a signal reaches this thread, the deadline is kept
            while t.is_alive():
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError("the explanation ran past its budget")
                t.join(0.25)
    except (KeyboardInterrupt, TimeoutError) as e:
        runners.stop()
        for t in threads:
            t.join(10)
        raise Stopped(dict(told.found), "interrupted" if isinstance(e, KeyboardInterrupt) else str(e)) from e
    return found


def _where(env: str | None, runners: Runners) -> str:
    """'environment old (jax 0.4.38)' or 'this environment (jax 0.9.2)'."""
    from .versions import installed

    if env is None:
        return f"this environment (jax {installed('jax')})"
    return f"environment {env} (jax {runners.packages(env).get('jax', '?')})"


@dataclass(frozen=True)
class Comparison(ComparisonResult):
    """A ``ComparisonResult`` as the API returns it, with what a user calls on it: ``explain()``, and
    its renderings for ``print``, rich consoles and notebooks (the data itself imports none of them)."""

    def explain(self, paths: list[str] | None = None) -> Comparison:
        """This result with an explanation of each diverging path (or of ``paths``): where, why, and
        which fix restores parity, each cause confirmed or refuted by re-running. In process."""
        return explain_result(self, paths)

    def __rich__(self) -> Any:
        from .report.terminal import render

        return render(self)

    def __str__(self) -> str:
        from .report.terminal import render_text

        return render_text(self)

    def _repr_html_(self) -> str:
        from .report.notebook import render_html

        return render_html(self)


class ExplainError(Exception):
    """Explaining crashed its worker; the comparison itself is intact."""


def _to_explain(result: ComparisonResult, paths: Sequence[str] | None = None) -> list[str]:
    """The paths worth explaining: those that differ from the baseline (or the ones asked for)."""
    if paths is not None:
        return [p for p in paths if result.path(p).status == "ok"]
    return [p.spec for p in result.paths if p.verdict in ("differs", "within tolerance") and not p.reference]


def _agreeing(result: ComparisonResult, explained: Sequence[str]) -> list[str]:
    """The compared paths that ran and are not explained, in the baseline's environment: a fix found for one
    path is re-run on them too (it must not move them away from the baseline)."""
    env = spec_env(result.baseline)
    return [p.spec for p in result.paths if p.gated and not p.reference and p.status == "ok" and p.spec != result.baseline
            and p.spec not in explained and spec_env(p.spec) == env]


_Result = TypeVar("_Result", bound=ComparisonResult)


def explain_result(result: _Result, paths: Sequence[str] | None = None) -> _Result:
    """``result`` with explanations of its diverging paths, computed in this process."""
    from .explain.pipeline import explain_paths

    if result._source is None or result._source["case"] is None:
        raise ValueError("this result holds no function to re-run here: use compare() in this process, or "
                         "`jaxparity explain` / compare_case(..., explain=True)")
    case, runs = result._source["case"], result._source["runs"]
    explained = _to_explain(result, paths)
    found = []
    for against, group in _by_counterpart(result, explained).items():  # like against like (explain.pairs)
        base = [a for _, a in runs[against].outputs]
        mine = result if against == result.baseline else dataclasses.replace(result, baseline=against)
        found += [dataclasses.replace(e, notes=tuple(e.notes) + _against_note(result, e.path, against))
                  for e in explain_paths(case.fn, case.args, [(p, [a for _, a in runs[p].outputs]) for p in group],
                                         against, base, _agreeing(mine, group))]
    order = {p: i for i, p in enumerate(explained)}
    found.sort(key=lambda e: order.get(e.path, len(order)))
    from .explain.toward import task
    from .explain.verdict import with_verdicts

    return _toward_ideal(with_verdicts(dataclasses.replace(result, explanations=tuple(found))),
                         lambda *a: task(case, *a))


def _run_each(specs: list[str], run: Callable[[str], PathRun], progress: Progress | None) -> dict[str, PathRun]:
    runs = {}
    for spec in specs:
        if progress:
            progress(spec, None)
        runs[spec] = run(spec)
        if progress:
            progress(spec, runs[spec])
    return runs


def _run_lanes(runners: Runners, specs: list[str], lanes: list[list[str]], timeout: float | None,
               progress: Progress | None) -> tuple[Any, dict[str, PathRun]]:
    """Each lane's specs in order, the lanes at the same time; results in ``specs`` order. An extra worker
    of this environment loads the case while the first one does and, only when its inputs are the first
    worker's bit for bit, runs paths beside the baseline's run in the first: the paths converted into another
    runtime go, costliest first, to whichever of these workers is free (the first once it has run its own);
    without one, the first runs them all in the planned order. The lanes of other environments start once the
    baseline has run. Where the function fails on its own inputs, the lanes stop after the path each is
    running and that error is raised."""
    import threading

    extra = {i: runners.extra_runner(i) for i in range(1, len(lanes)) if all(spec_env(s) is None for s in lanes[i])}
    first = next(iter(extra.values()), None)
    if first is not None:  # a serving process (TensorFlow's imports) starts while this one loads
        first.ahead = [s for s in specs if spec_env(s) is None]
    loading = {i: threading.Thread(target=_quietly, args=(r.load,)) for i, r in extra.items()}
    for t in loading.values():
        t.start()
    lock = threading.Lock()
    # Lanes report from several threads, under ``lock``. What the other lanes report while the baseline runs
    # is held until it has run: a function that fails on its own inputs is one error, with no other path said
    # to have started (None once released); the baseline's own reports are never held.
    held: list[list[tuple[str, PathRun | None]] | None] = [[]]

    def report(spec: str, run: PathRun | None, hold: bool = True) -> None:
        with lock:
            if hold and held[0] is not None:
                held[0].append((spec, run))
            elif progress:
                progress(spec, run)

    runs: dict[str, PathRun] = {}
    info = runners.load()
    home_inputs = runners.home.arrays() if extra else {}
    failed: list[BaseException] = []

    def run_baseline() -> None:
        try:
            runs.update(_run_each(specs[:1], lambda s: runners.run(s, timeout),
                                  lambda s, r: report(s, r, hold=False)))
        except BaseException as e:  # raised below, in this thread, once the lanes have stopped
            failed.append(e)

    baseline = threading.Thread(target=run_baseline)
    baseline.start()  # while the other workers finish loading
    for t in loading.values():
        t.join()
    lanes = [[s for s in lane if s != specs[0]] for lane in lanes]
    notes: list[str] = []
    for i, r in list(extra.items()):
        theirs = _quietly(r.arrays)
        if not _same_arrays(theirs, home_inputs):
            lanes[0] = lanes[0] + lanes[i]  # the case draws other inputs each time it loads: run them at home
            lanes[i] = []
            del extra[i]
            if theirs is not None and theirs.keys() == home_inputs.keys():
                notes.append(_redrawn(theirs, home_inputs))
    runners.twins = list(extra.values())  # explained beside the first worker too (``Runners.explain_lanes``)
    # The paths converted into another runtime are not held to the lane planned for them: each worker of this
    # environment takes the costliest one left whenever it is free, the first once it has run its own JAX
    # paths. Costs are guesses (``Path.cost``); what a model really costs shows here (Keras's MobileNetV3:
    # eager 16 s, 5x its jit, while the second worker sat idle for 12 s).
    queue: list[list[str]] = []
    if extra:
        ours = {s for i in (0, *extra) for s in lanes[i]}
        queue = runners.units([s for s in specs if s in ours])
        queued = {s for unit in queue for s in unit}
        for i in (0, *extra):
            lanes[i] = [s for s in lanes[i] if s not in queued]
    stop = threading.Event()  # the baseline failed: no lane starts another path

    def lane(i: int) -> None:
        mine = list(lanes[i])
        while True:
            if not mine:
                with lock:
                    mine = queue.pop(0) if queue and (i == 0 or i in extra) else []
                if not mine:
                    return
            spec = mine.pop(0)
            if stop.is_set():
                return
            report(spec, None)
            run = extra[i].run(spec, timeout) if i in extra else runners.run(spec, timeout)
            with lock:
                runs[spec] = run
            report(spec, run)

    # The extra workers' lanes start now, beside the baseline; a lane of another environment (or of this
    # worker) after it: its worker may be the one running the baseline, and a worker runs one path at a time.
    threads = [threading.Thread(target=lane, args=(i,)) for i in extra if lanes[i] or queue]
    for t in threads:
        t.start()
    baseline.join()
    try:
        if failed:
            raise failed[0]
        if notes:
            runs[specs[0]] = dataclasses.replace(runs[specs[0]], notes=runs[specs[0]].notes + tuple(notes))
        _model_runs(runners, runs[specs[0]], info)
    except BaseException:
        stop.set()
        for t in threads:
            t.join()
        raise
    with lock:
        for spec, run in held[0] or ():
            if progress:
                progress(spec, run)
        held[0] = None
    later = [threading.Thread(target=lane, args=(i,)) for i in range(1, len(lanes)) if lanes[i] and i not in extra]
    for t in later:
        t.start()
    lane(0)
    for t in threads + later:
        t.join()
    return info, {s: runs[s] for s in specs}


def _redrawn(theirs: dict, mine: dict) -> str:
    """What a second load of the case drew otherwise: the report is of this load's values, and another run
    of the same command reports on others."""
    changed = [k for k in mine if not _same_arrays({k: theirs[k]}, {k: mine[k]})]
    named = ", ".join(changed[:2]) + (f" and {len(changed) - 2} more" if len(changed) > 2 else "")
    return (f"the case drew other values for {named} when loaded again (random weights or inputs without a fixed "
            "seed): this report is of this load's values, and the same command run again reports on others; "
            "draw them from a fixed seed for the same report each run")


def _quietly(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception:
        return None


def _same_arrays(a: dict | None, b: dict) -> bool:
    return a is not None and a.keys() == b.keys() and all(
        np.asarray(a[k]).dtype == np.asarray(b[k]).dtype and np.asarray(a[k]).shape == np.asarray(b[k]).shape
        and np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in a)


def _ulp_says_otherwise(path_err: Any, base_err: Any, closer: str, dtype: np.dtype) -> bool:
    """The max ULP error against the ideal names the other side than ``closer`` (by max abs): the larger values
    decide the one, the smaller ones the other (a bf16 ViT's logits: IREE 1.83e-04 against eager's 1.27e-04, 7
    ULP against 22). ULP distances of 2^p or more (p: the dtype's precision) say nothing of that: a value off
    by a factor of two or of the wrong sign, near zero."""
    import ml_dtypes  # finfo of bfloat16 and of numpy's own floats

    mine, theirs = path_err.max_ulp, base_err.max_ulp
    if mine is None or theirs is None or mine == theirs or dtype_class(dtype) != "float":
        return False
    if max(mine, theirs) >= 2 ** (ml_dtypes.finfo(dtype).nmant + 1):
        return False
    return ("path" if mine < theirs else "baseline") != closer


def _judged(path_err: Any, base_err: Any) -> float:
    """The difference ``closer_to_ideal`` decides on: of the max abs errors, or of the mean ones where those are equal."""
    if path_err.max_abs != base_err.max_abs:
        return abs(path_err.max_abs - base_err.max_abs)
    return abs(path_err.mean_abs - base_err.mean_abs)


def as_declared(ideal: Sequence[tuple[str, np.ndarray]],
                declared: Sequence[tuple[str, np.ndarray]]) -> tuple[tuple[str, np.ndarray], ...]:
    """The ideal's float64 outputs correctly rounded to the dtypes of ``declared`` (the baseline's outputs,
    of the same names in the same order): the f64 row is measured in the output's declared dtype, its ULP
    those of bfloat16 for a bfloat16 output, never float64's."""
    return tuple((n, round_to_dtype(a, b.dtype)) for (n, a), (_, b) in zip(ideal, declared))


def _same_names(a: tuple, b: tuple) -> bool:
    return [n for n, _ in a] == [n for n, _ in b]


def _structure_problem(got: tuple, expected: tuple) -> str | None:
    if [n for n, _ in got] != [n for n, _ in expected]:
        return f"its outputs are {[n for n, _ in got]}, the baseline's are {[n for n, _ in expected]}"
    for (name, g), (_, e) in zip(got, expected):
        if g.shape != e.shape or g.dtype != e.dtype:
            return f"{name} is {g.dtype}{list(g.shape)} here and {e.dtype}{list(e.shape)} in the baseline"
    return None


def build_result(
    info: CaseInfo,
    runs: dict[str, PathRun],
    baseline: str,
    tolerance: Tolerance,
    requested: set[str],
) -> Comparison:
    """Measure every successful run against the baseline run and against the f64 ideal."""
    base = runs[baseline]
    rules = next((r.output_rules for r in runs.values() if r.output_rules), {})
    ideal = runs.get(IDEAL)
    ideal_out = dict(ideal.outputs) if ideal and ideal.status == "ok" and ideal.outputs else {}
    # An integer x / 0 in the program: no ideal there, so no side is nearer it (the ideal run says why).
    judge_ideal = not (ideal and any(n.startswith(IDEAL_UNDEFINED) for n in ideal.notes))
    # Loops and branches that go otherwise in float64: the ideal is another computation, so neither side is
    # nearer it, and the baseline's distance from it is no rounding noise floor (the ideal run says which).
    decides = bool(ideal and any(n.startswith(IDEAL_OTHER_DECISIONS) for n in ideal.notes))
    judge_ideal = judge_ideal and not decides
    # Constants the program rounded at trace time: how far the ideal itself moves, output by output.
    uncertainty = ideal.ideal_uncertainty if ideal and ideal.status == "ok" else None
    moved = uncertainty.moved if uncertainty is not None else {}
    results = []
    for spec, run in runs.items():
        path = make_path(spec)
        is_ref = path.reference and spec != baseline
        # A default path that cannot run here (no TensorFlow) is shown, not failed on.
        gated = not is_ref and spec != baseline and (run.status != "unavailable" or spec in requested)
        if spec == baseline and run.status != "ok":
            gated = True  # without a baseline nothing was shown to agree
        leaves: list[LeafResult] = []
        verdict: str = run.status
        message = run.message
        if run.status == "ok" and base.status != "ok" and spec != baseline:
            verdict, message = "error", f"nothing to compare with: the baseline {baseline} failed"
            gated = False
        elif run.status == "ok":
            assert run.outputs is not None and (base.outputs is not None)
            outputs = run.outputs
            if path.name == IDEAL and spec != baseline and _same_names(outputs, base.outputs):
                outputs = as_declared(outputs, base.outputs)
            problem = _structure_problem(outputs, base.outputs) if spec != baseline else None
            if problem:
                verdict, message = "error", f"output structure differs from {baseline}: {problem}"
            else:
                try:
                    leaves = [_leaf(name, dict(outputs), dict(base.outputs), ideal_out, spec == baseline, tolerance,
                                    rules.get(name), judge_ideal, moved.get(name), decides) for name, _ in outputs]
                    verdict = _verdict(leaves) if spec != baseline else "baseline"
                except UnsupportedDtype as e:  # never "equal" for values nothing can measure
                    leaves, verdict, message = [], "error", f"cannot compare its outputs: {e}"
                    gated = True
        if run.status in ("error", "crashed", "timeout") or (run.status == "unavailable" and gated):
            verdict = run.status if run.status != "unavailable" else "unavailable"
        results.append(
            PathResult(
                spec=spec,
                summary=path.summary,
                reference=path.reference,
                gated=gated,
                status=run.status,
                verdict=verdict,  # type: ignore[arg-type]
                message=message,
                seconds=run.seconds,
                notes=run.notes,
                leaves=tuple(leaves),
                device=run.device,
                callbacks=run.callbacks,
                ideal_uncertainty=run.ideal_uncertainty,
                fault=run.fault,
            )
        )
    output_info = tuple(ArrayInfo(n, str(a.dtype), tuple(a.shape)) for n, a in (base.outputs or ()))
    from .degenerate import find_degenerate

    from .explain.verdict import with_verdicts

    return with_verdicts(Comparison(
        case=info.name,
        source=info.source,
        input_source=info.input_source,
        inputs=info.inputs,
        outputs=output_info,
        baseline=baseline,
        tolerance=tolerance,
        paths=tuple(results),
        environment=info.environment,
        degenerate=(find_degenerate(base.outputs, varied_inputs=info.varied_inputs, batch=info.batch)
                    if base.status == "ok" and base.outputs else ()),
        _source={"case": None, "runs": runs},  # the callers' own, with more in it; the runs group the verdicts
    ))


def _leaf(name: str, outputs: dict[str, np.ndarray], base: dict[str, np.ndarray], ideal: dict[str, np.ndarray],
          is_baseline: bool, tolerance: Tolerance, rule: OutputRule | None, judge_ideal: bool = True,
          moved: float | None = None, decides: bool = False) -> LeafResult:
    """One output leaf against the baseline's and the ideal's; with a ``rule``, each pair is first
    brought to the canonical form the math defines (eigenvectors up to sign...). ``judge_ideal`` False: the
    ideal is undefined somewhere (``IDEAL_UNDEFINED``), so neither side is called closer to it. ``moved``: how
    far the ideal of this output moves with the program's rounded constants replaced (``ideal.constants``);
    where the two sides' errors against it differ by no more, neither is called closer either. ``decides``: the
    ideal takes other loop and branch decisions than the program (``IDEAL_OTHER_DECISIONS``)."""
    got = outputs[name]
    kind = dtype_class(got.dtype)  # raises UnsupportedDtype first, whatever the baseline says
    how = None

    def pair(mine: dict[str, np.ndarray], other: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        nonlocal how
        if rule is None:
            return mine[name], other[name]
        a, b, how = align(rule, mine, other)
        return a, b

    diff = None
    if not is_baseline:
        diff = diff_leaf(*pair(outputs, base), tolerance)
        if rule is not None:  # bit-identical means the raw bits, not the canonical forms
            diff = dataclasses.replace(diff, bitwise_equal=got.tobytes() == base[name].tobytes())
    numeric = name in ideal and kind in ("float", "complex", "int", "uint")
    err = reference_error(*pair(outputs, ideal)) if numeric else None
    base_err = reference_error(*pair(base, ideal)) if numeric else None
    closer = (closer_to_ideal(err, base_err) if err and base_err and not is_baseline and judge_ideal  # type: ignore[arg-type]
              else None)
    uncertain = None
    if closer in ("path", "baseline") and moved and moved >= _judged(err, base_err):
        closer, uncertain = None, moved
    if closer in ("path", "baseline") and _ulp_says_otherwise(err, base_err, closer, got.dtype):
        closer = "mixed"
    return LeafResult(
        name=name,
        dtype=str(got.dtype),
        shape=tuple(got.shape),
        diff=diff,
        error_vs_f64=err,
        baseline_error_vs_f64=base_err,
        closer_to_f64=closer,  # type: ignore[arg-type]
        values=_values(got) if got.size <= 16 else None,
        rule=how,
        ideal_uncertain_by=uncertain,
        ideal_moves_by=moved if moved else None,
        ideal_decides_otherwise=decides and numeric,
    )


def _values(a: np.ndarray) -> tuple:
    """An output's elements as the result model holds them: exact ints, floats, [re, im] pairs."""
    kind = dtype_class(a.dtype)
    flat = a.reshape(-1)
    if kind == "complex":
        return tuple((float(v.real), float(v.imag)) for v in flat)
    if kind in ("int", "uint", "bool"):
        return tuple(int(v) for v in flat)
    return tuple(float(v) for v in flat.astype(np.float64))


def _verdict(leaves: list[LeafResult]) -> str:
    diffs = [lf.diff for lf in leaves if lf.diff is not None]
    if all(d.bitwise_equal for d in diffs):
        return "identical"
    if all(d.n_differ == 0 for d in diffs):
        return "equal"
    return "within tolerance" if all(d.within_tolerance for d in diffs) else "differs"


# -- many inputs ------------------------------------------------------------------------------------

SampleProgress = Callable[[str, int, int], None]  # (spec, samples done, samples in all)


def compare_samples(
    case: str,
    *,
    samples: int | None = None,
    seed: int = 0,
    inputs_dir: str | None = None,
    repeat: int = 1,
    paths: Sequence[str] | str | None = None,
    baseline: str = DEFAULT_BASELINE,
    tolerance: Tolerance | None = None,
    timeout: float | None = None,
    progress: SampleProgress | None = None,
) -> Comparison:
    """Many-inputs mode: every path on every input set (drawn with ``samples``/``seed`` from the
    example inputs' shapes and dtypes, or read from ``inputs_dir``), each path in one worker call so
    a compiled path compiles once. Each path is shown on its worst sample, with ``SampleStats``.
    ``repeat`` runs each path that many times per sample to tell nondeterminism within a path from
    divergence between paths. Paths in other environments are not supported here.
    """
    from .execution.samples import draw_samples, drawn_names, read_samples

    specs, requested = plan_paths(paths, baseline)
    if any(spec_env(s) for s in specs):
        raise ValueError("many-inputs mode runs in this environment only (no NAME@ENV paths)")
    tolerance = tolerance or Tolerance()
    with Runners(case, None) as runners:
        info = runners.load()
        if inputs_dir is not None:
            files = read_samples(inputs_dir)
            labels = [f"{name} (file {i + 1} of {len(files)} in {inputs_dir})" for i, (name, _) in enumerate(files)]
            sets = [arrays for _, arrays in files]
        else:
            keys = runners.home.keys()  # PRNG keys stay as they are: drawn, they would be other keys
            example = {name: x for name, x in runners.home.arrays().items() if name not in keys}
            sets = draw_samples(example, int(samples or 1), seed, info.data)
            labels = [f"sample {i} of {len(sets)} (seed {seed})" for i in range(len(sets))]
        runs: dict[str, list[list[PathRun]]] = {}
        elapsed: dict[str, float] = {}
        runners.home.send_samples(sets)  # to the worker once, for every path
        n = len(sets)
        for spec in specs:
            if progress:
                progress(spec, 0, n)
            # The first sample alone (it pays the compile), then the rest, which the worker sends back in
            # ~20 chunks so the progress bar moves; compiled paths compile once. Throughput is measured
            # after the first sample.
            runs[spec] = [r for part in runners.home.run_many(spec, range(0, 1), repeat, timeout) for r in part]
            if spec == specs[0] and inputs_dir is None:  # the model failing on its own inputs: one error, exit 2
                _model_runs(runners, runs[spec][0][0], info)
            if progress:
                progress(spec, 1, n)
            start = time.perf_counter()
            for part in runners.home.run_many(spec, range(1, n), repeat, timeout, chunk=max(16, n // 20)):
                runs[spec] += part
                if progress:
                    progress(spec, len(runs[spec]), n)
            if n > 1:
                elapsed[spec] = (time.perf_counter() - start) / (n - 1) * n
    drawn = None if inputs_dir is not None else info.sampled(drawn_names(example, info.data))
    varied = inputs_dir is not None or any(sets)
    return aggregate_samples(info, runs, specs[0], tolerance, requested, labels, repeat, elapsed, drawn, varied)


def aggregate_samples(info: CaseInfo, runs: dict[str, list], baseline: str, tolerance: Tolerance,
                      requested: set[str], labels: list[str], repeat: int = 1,
                      elapsed: dict[str, float] | None = None, drawn: str | None = None,
                      varied: bool = True) -> Comparison:
    """Per-sample results -> one result whose paths show their worst sample, with aggregates. ``drawn``:
    what the drawn sets varied ("varying arg1; kept ...")."""
    from .result import SampleStats

    n = len(labels)
    elapsed = elapsed or {}
    per_sample = [build_result(info, {spec: r[i][0] for spec, r in runs.items()}, baseline, tolerance, requested)
                  for i in range(n)]
    def badness(p: PathResult) -> tuple:
        return (not p.passed, p.verdict not in ("baseline", "identical", "equal"),
                max((lf.diff.max_ulp for lf in p.leaves if lf.diff is not None), default=0),
                max((lf.diff.max_abs for lf in p.leaves if lf.diff is not None), default=0.0))

    # Each gated path is shown on its own worst sample; the baseline and the references on the sample
    # of the worst gated path, so the explained divergence has its baseline beside it.
    worst_of = {j: max(range(n), key=lambda i: badness(per_sample[i].paths[j])) for j in range(len(runs))}
    gated = [j for j, p in enumerate(per_sample[0].paths) if p.gated and p.spec != baseline]
    shown = (worst_of[max(gated, key=lambda j: badness(per_sample[worst_of[j]].paths[j]))] if gated else 0)
    paths = []
    worst_runs = {}
    for j, spec in enumerate(runs):
        results = [res.paths[j] for res in per_sample]
        max_ulp = [max((lf.diff.max_ulp for lf in p.leaves if lf.diff is not None), default=0) for p in results]
        worst = worst_of[j] if j in gated else shown
        errored = sum(p.status != "ok" for p in results)
        diverging = sum(p.status == "ok" and p.verdict not in ("baseline", "identical", "equal") for p in results)
        failing = sum(not p.passed for p in results)
        nondet = sum(_repeats_differ(runs[spec][i]) for i in range(n))
        ok = [u for u, p in zip(max_ulp, results) if p.status == "ok"] or [0]
        stats = SampleStats(
            n=n, diverging=diverging, failing=failing, fraction=diverging / n if n else 0.0, worst_sample=worst,
            worst_label=labels[worst],
            ulp_percentiles={str(q): int(np.percentile(ok, q, method="higher")) for q in (50, 90, 99, 100)},
            repeat=repeat, nondeterministic=nondet,
            samples_per_second=n * repeat / elapsed[spec] if elapsed.get(spec) else 0.0, errored=errored,
        )
        p = results[worst]
        notes = p.notes
        if nondet:
            notes += (f"nondeterministic: its {repeat} repeats disagree among themselves on {nondet} of {n} "
                      "samples (independent of the baseline)",)
        if repeat > 1 and not nondet:
            notes += (f"deterministic: {repeat} repeats bitwise identical on every sample",)
        paths.append(dataclasses.replace(p, samples=stats, notes=notes,
                                         seconds=sum(r[0].seconds for r in runs[spec])))
        worst_runs[spec] = runs[spec][worst][0]
    judged = [(p.spec, p.samples) for p in paths if p.samples and not p.reference and p.spec != baseline]
    # A path that ran on no sample has no worst one: it failed on all of them.
    never_ran = [spec for spec, stats in judged if stats.errored == n]
    source_text = "; ".join(f"{spec}: {stats.worst_label}" for spec, stats in judged if spec not in never_ran)
    where = (f"{n} samples" + (f" {drawn}" if drawn else "") + (f"; the worst: {source_text}" if source_text else "")
             + (f"; {', '.join(never_ran)} failed on " + (f"all {n}" if n > 1 else "it") if never_ran else ""))
    from .degenerate import find_degenerate

    base_runs = [r[0] for r in runs[baseline]]
    base_outputs = [r.outputs for r in base_runs if r.status == "ok" and r.outputs]
    degenerate = (find_degenerate(base_outputs[0], base_outputs, varied=varied,
                                  varied_inputs=info.varied_inputs or (varied and n > 1))
                  if base_outputs else ())
    from .explain.verdict import with_verdicts

    return with_verdicts(dataclasses.replace(per_sample[shown], paths=tuple(paths), samples=n, input_source=where,
                                             degenerate=degenerate,
                                             _source={"case": None, "runs": worst_runs, "inputs": None}))


def _repeats_differ(repeats: list[PathRun]) -> bool:
    first = repeats[0]
    for r in repeats[1:]:
        if r.status != first.status or (r.outputs is None) != (first.outputs is None):
            return True
        if r.outputs is not None and first.outputs is not None:
            for (_, a), (_, b) in zip(r.outputs, first.outputs):
                if a.shape != b.shape or a.tobytes() != b.tobytes():
                    return True
    return False
