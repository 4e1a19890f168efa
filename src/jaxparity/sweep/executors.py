"""Who runs the cells: a local process pool (the default: no server to start) or a Ray cluster.

Both hand each cell to a worker and give its record back to this process, which alone writes the
store, as each cell finishes. A worker that dies takes no cell with it: the local pool is started again
and the cells it held are handed out again (a cell whose worker dies ``MAX_CRASHES`` times is recorded
as crashed); Ray retries the task on another worker. The store keeps a cell once, whoever reports it.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from .cells import Cell, cells_of, run_cell
from .spec import SweepSpec
from .store import Store

__all__ = ["MAX_CRASHES", "run_sweep"]

MAX_CRASHES = 3  # times a cell's worker may die before the cell is recorded as crashed

Progress = Callable[[int, int, Cell, dict[str, Any]], None]


def _crashed(cell: Cell, why: str) -> dict[str, Any]:
    return {"case": cell.case, "sample": cell.sample, "path": cell.path, "key": cell.key, "status": "crashed",
            "verdict": "crashed", "error": why, "seconds": 0.0}


def run_sweep(spec: SweepSpec, store: Store, *, executor: str = "local", jobs: int | None = None,
              address: str | None = None, progress: Progress | None = None) -> dict[str, int]:
    """Run every cell of ``spec`` not yet in ``store``; returns counts: cells, skipped, ran, duplicates."""
    cells = cells_of(spec)
    done = store.done()
    todo = [c for c in cells if c.key not in done]
    counts = {"cells": len(cells), "skipped": len(cells) - len(todo), "ran": 0, "duplicates": 0, "restarts": 0}

    def finished(cell: Cell, record: dict[str, Any]) -> None:
        if store.add(cell, record):
            counts["ran"] += 1
        else:
            counts["duplicates"] += 1
        if progress:
            progress(counts["skipped"] + counts["ran"], len(cells), cell, record)

    if executor == "local":
        _local(todo, spec, jobs or multiprocessing.cpu_count(), finished, counts, store.dir / "logs")
    elif executor == "ray":
        _ray(todo, spec, address, finished)
    else:
        raise ValueError(f"unknown executor {executor!r}: local or ray")
    return counts


def _quiet(log_dir: str) -> None:
    """A pool worker writes what its libraries print (TensorFlow's C++ logging, warnings) into its own
    log in the store, not over the sweep's progress lines."""
    import os

    os.makedirs(log_dir, exist_ok=True)
    fd = os.open(os.path.join(log_dir, f"worker-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _local(todo: list[Cell], spec: SweepSpec, jobs: int, finished: Callable[[Cell, dict], None],
           counts: dict[str, int], log_dir: Path) -> None:
    crashes: dict[str, int] = {}
    queue = list(todo)
    context = multiprocessing.get_context("spawn")  # no JAX state forked into the workers
    while queue:
        with _one_core_each(jobs), ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_quiet,
                                                       initargs=(str(log_dir),)) as pool:
            running: dict[Any, Cell] = {}
            try:
                while queue or running:
                    while queue and len(running) < 4 * jobs:  # a short window: a dead pool loses little
                        running[pool.submit(run_cell, queue[0], spec)] = queue[0]
                        queue.pop(0)  # only once it is in flight: a broken pool raises in submit
                    ready, _ = wait(list(running), return_when=FIRST_COMPLETED)
                    for future in ready:
                        record = future.result()  # raises BrokenProcessPool while the cell is still in flight
                        finished(running.pop(future), record)
            except BrokenProcessPool:
                counts["restarts"] += 1
                for future, cell in running.items():
                    if future.done() and not future.exception():
                        finished(cell, future.result())
                        continue
                    crashes[cell.key] = crashes.get(cell.key, 0) + 1
                    if crashes[cell.key] >= MAX_CRASHES:
                        finished(cell, _crashed(cell, f"its worker process died {MAX_CRASHES} times"))
                    else:
                        queue.insert(0, cell)
                time.sleep(0.1)


@contextmanager
def _one_core_each(jobs: int) -> Iterator[None]:
    """With several workers on one machine, each computes on one thread (XLA's Eigen pool, OpenBLAS,
    OpenMP, TensorFlow): N workers use N cores instead of every worker's thread pools competing for all
    of them. Set in this process's environment while the pool starts its workers (they read it as they
    start, before numpy or JAX load), restored after."""
    import os

    saved = dict(os.environ)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ INFO lines would flood the terminal
    if jobs > 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_cpu_multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
            os.environ.setdefault(var, "1")
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _ray(todo: list[Cell], spec: SweepSpec, address: str | None, finished: Callable[[Cell, dict], None]) -> None:
    try:
        import ray
    except ImportError:
        raise ValueError("the ray executor needs Ray: pip install 'jaxparity[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False)
    task = ray.remote(num_cpus=1, max_retries=MAX_CRASHES, retry_exceptions=False)(run_cell)
    spec_ref = ray.put(spec)
    pending = {task.remote(cell, spec_ref): cell for cell in todo}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            cell = pending.pop(ref)
            try:
                record = ray.get(ref)
            except ray.exceptions.RayError as e:  # retries spent: its workers kept dying
                record = _crashed(cell, f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}")
            finished(cell, record)
