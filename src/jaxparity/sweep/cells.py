"""One cell of a sweep: a case, one input set, one path; and how a worker runs it.

A cell runs the baseline and its path on that input set (in the worker's process), compares them as
``compare`` does and, when asked and they differ, explains the path: the first op that diverges on its
own and the cause. The baseline's outputs are kept per worker for the other paths of the same input set.
Whatever happens, a cell returns a record: a failing path is a result, not a lost cell.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .spec import SweepSpec

__all__ = ["Cell", "cells_of", "run_cell"]


@dataclass(frozen=True)
class Cell:
    case: str
    sample: int  # -1: the case's example inputs
    path: str

    @property
    def key(self) -> str:
        return f"{self.case}|{self.sample}|{self.path}"

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.key.encode()).hexdigest()[:16]


def cells_of(spec: SweepSpec) -> list[Cell]:
    return [Cell(c, s, p) for c in spec.cases for s in spec.input_sets for p in spec.paths]


_CASES: OrderedDict[str, Any] = OrderedDict()  # per worker process: loaded cases
_BASELINES: OrderedDict[tuple, Any] = OrderedDict()  # (case, sample, baseline) -> PathRun
_RAN: set[tuple[str, str]] = set()  # (case, path) this worker has run: its compiles are warm


def _case(name: str, record: dict[str, Any] | None = None) -> Any:
    from ..case import load_case

    if name not in _CASES:
        start = time.perf_counter()
        _CASES[name] = load_case(name)
        if record is not None:  # what loading cost this worker: the scheduler weighs it against the cells left
            record["load_seconds"] = time.perf_counter() - start
        while len(_CASES) > 4:
            _CASES.popitem(last=False)
    return _CASES[name]


def _example(case: Any) -> dict[str, np.ndarray]:
    """The case's input leaves on the host as ``compare --samples`` has them (``pytree.host``): a PRNG key
    (an NNX module's Rngs) as its key data, which no input set replaces (``InputSlots`` keeps the key)."""
    from ..pytree import argument_leaves, host

    return {n: host(x) for n, x in argument_leaves(case.args)}


def _inputs(case: Any, cell: Cell, spec: SweepSpec) -> tuple:
    from ..execution.samples import args_with, draw_sample

    if cell.sample < 0:
        return case.args
    example = _example(case)
    return args_with(case.args, draw_sample(example, spec.seed, cell.sample, case.data_leaves()),
                     f"input set {cell.sample}")


def _record(cell: Cell) -> dict[str, Any]:
    return {**asdict(cell), "key": cell.key, "status": "error", "verdict": None, "max_ulp": None, "n_differ": None,
            "size": None, "cause": None, "op": None, "line": None, "summary": None, "error": None, "seconds": 0.0}


def _run_elsewhere(cell: Cell, spec: SweepSpec) -> dict[str, Any]:
    """A cell whose path runs in another environment: the case's isolated workers, one per environment
    (built once, cached), fed this input set bit for bit (``compare_case``)."""
    import tempfile

    from ..arrayio import save_arrays
    from ..comparison import compare_case
    from ..execution.samples import draw_sample

    start = time.perf_counter()
    record = _record(cell)
    try:
        with tempfile.TemporaryDirectory(prefix="jaxparity-sweep-") as tmp:
            inputs = None
            if cell.sample >= 0:
                case = _case(cell.case)
                example = _example(case)
                drawn = draw_sample(example, spec.seed, cell.sample, case.data_leaves())
                inputs = f"{tmp}/inputs.npz"
                save_arrays(inputs, {**example, **drawn})
            result = compare_case(cell.case, inputs=inputs, paths=[cell.path], baseline=spec.baseline,
                                  tolerance=spec.tolerance, timeout=spec.timeout, envs=spec.envs)
        p = result.path(cell.path)
        worst = p.worst
        record.update(status=p.status, verdict=p.verdict, error=p.message if p.status != "ok" else None,
                      max_ulp=None if worst is None or worst.diff is None else int(worst.diff.max_ulp),
                      n_differ=sum(lf.diff.n_differ for lf in p.leaves if lf.diff is not None) if p.leaves else None,
                      size=sum(int(np.prod(lf.shape)) for lf in p.leaves) if p.leaves else None,
                      summary="ran in another environment: compared, not explained" if spec.explain else None,
                      **_shows(result, None))
    except Exception as e:
        record.update(error=f"{type(e).__name__}: {e}".splitlines()[0][:500])
    record["seconds"] = time.perf_counter() - start
    return record


def _shows(result: Any, base: Any) -> dict[str, Any]:
    """What the store keeps of whether the cell's comparison shows the model: the baseline's degenerate
    outputs on this input set (``degenerate``: all NaN, constant; "hides: " where every output is) and
    a digest of the baseline's outputs, so that the summary finds outputs the same on every input set
    of a case (a zero head), which no single cell can see."""
    import hashlib

    found = result.degenerate
    text = None
    if found:
        text = ("hides: " if any(d.hides for d in found) else "") + "; ".join(d.text for d in found)
    digest = None
    if base is not None and base.outputs:
        h = hashlib.sha1()
        for name, a in base.outputs:
            a = np.ascontiguousarray(a)
            h.update(f"{name}:{a.dtype}:{a.shape}".encode())
            h.update(a.tobytes())
        digest = h.hexdigest()[:16]
    return {"degenerate": text, "baseline_digest": digest}


def run_cell(cell: Cell, spec: SweepSpec) -> dict[str, Any]:
    """The cell's record (plain values: what the store keeps), plus ``arrays`` for a diverging cell."""
    from ..case import Case
    from ..comparison import build_result, explain_result
    from ..execution.runs import case_info
    from ..execution.inprocess import run_in_process
    from ..paths import make_path, spec_env
    from ..paths.staging import compile_once

    if spec_env(cell.path) or any(k in make_path(cell.path).options for k in ("serve_env", "load_env")):
        return _run_elsewhere(cell, spec)
    start = time.perf_counter()
    record = _record(cell)
    try:
        case = _case(cell.case, record)
        record["warm"] = (cell.case, cell.path) in _RAN  # for the scheduler: a cell without first compiles
        _RAN.add((cell.case, cell.path))
        args = _inputs(case, cell, spec)
        here = Case(case.fn, args, case.name, case.source, f"input set {cell.sample}" if cell.sample >= 0 else
                    case.input_source, roles=case.roles)
        base_key = (cell.case, cell.sample, spec.baseline)
        base = _BASELINES.get(base_key)
        # The input sets of a case share their shapes: jit and export compile once per case and path in
        # this worker, as in many-inputs mode, and run each input set on that executable.
        with compile_once():
            if base is None:
                base = run_in_process(make_path(spec.baseline), case.fn, args, spec.timeout)
                _BASELINES[base_key] = base
                while len(_BASELINES) > 16:
                    _BASELINES.popitem(last=False)
            run = run_in_process(make_path(cell.path), case.fn, args, spec.timeout)
        runs = {spec.baseline: base, cell.path: run}
        result = build_result(case_info(here), runs, spec.baseline, spec.tolerance, {cell.path})
        p = result.path(cell.path)
        worst = p.worst
        record.update(status=p.status, verdict=p.verdict, error=p.message if p.status != "ok" else None,
                      max_ulp=None if worst is None or worst.diff is None else int(worst.diff.max_ulp),
                      n_differ=sum(lf.diff.n_differ for lf in p.leaves if lf.diff is not None) if p.leaves else None,
                      size=sum(int(np.prod(lf.shape)) for lf in p.leaves) if p.leaves else None,
                      **_shows(result, base))
        if p.status == "ok" and p.verdict in ("differs", "within tolerance") and spec.explain:
            import dataclasses

            result = dataclasses.replace(result, _source={"case": here, "runs": runs})
            with compile_once():  # what depends only on the program is made once per case and path here
                (e,) = explain_result(result, [cell.path]).explanations
            first = e.localization.lead if e.localization is not None else None
            confirmed = [c for c in e.causes if c.status in ("confirmed", "partly", "noise")]
            record.update(cause=confirmed[0].title if confirmed else "unknown", summary=e.summary,
                          op=f"#{first.op.index} {first.op.primitive}" if first is not None else None,
                          line=(first.op.user_source or first.op.source) if first is not None else None)
        if p.status == "ok" and p.verdict in ("differs", "within tolerance"):
            assert base.outputs is not None and run.outputs is not None  # compared, so both ran
            record["arrays"] = {**{f"{spec.baseline}/{n}": a for n, a in base.outputs},
                                **{f"{cell.path}/{n}": a for n, a in run.outputs}}
    except Exception as e:  # the case itself failed to load or to run: the cell says so
        record.update(status="error", error=f"{type(e).__name__}: {e}".splitlines()[0][:500],
                      summary=traceback.format_exc(limit=3)[-2000:])
    record["seconds"] = time.perf_counter() - start
    return record
