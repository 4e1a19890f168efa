"""A fix's run-time cost: two warm calls timed interleaved (``execution.timing``)."""

import time

from jaxparity.execution.timing import relative_cost


def test_a_call_twice_as_long_is_measured_and_the_same_call_is_not():
    slow, fast = (lambda: time.sleep(0.006)), (lambda: time.sleep(0.003))
    cost = relative_cost(slow, fast, budget=0.5)
    assert cost is not None and cost.measurable and 0.3 < cost.ratio < 3, cost
    same = relative_cost(fast, fast, budget=0.5)
    assert same is not None and abs(same.ratio) < 0.5 and same.rounds >= 4


def test_short_calls_are_timed_in_runs_and_a_call_of_nothing_is_not():
    def spin(n):
        return lambda: sum(range(n))
    cost = relative_cost(spin(4000), spin(1000), budget=0.5, repeat=True)  # as an accelerator's are
    assert cost is not None and cost.calls > 1 and cost.measurable and cost.ratio > 1, cost
    assert relative_cost(spin(4000), spin(1000), budget=0.5) is None  # on the host: left untimed
    assert relative_cost(lambda: None, lambda: None, repeat=True) is None
