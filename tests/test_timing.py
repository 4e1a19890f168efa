"""A fix's run-time cost: two warm calls timed interleaved (``execution.timing``)."""

import time

import pytest

from jaxparity.execution.timing import relative_cost


def test_a_call_twice_as_long_is_measured_and_the_same_call_is_not():
    slow, fast = (lambda: time.sleep(0.006)), (lambda: time.sleep(0.003))
    cost = relative_cost(slow, fast, budget=0.5)
    assert cost is not None and cost.measurable and 0.3 < cost.ratio < 3, cost
    same = relative_cost(fast, fast, budget=0.5)
    assert same is not None and abs(same.ratio) < 0.5 and same.rounds >= 4


def test_a_cost_the_rounds_contradict_is_not_measured():
    """Medians 8% apart, yet half the rounds, side by side, say the other way: the machine's load, not a cost
    (the same command would print another figure the next time)."""
    turns = iter(range(10**6))
    uneven = lambda: time.sleep(0.0045 if next(turns) % 2 else 0.002)  # noqa: E731 - medians 3.25 ms against 3 ms
    cost = relative_cost(uneven, lambda: time.sleep(0.003), budget=0.5)
    assert cost is not None and abs(cost.ratio) > 0.03 and cost.agree < 0.75 and not cost.measurable, cost
    steady = relative_cost(lambda: time.sleep(0.0045), lambda: time.sleep(0.003), budget=0.5)
    assert steady is not None and steady.agree >= 0.75 and steady.measurable, steady


def test_short_calls_are_timed_in_runs_and_a_call_of_nothing_is_not():
    def spin(n):
        return lambda: sum(range(n))
    cost = relative_cost(spin(4000), spin(1000), budget=0.5, repeat=True)  # as an accelerator's are
    assert cost is not None and cost.calls > 1 and cost.measurable and cost.ratio > 1, cost
    assert relative_cost(spin(4000), spin(1000), budget=0.5) is None  # on the host: left untimed
    assert relative_cost(lambda: None, lambda: None, repeat=True) is None


def test_a_fixs_cost_is_timed_on_the_executable_its_run_compiled(monkeypatch):
    """jit and export time a fix on the executable their run of that function on those arguments compiled
    (the program that gave the numbers), with no compile of their own; another function is compiled."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxparity.execution.inprocess import run_in_process
    from jaxparity.paths import make_path

    def fn(x):
        return jnp.tanh(x) * 2

    args = (np.linspace(-1, 1, 64, dtype=np.float32),)
    runs = {spec: run_in_process(make_path(spec), fn, args) for spec in ("jit", "export:xla_cpu_enable_fast_math=false")}
    assert all(r.status == "ok" for r in runs.values()), runs

    def no_compile(*a, **k):
        raise AssertionError("compiled again")

    with monkeypatch.context() as m:
        m.setattr(jax, "jit", no_compile)
        for spec, run in runs.items():
            call = make_path(spec).warm_call(fn, args)
            np.testing.assert_array_equal(np.asarray(call()[0]), run.outputs[0][1])
        with pytest.raises(AssertionError, match="compiled again"):
            make_path("jit").warm_call(lambda x: fn(x) + 1, args)
