"""A large hunt spread over workers: the budget split into islands, each a whole search with a seed of its
own ((seed, island)), run by the sweep's executors (a local process pool, or a Ray cluster), then merged:
the worst input of each kind over every island, the progress as one timeline, each site's coverage summed.

An island's search is independent of the others, so the merged result is the same whichever worker ran
which island (the islands' own results are reproducible from the seed and budget, as one search is).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..metrics import Tolerance
from .result import HuntResult, HuntSite
from .score import KINDS

__all__ = ["island", "merge", "run_islands"]


def island(case: str, specs: Sequence[str], budget: int, seconds: float | None, domain: Sequence[str], seed: int,
           index: int, tolerance: Tolerance, timeout: float | None, batch: int) -> tuple[HuntResult, dict]:
    """One island: a search of its own budget, seeded by (seed, index). What a pool worker or a Ray task runs."""
    from .search import search_case

    return search_case(case, specs, budget, seconds, domain, (seed, index), tolerance, timeout, batch, island=index)


def _budgets(budget: int, n: int) -> list[int]:
    return [budget // n + (1 if i < budget % n else 0) for i in range(n)]


def run_islands(case: str, specs: Sequence[str], budget: int, seconds: float | None, domain: Sequence[str],
                seed: int, tolerance: Tolerance, timeout: float | None, batch: int, jobs: int, executor: str,
                address: str | None, progress: Any = None) -> tuple[HuntResult, dict]:
    """``jobs`` islands (on Ray: one per CPU of the cluster where ``jobs`` is 1) run and merged."""
    if executor == "local":
        parts = _local(case, specs, budget, seconds, domain, seed, tolerance, timeout, batch, jobs, progress)
    elif executor == "ray":
        parts = _ray(case, specs, budget, seconds, domain, seed, tolerance, timeout, batch, jobs, address, progress)
    else:
        raise ValueError(f"unknown executor {executor!r}: local or ray")
    return merge(parts, budget, seconds)


def _local(case: str, specs: Sequence[str], budget: int, seconds: float | None, domain: Sequence[str], seed: int,
           tolerance: Tolerance, timeout: float | None, batch: int, jobs: int, progress: Any) -> list:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ..sweep.executors import _one_core_each

    budgets = _budgets(budget, jobs)
    context = multiprocessing.get_context("spawn")  # no JAX state forked into the workers
    with _one_core_each(jobs), ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(island, case, list(specs), b, seconds, list(domain), seed, i, tolerance, timeout,
                               batch) for i, b in enumerate(budgets) if b > 0]
        parts = []
        for i, future in enumerate(futures):
            parts.append(future.result())
            if progress:
                progress("island", (i, len(futures), parts[-1][0]))
    return parts


def _ray(case: str, specs: Sequence[str], budget: int, seconds: float | None, domain: Sequence[str], seed: int,
         tolerance: Tolerance, timeout: float | None, batch: int, jobs: int, address: str | None,
         progress: Any) -> list:
    try:
        import ray
    except ImportError:
        raise ValueError("the ray executor needs Ray: pip install 'jaxparity[ray]'") from None
    from ..sweep.executors import MAX_CRASHES

    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False)
    n = jobs if jobs > 1 else max(1, int(ray.cluster_resources().get("CPU", 1)))
    task = ray.remote(num_cpus=1, max_retries=MAX_CRASHES, retry_exceptions=False)(island)
    refs = [task.remote(case, list(specs), b, seconds, list(domain), seed, i, tolerance, timeout, batch)
            for i, b in enumerate(_budgets(budget, n)) if b > 0]
    parts = []
    for i, ref in enumerate(refs):
        parts.append(ray.get(ref))
        if progress:
            progress("island", (i, len(refs), parts[-1][0]))
    return parts


def merge(parts: Sequence[tuple[HuntResult, dict]], budget: int, seconds: float | None) -> tuple[HuntResult, dict]:
    """The islands as one hunt: the worst input of each (output, kind) over all of them, worst first; the
    progress as one timeline (evaluations of every island up to each moment, the worst so far)."""
    results = [r for r, _ in parts]
    inputs: dict = {}
    for _, found in parts:
        inputs.update(found)
    best: dict[tuple[str, str], Any] = {}
    for f in (f for r in results for f in r.findings):
        key = (f.output, f.kind)
        if key not in best or _rank(f) > _rank(best[key]):
            best[key] = f
    findings = tuple(sorted(best.values(), key=_rank, reverse=True))
    timeline = sorted(((s, i, n, sev, kind) for i, r in enumerate(results) for n, sev, kind, s in r.progress))
    latest = [0] * len(results)
    worst: tuple[float, str] = (0.0, "none")
    progress = []
    for s, i, n, sev, kind in timeline:
        latest[i] = n
        if (KINDS.index(kind), sev) > (KINDS.index(worst[1]), worst[0]):
            worst = (sev, kind)
        progress.append((sum(latest), worst[0], worst[1], s))
    sites: dict[tuple[int | None, int, str], HuntSite] = {}
    for site in (site for r in results for site in r.sites):
        where = (site.loop, site.op, site.hazard)
        if where in sites:
            old = sites[where]
            first = min((x for x in (old.first, site.first) if x is not None), default=None)
            site = dataclasses.replace(old, reached=old.reached + site.reached, diverged=old.diverged + site.diverged,
                                       first=first)
        sites[where] = site
    operators: dict[str, int] = {}
    first_kind: dict[str, int] = {}
    for r in results:
        for k, v in r.operators.items():
            operators[k] = operators.get(k, 0) + v
        for k, v in r.first_kind.items():
            first_kind[k] = min(first_kind.get(k, v), v)
    first_found = [(r.first_found, i) for i, r in enumerate(results) if r.first_found is not None]
    notes = list(dict.fromkeys(n for r in results for n in r.notes))
    notes.append(f"{len(results)} islands, each a search of its own seed ({results[0].seed}, island) and "
                 f"{', '.join(str(r.evaluations) for r in results)} evaluations; a finding's evaluation, and the "
                 "first evaluation of a kind, count within its island")
    head = results[0]
    merged = dataclasses.replace(head, budget=budget, evaluations=sum(r.evaluations for r in results),
                                 seconds=max(r.seconds for r in results), findings=findings, progress=tuple(progress),
                                 sites=tuple(sites.values()), operators=operators, first_kind=first_kind,
                                 first_found=min(first_found)[0] if first_found else None,
                                 first_island=min(first_found)[1] if first_found else None,
                                 failed_both=sum(r.failed_both for r in results), time_limit=seconds,
                                 islands=len(results), notes=tuple(notes))
    return merged, inputs


def _rank(f: Any) -> tuple:
    return (f.breaks, KINDS.index(f.kind), f.scaled, f.max_ulp)
