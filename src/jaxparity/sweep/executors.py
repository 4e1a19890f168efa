"""Who runs the cells: a local process pool (the default: no server to start) or a Ray cluster.

Both hand each cell to a worker and give its record back to this process, which alone writes the
store, as each cell finishes. A worker that dies takes no cell with it: a local worker is replaced and
the cell it held is handed out again (a cell whose worker dies ``MAX_CRASHES`` times is recorded as
crashed); Ray retries the task on another worker. The store keeps a cell once, whoever reports it.
"""

from __future__ import annotations

import multiprocessing
from collections import OrderedDict, deque
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


class _Worker:
    """One worker process of the local pool, the cell it holds, and what it has loaded."""

    def __init__(self, spec: SweepSpec, log_dir: Path, jobs: int) -> None:
        context = multiprocessing.get_context("spawn")  # no JAX state forked into the workers
        self.conn, child = context.Pipe()
        with _one_core_each(jobs):
            self.process = context.Process(target=_serve, args=(child, spec, str(log_dir)), daemon=True)
            self.process.start()
        child.close()
        self.cell: Cell | None = None
        self.ready = False  # it has started (imported what a cell needs) and said so
        self.since = 0.0
        self.cases: set[str] = set()  # cases this worker has loaded (it keeps a few)

    def give(self, cell: Cell) -> None:
        self.cell, self.since = cell, time.monotonic()
        self.conn.send(cell)

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _serve(conn: Any, spec: SweepSpec, log_dir: str) -> None:
    """A worker's loop: a cell in, its record out, until told to stop; then it leaves at once, as a
    compare worker does (every record is sent; tearing down JAX and TensorFlow takes a second)."""
    import os
    import sys

    _quiet(log_dir)
    from ..cache import jax_cache

    jax_cache()
    conn.send("ready")
    while True:
        try:
            cell = conn.recv()
        except EOFError:
            break
        if cell is None:
            break
        conn.send(run_cell(cell, spec))
    conn.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class _Costs:
    """What the workers have paid so far (seconds): to load a case and warm it up (its first cells on a
    worker, which compile what later cells reuse), and per cell once warm."""

    def __init__(self) -> None:
        self.load: dict[str, float] = {}  # case -> load, plus the extra its first cells cost
        self.cell: dict[str, tuple[float, int]] = {}  # case -> (summed seconds of warm cells, warm cells)
        self._first: dict[str, list[float]] = {}  # case -> seconds of first cells (load excluded)

    def add(self, cell: Cell, record: dict[str, Any]) -> None:
        load = record.get("load_seconds") or 0.0
        seconds = max(0.0, record.get("seconds", 0.0) - load)
        if load:
            self.load[cell.case] = max(load, self.load.get(cell.case, 0.0))
        if record.get("warm"):
            total, n = self.cell.get(cell.case, (0.0, 0))
            self.cell[cell.case] = (total + seconds, n + 1)
        else:
            self._first.setdefault(cell.case, []).append(seconds)

    def worth_loading(self, case: str, cells_left: int) -> bool:
        """Whether a second worker should load ``case`` for its ``cells_left`` cells: when sharing them
        saves more than loading and warming it up costs. Unknown costs: wait until they are known."""
        if case not in self.load or case not in self.cell:
            return False
        total, n = self.cell[case]
        steady = total / n
        warm_up = sum(max(0.0, s - steady) for s in self._first.get(case, []))
        return cells_left * steady / 2 > self.load[case] + warm_up


class _Queue:
    """The cells not yet handed out, and where each should go (``take``). Grouped by case, then by input
    set in spec order; a pick costs a look at each case, not at each cell (sweeps have many more input
    sets than cases)."""

    def __init__(self, cells: list[Cell]) -> None:
        self.sets: dict[str, OrderedDict[int, deque[Cell]]] = {}  # case -> input set -> its cells left
        for cell in cells:
            self.sets.setdefault(cell.case, OrderedDict()).setdefault(cell.sample, deque()).append(cell)
        self.free: dict[str, OrderedDict[int, None]] = {c: OrderedDict.fromkeys(sets) for c, sets in self.sets.items()}
        self.left = {case: sum(map(len, sets.values())) for case, sets in self.sets.items()}
        self.owners: dict[tuple[str, int], Any] = {}  # input set with cells left -> who ran its baseline
        self.open: dict[int, list[tuple[str, int]]] = {}  # id(worker) -> its input sets with cells left
        self.workers: dict[int, Any] = {}  # id(worker) -> the workers that have taken cells, while they live

    def __len__(self) -> int:
        return sum(self.left.values())

    def put_back(self, cell: Cell) -> None:
        """A cell whose worker died: first in line again, its input set anyone's."""
        self.sets[cell.case].setdefault(cell.sample, deque()).appendleft(cell)
        self.sets[cell.case].move_to_end(cell.sample, last=False)
        self.left[cell.case] += 1
        self.drop_owner(cell.case, cell.sample)
        self.free[cell.case][cell.sample] = None
        self.free[cell.case].move_to_end(cell.sample, last=False)

    def drop_owner(self, case: str, sample: int) -> None:
        owner = self.owners.pop((case, sample), None)
        if owner is not None and (case, sample) in self.open.get(id(owner), []):
            self.open[id(owner)].remove((case, sample))

    def forget(self, worker: Any) -> None:
        """A worker that is gone: the input sets it held are anyone's."""
        self.workers.pop(id(worker), None)
        for case, sample in self.open.pop(id(worker), []):
            self.owners.pop((case, sample), None)
            self.free[case][sample] = None

    def take(self, worker: Any, costs: _Costs, force: bool = False) -> Cell | None:
        """The next cell for ``worker``, or None: it waits. A worker keeps to what it has loaded: first
        the other paths of an input set it has run (the baseline's outputs are still in it), then new
        input sets of a case it has loaded, then a case no worker has loaded yet. Only then does it take
        cells of a case another worker holds, when sharing them saves more than loading the case costs
        (or ``force``), from the far end of that case's queue. Each model is then loaded by as few
        workers as pays (load time, memory) and each baseline computed once."""
        for case, sample in self.open.get(id(worker), []):
            return self._pop(worker, case, sample)
        for case in worker.cases:
            if self.free.get(case):
                return self._pop(worker, case, next(iter(self.free[case])))
        held = {c for w in self.workers.values() if w is not worker for c in w.cases}
        for case, free in self.free.items():
            if free and case not in held:
                return self._pop(worker, case, next(iter(free)))
        waiting = {case: n for case, n in self.left.items() if n}
        if not waiting:
            return None
        busiest = max(waiting, key=waiting.__getitem__)
        if not force and not costs.worth_loading(busiest, waiting[busiest]):
            return None
        sets = self.free[busiest] or self.sets[busiest]  # an input set nobody runs, else any
        return self._pop(worker, busiest, next(reversed(sets)))

    def _pop(self, worker: Any, case: str, sample: int) -> Cell:
        self.workers[id(worker)] = worker
        worker.cases.add(case)
        cells = self.sets[case][sample]
        cell = cells.popleft()
        self.left[case] -= 1
        if (case, sample) not in self.owners:
            self.owners[(case, sample)] = worker
            self.free[case].pop(sample, None)
            self.open.setdefault(id(worker), []).append((case, sample))
        if not cells:  # the input set is done: nobody holds it any more
            del self.sets[case][sample]
            self.drop_owner(case, sample)
        return cell


def _local(todo: list[Cell], spec: SweepSpec, jobs: int, finished: Callable[[Cell, dict], None],
           counts: dict[str, int], log_dir: Path) -> None:
    """Cells handed one at a time to ``jobs`` worker processes, each kept to the cases it has loaded
    (``_Queue.take``). A worker that dies is replaced and its cell handed out again; one whose cell runs past
    the cell's time limit (three times the spec's ``timeout``: baseline, path and explanation) is
    killed and the cell recorded as timed out."""
    from multiprocessing.connection import wait as wait_any

    queue = _Queue(todo)
    crashes: dict[str, int] = {}
    costs = _Costs()
    limit = 3 * spec.timeout if spec.timeout else None
    workers = [_Worker(spec, log_dir, jobs) for _ in range(min(jobs, len(queue)))]

    def hand_out(worker: _Worker, force: bool = False) -> None:
        cell = queue.take(worker, costs, force)
        if cell is not None:
            try:
                worker.give(cell)
            except OSError:  # it died idle: its sentinel is ready, and replace() hands the cell out again
                pass

    stillborn = [0]  # workers in a row that died before they started

    def replace(worker: _Worker, record: dict[str, Any] | None) -> None:
        cell = worker.cell
        worker.stop(kill=True)
        if not worker.ready:
            stillborn[0] += 1
            if stillborn[0] >= MAX_CRASHES:
                raise ValueError(f"the sweep's worker processes die as they start ({stillborn[0]} in a row); "
                                 f"what they printed is in {log_dir}. A script that starts a sweep needs an "
                                 "`if __name__ == '__main__':` guard (workers are spawned and import it)")
        queue.forget(worker)
        counts["restarts"] += 1
        if cell is not None:
            if record is not None:
                finished(cell, record)
            else:
                crashes[cell.key] = crashes.get(cell.key, 0) + 1
                if crashes[cell.key] >= MAX_CRASHES:
                    finished(cell, _crashed(cell, f"its worker process died {MAX_CRASHES} times"))
                else:
                    queue.put_back(cell)
        workers.remove(worker)
        if queue:
            fresh = _Worker(spec, log_dir, jobs)
            workers.append(fresh)
            hand_out(fresh)

    try:
        for worker in workers:
            hand_out(worker)
        while any(w.cell is not None for w in workers):
            busy = [w for w in workers if w.cell is not None]
            ready = wait_any([w.conn for w in busy] + [w.process.sentinel for w in busy],
                             timeout=None if limit is None else 1.0)
            for worker in busy:
                if worker.conn in ready:
                    try:
                        record = worker.conn.recv()
                    except (EOFError, OSError):  # died while sending: its sentinel says so next
                        replace(worker, None)
                        continue
                    if record == "ready":
                        worker.ready, stillborn[0] = True, 0
                        continue
                    cell, worker.cell = worker.cell, None
                    assert cell is not None
                    costs.add(cell, record)
                    finished(cell, record)
                elif worker.process.sentinel in ready:
                    replace(worker, None)
                elif limit is not None and time.monotonic() - worker.since > limit:
                    assert worker.cell is not None
                    replace(worker, {**_crashed(worker.cell, f"timed out after {limit:g} s (three times the "
                                                "spec's timeout); its worker was stopped"), "status": "timeout",
                                     "verdict": "timeout"})
            for worker in [w for w in workers if w.cell is None]:  # what it may take now (costs are known)
                hand_out(worker)
            if queue and not any(w.cell is not None for w in workers):
                hand_out(workers[0], force=True)
    finally:
        for worker in workers:
            worker.stop()


# What a pool worker may be told about threads. Only libraries whose results do not depend on their
# thread count: OpenBLAS, MKL and OpenMP split a product over its rows and columns, never its sums.
# XLA's and TensorFlow's Eigen pools are left alone: Eigen may split a contraction's inner dimension
# by thread count, which changes a float32 sum's order, so a sweep with --jobs 2 measured other
# numbers than one with --jobs 1 (an LSTM's jit path 15 ULP against 7) and than `compare`.
_THREAD_NEUTRAL = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _one_thread_env(environ: dict[str, str]) -> dict[str, str]:
    """What a pool worker is started with beside ``environ``: TensorFlow's C++ INFO lines off and one
    thread for the libraries whose thread count cannot change a number (``_THREAD_NEUTRAL``)."""
    env = {"TF_CPP_MIN_LOG_LEVEL": environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
    for var in _THREAD_NEUTRAL:
        env[var] = environ.get(var, "1")
    return env


@contextmanager
def _one_core_each(jobs: int) -> Iterator[None]:
    """With several local workers, what ``_one_thread_env`` says is set in this process's environment
    while the pool starts a worker (it reads it as it starts, before numpy or JAX load), restored after.
    The numbers a worker computes are those of one worker and of `compare`, whatever ``jobs`` is."""
    import os

    saved = dict(os.environ)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if jobs > 1:
        os.environ.update(_one_thread_env(saved))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


DEPTH = 2


class _Slot:
    """One CPU of a Ray node, as the driver schedules it: the cases sent there, the cell in flight."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.cases: set[str] = set()
        self.inflight = 0  # tasks sent to it not yet back: up to DEPTH, so the node never waits for the driver


def _ray_slots(ray: Any, slots: list[_Slot]) -> list[_Slot]:
    """``slots`` brought up to date with the cluster: one per CPU of each live node, a dead node's gone."""
    alive: dict[str, int] = {n["NodeID"]: int(n.get("Resources", {}).get("CPU", 0))
                             for n in ray.nodes() if n.get("Alive")}
    kept = [s for s in slots if s.node in alive]
    for node, cpus in alive.items():
        kept += [_Slot(node) for _ in range(cpus - sum(s.node == node for s in kept))]
    return kept


def _ray(todo: list[Cell], spec: SweepSpec, address: str | None, finished: Callable[[Cell, dict], None]) -> None:
    """One Ray task per cell, as many in flight as the cluster has CPUs, each sent to the node that
    already holds its case (``_Queue.take``, with a node's CPUs for workers): soft node affinity, so a task
    whose node is gone runs elsewhere, and Ray retries a task whose worker dies."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError:
        raise ValueError("the ray executor needs Ray: pip install 'jaxparity[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False)
    task = ray.remote(num_cpus=1, max_retries=MAX_CRASHES, retry_exceptions=False)(run_cell)
    spec_ref = ray.put(spec)
    queue = _Queue(todo)
    costs = _Costs()
    slots = _ray_slots(ray, [])
    checked = time.monotonic()
    pending: dict[Any, tuple[Cell, _Slot]] = {}

    def submit(slot: _Slot, force: bool = False) -> None:
        cell = queue.take(slot, costs, force)
        if cell is None:
            return
        slot.inflight += 1
        where = NodeAffinitySchedulingStrategy(node_id=slot.node, soft=True)
        pending[task.options(scheduling_strategy=where).remote(cell, spec_ref)] = (cell, slot)

    while queue or pending:
        for _ in range(DEPTH):
            for slot in [s for s in slots if s.inflight < DEPTH]:
                submit(slot)
        if queue and not pending:
            if not slots:
                raise ValueError("the Ray cluster has no live node with a CPU")
            submit(slots[0], force=True)
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            cell, slot = pending.pop(ref)
            slot.inflight -= 1
            try:
                record = ray.get(ref)
                costs.add(cell, record)
            except ray.exceptions.RayError as e:  # retries spent: its workers kept dying
                record = _crashed(cell, f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}")
            finished(cell, record)
        if time.monotonic() - checked < 1.0 and any(s.inflight < DEPTH for s in slots):
            continue  # the cluster was looked at within the second
        checked = time.monotonic()
        live = _ray_slots(ray, slots)
        for gone in [s for s in slots if s not in live]:  # its in-flight task runs elsewhere (soft affinity)
            queue.forget(gone)
            for ref, (cell, slot) in list(pending.items()):
                if slot is gone:
                    pending[ref] = (cell, _Slot(""))  # counted, not a slot to refill
        slots = live
