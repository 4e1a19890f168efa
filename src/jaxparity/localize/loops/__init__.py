"""Localization inside control flow: ``scan`` (``nn.scan``, ``nnx.scan``, ``fori_loop`` with static
bounds), ``while`` (``fori_loop`` with traced bounds, solvers) and ``cond``/``switch``, nested.

A loop is one op of its program until it diverges on its own. Then, as for straight-line code, the
values come from the path's own compiled program: first the carry entering every iteration
(``capture``), to find the first iteration that departs on its own by replaying one iteration of
the body from the path's own carry with the baseline's implementation (``descend``); then that
iteration's body in full, whose ops are localized like any program's, and opened again where a
nested loop or branch diverges.
"""

from .structure import Body, LoopTrace, body_of, loop_kind

__all__ = ["Body", "LoopTrace", "body_of", "loop_kind"]  # descend.open_loops: imported where used
