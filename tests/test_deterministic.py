"""The same command gives the same explanation under any load (issue 39 item 6): blame's budget is counted in
work (ops replayed, weighted by size: ``localize.work``), not seconds, and where it cuts, it says so."""

import multiprocessing
import re
from pathlib import Path

import pytest

import jaxparity
from jaxparity.case import load_case
from jaxparity.localize import blame as blame_module
from jaxparity.report.terminal import render_text

LOOPS = Path(__file__).parent / "cases" / "loops.py"


def _spin(stop):
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def why(factory: str) -> str:
    """The whole report, as printed: the table (a path's seconds are --verbose's), the findings, the
    explanation (a fix's cost is --verbose's too)."""
    case = load_case(f"{LOOPS}:{factory}")
    return render_text(jaxparity.compare(case.fn, *case.args, paths=["eager", "jit"]).explain(), width=100)


@pytest.mark.slow
def test_the_same_explanation_on_an_idle_and_a_loaded_machine(monkeypatch):
    # A budget that cuts the per-iteration blame of the scan part of the way, as a small time budget did:
    # then the same number of iterations is measured however busy the machine is.
    import jax

    from jaxparity.localize.work import op_units

    case = load_case(f"{LOOPS}:make_nn_scan_bf16")
    (loop,) = [e for e in jax.make_jaxpr(case.fn)(*case.args).jaxpr.eqns if e.primitive.name == "scan"]
    monkeypatch.setattr(blame_module, "ITERATION_BUDGET", 2.5 * op_units(loop))  # a few of its 5 iterations
    idle = why("make_nn_scan_bf16")
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    busy = [spawn.Process(target=_spin, args=(stop,)) for _ in range(2)]
    for p in busy:
        p.start()
    try:
        loaded = why("make_nn_scan_bf16")
    finally:
        stop.set()
        for p in busy:
            p.join()
    assert loaded == idle
    assert re.search(r"[1-4] of the 5 iterations that add an error of their own injected alone, largest first, "
                     r"within the work budget", " ".join(idle.split())), idle


def test_an_ops_units_grow_with_what_it_computes():
    import jax
    import jax.numpy as jnp

    from jaxparity.localize.work import op_units

    def eqn(fn, *shapes):
        return jax.make_jaxpr(fn)(*(jnp.zeros(s, jnp.float32) for s in shapes)).jaxpr.eqns[0]

    small, big = eqn(jnp.matmul, (8, 8), (8, 8)), eqn(jnp.matmul, (512, 512), (512, 512))
    assert op_units(small) == pytest.approx(1.0, abs=0.01) and op_units(big) > 800  # 512³ multiply-adds
    scan = jax.make_jaxpr(lambda x: jax.lax.scan(lambda c, _: (c @ c, None), x, None, length=10)[0])(
        jnp.zeros((512, 512), jnp.float32)).jaxpr.eqns[0]
    assert op_units(scan) > 10 * op_units(big) * 0.99
