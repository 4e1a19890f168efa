"""Running many harnesses: run, audit and classify each, in this process or in worker processes.

Workers are separate processes (spawned, each importing JAX once) given interleaved slices of the
harness list by name, so the slow groups (linear algebra, convolutions) spread over all of them.
Only the small ``Outcome`` records come back; the arrays stay in the worker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from .classify import Outcome, classify
from .harness import run_harness

__all__ = ["run_one", "run_suite"]

Progress = Callable[[int, int, Outcome], None]  # (done, total, latest)


def run_one(h: Any) -> Outcome:
    """Run, audit and classify one harness."""
    return classify(run_harness(h), h.dyn_fun)


def _worker(names: list[str]) -> list[Outcome]:
    import warnings

    from .corpus import load_corpus

    warnings.filterwarnings("ignore")
    wanted = set(names)
    return [run_one(h) for h in load_corpus() if h.fullname in wanted]


def run_suite(harnesses: Sequence[Any], *, jobs: int = 1, progress: Progress | None = None) -> list[Outcome]:
    """Every harness's ``Outcome``, in the order given; ``jobs`` > 1 runs them in that many
    worker processes (chunks of about 25 harnesses, so progress keeps coming)."""
    total = len(harnesses)
    outcomes: dict[str, Outcome] = {}
    if jobs <= 1:
        for h in harnesses:
            outcomes[h.fullname] = run_one(h)
            if progress:
                progress(len(outcomes), total, outcomes[h.fullname])
    else:
        import multiprocessing

        names = [h.fullname for h in harnesses]
        n_chunks = max(jobs, total // 25)
        chunks = [names[i::n_chunks] for i in range(n_chunks)]
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_worker, c) for c in chunks if c]
            for f in as_completed(futures):
                for o in f.result():
                    outcomes[o.fullname] = o
                    if progress:
                        progress(len(outcomes), total, o)
    return [outcomes[h.fullname] for h in harnesses]

