"""``hunt_case``: load a case, state its domain, search it, and report the worst input of each kind."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..metrics import Tolerance
from .result import Finding, HuntResult, HuntSite

__all__ = ["hunt_case"]

HuntProgress = Callable[[str, Any], None]  # ("search", SearchState) | ("explain", Finding) | ("ready", info)


def hunt_case(
    case: str,
    *,
    paths: Sequence[str] | str,
    baseline: str | None = None,
    budget: int = 256,
    seconds: float | None = None,
    domain: Sequence[str] = (),
    seed: int = 0,
    tolerance: Tolerance | None = None,
    timeout: float | None = None,
    out_dir: str | None = None,
    explain: int = 2,
    batch: int = 24,
    progress: HuntProgress | None = None,
) -> HuntResult:
    """Search the domain of ``case`` (``FILE.py[:FACTORY]``) for the inputs on which ``paths`` (BASELINE,PATH)
    disagree most, within ``budget`` evaluations (each input run on both paths) or ``seconds``.

    ``domain``: ``--domain`` items (``hunt.domain``); none: derived from the example. The worst input of
    each kind of divergence is written to ``out_dir`` as an ``--inputs`` file and, for the ``explain``
    worst, explained as ``jaxparity explain --inputs`` would. Raises ``CaseError`` where the case cannot
    load or its function fails on its own inputs, ``DomainError`` for a domain that cannot be used,
    ``PathOptionError``/``ValueError`` for paths that cannot be hunted with.
    """
    from ..case import CaseError
    from ..comparison import plan_paths
    from ..execution.runners import Runners
    from ..execution.samples import drawn_names
    from ..paths import spec_env
    from .domain import parse_domain
    from .search import Search

    specs = _two_paths(paths, baseline)
    plan_paths(specs, specs[0])  # unknown paths and options: a usage error before anything runs
    if any(spec_env(s) for s in specs):
        raise ValueError("hunt runs both paths in this environment (no NAME@ENV paths)")
    tolerance = tolerance or Tolerance()
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
        example = runner.arrays()
        dom = parse_domain(domain, example, drawn_names(example, info.data))
        varied = dom.names
        plan = runner.task("jaxparity.hunt.probe:plan", varied)
        if progress:
            progress("ready", (dom, plan))
        search = Search(runner, dom, plan, varied, specs[0], specs[1], tolerance, seed, budget, seconds, batch,
                        timeout, (lambda st: progress("search", st)) if progress else None)
        state = search.run()
    # the worst input of each kind of divergence at each output (the search keeps one per hazard site too)
    ranked, seen = [], set()
    for c in sorted(state.archive.values(), key=lambda c: c.divergence.rank, reverse=True):
        if (c.divergence.output, c.divergence.kind) not in seen:
            seen.add((c.divergence.output, c.divergence.kind))
            ranked.append(c)
    notes = list(plan.notes)
    findings = []
    for c in ranked:
        if dom.contains(c.arrays) is None:  # never: every candidate is projected; said if it ever happens
            notes.append(f"evaluation {c.index} lies outside the domain and is not reported")
            continue
        d = c.divergence
        reached = tuple(f"{plan.sites[s].hazard} of {plan.sites[s].describe()}" for s in c.reached)
        findings.append(Finding(d.kind, d.output, d.max_ulp, d.max_abs, d.max_rel, d.scaled, d.n_differ, d.size,
                                d.breaks,
                                c.index, c.origin, d.index, d.baseline_value, d.path_value, d.message, reached))
    if out_dir is not None and findings:
        findings = _save(findings, ranked, out_dir, info.name)
        findings = _explain(findings, case, specs, tolerance, timeout, explain, progress)
    if seconds is not None:
        notes.append(f"stopped by --time {seconds:g}: another machine evaluates another number of inputs in it "
                     "(the same seed and --budget repeat a search exactly)")
    if state.failed_both:
        notes.append(f"{state.failed_both} input{'s' if state.failed_both > 1 else ''} failed on both paths (not "
                     "inputs the model takes): not counted as divergences")
    sites = tuple(HuntSite(s.op, s.primitive, s.hazard, s.what, s.where, s.module, state.reach_count.get(s.id, 0),
                           state.first_reach.get(s.id), state.diverged_at.get(s.id, 0)) for s in plan.sites)
    return HuntResult(info.name, specs[0], specs[1], tuple(dom.describe()), dom.source, seed, budget,
                      state.evaluations, time.perf_counter() - start, tolerance.describe(), tuple(findings),
                      tuple(state.progress), sites, dict(plan.considered), dict(state.origins), state.first_found,
                      dict(state.first_kind), state.failed_both, seconds, 1, tuple(notes), case)


def _two_paths(paths: Sequence[str] | str, baseline: str | None) -> list[str]:
    from ..comparison import _split_paths

    specs = _split_paths(paths) if isinstance(paths, str) else list(paths)
    if baseline is not None and baseline not in specs:
        specs = [baseline, *specs]
    elif baseline is not None:
        specs = [baseline] + [s for s in specs if s != baseline]
    if len(specs) != 2:
        raise ValueError(f"hunt compares two paths, BASELINE,PATH (got {', '.join(specs) or 'none'}): for example "
                         "--paths eager,jit or --paths eager,tflite")
    return specs


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _save(findings: list[Finding], ranked: list[Any], out_dir: str, name: str) -> list[Finding]:
    """Each finding's input as an ``--inputs`` file (the varied leaves; the rest are the case's own)."""
    import dataclasses

    from ..arrayio import save_arrays

    os.makedirs(out_dir, exist_ok=True)
    out = []
    by_index = {c.index: c for c in ranked}
    for i, f in enumerate(findings, 1):
        path = os.path.join(out_dir, f"{i}-{_slug(f.kind)}-{_slug(f.output) or 'outputs'}.safetensors")
        save_arrays(path, by_index[f.evaluation].arrays)
        out.append(dataclasses.replace(f, inputs_file=path))
    return out


def _explain(findings: list[Finding], case: str, specs: list[str], tolerance: Tolerance, timeout: float | None,
             count: int, progress: HuntProgress | None) -> list[Finding]:
    """The ``count`` worst findings explained as ``jaxparity explain --inputs FILE`` would."""
    import dataclasses

    from ..comparison import ExplainError, compare_case
    from ..report.format import explaining_cause

    out = []
    for i, f in enumerate(findings):
        if i >= count or f.kind in ("none", "fails on one side") or f.inputs_file is None:
            out.append(f)
            continue
        if progress:
            progress("explain", f)
        try:
            r = compare_case(case, inputs=f.inputs_file, paths=specs, baseline=specs[0], tolerance=tolerance,
                             timeout=timeout, explain=True)
        except (ExplainError, Exception) as e:  # noqa: BLE001 - the finding stands without its explanation
            out.append(dataclasses.replace(f, explanation=f"could not be explained: {type(e).__name__}: {e}"))
            continue
        if not r.explanations:
            out.append(dataclasses.replace(f, explanation="explain found nothing to explain on this input (the "
                                           "paths agree within the tolerance when run apart)"))
            continue
        e = r.explanations[0]
        loc = e.localization
        lead = loc.lead if loc is not None else None
        main = explaining_cause(e.causes, lead)
        where = None
        if lead is not None:
            where = f"#{lead.op.index} {lead.op.primitive} ({lead.op.user_source or lead.op.source or 'unknown line'})"
        fix = next((x for x in e.fixes if x.verified), None)
        out.append(dataclasses.replace(f, explanation=e.summary, lead=where,
                                       cause=None if main is None else f"{main.title} ({main.status})",
                                       fix=None if fix is None else f"{fix.kind} {fix.spec or fix.description}"))
    return out
