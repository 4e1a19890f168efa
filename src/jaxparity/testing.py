"""Parity assertions for test suites: fail a test when execution paths disagree, and say why.

``assert_parity`` runs a function along several execution paths (``jaxparity.compare``), and when a
gated path does not agree with the baseline it raises :class:`ParityError` (an ``AssertionError``)
whose message is the explanation a user needs in the pytest failure: which paths differ and by how
much, the smallest tolerance that would have passed, the confirmed cause, and the fixes that were
re-run to prove they restore parity.

>>> import jax, jax.numpy as jnp
>>> from jaxparity.testing import assert_parity
>>> def softmax(x):
...     return jax.nn.softmax(x.astype(jnp.bfloat16), axis=-1)
>>> x = jnp.linspace(-3, 3, 400, dtype=jnp.float32).reshape(4, 100)
>>> assert_parity(softmax, x, paths=("eager", "jit:xla_allow_excess_precision=false"))  # passes
>>> assert_parity(softmax, x, ulp=1)  # passes: jit is within 1 ULP of bf16 of eager
>>> assert_parity(softmax, x)  # raises: jit keeps bf16 results in f32 (excess precision)
Traceback (most recent call last):
jaxparity.testing.ParityError: jaxparity: softmax: 1 of 1 compared path does not agree with eager (exact): jit ...

The failing :class:`~jaxparity.result.ComparisonResult` travels with the exception
(``ParityError.result``) and is also kept in :data:`failures` (the most recent ones), so a test
harness (the ``jaxparity.pytest_plugin``) can write a full report for it.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .result import ComparisonResult, LeafResult

__all__ = ["ParityError", "assert_parity", "failures", "format_failure"]

#: The results of the most recent failed ``assert_parity`` calls, newest last. A hook for test
#: harnesses that only see the exception's text; bounded so a long session cannot hoard memory.
failures: collections.deque[ComparisonResult] = collections.deque(maxlen=16)


class ParityError(AssertionError):
    """Raised by :func:`assert_parity`: the message is the explanation, ``.result`` the full result."""

    def __init__(self, message: str, result: ComparisonResult) -> None:
        super().__init__(message)
        self.result = result


def assert_parity(
    fn: Callable[..., Any],
    *args: Any,
    paths: Sequence[str] | str = ("eager", "jit"),
    baseline: str = "eager",
    ulp: int | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    explain: bool = True,
    timeout: float | None = None,
) -> ComparisonResult:
    """Assert that ``fn(*args)`` gives the same numbers along every path in ``paths``.

    Compares each path against ``baseline`` (exact unless ``ulp``/``atol``/``rtol`` is given) and
    returns the :class:`~jaxparity.result.ComparisonResult` when every gated path agrees. Otherwise
    raises :class:`ParityError`, an ``AssertionError`` whose message names each failing path, the
    smallest tolerance that would pass, and (with ``explain=True``, the default) the confirmed cause
    and the verified fixes. ``explain=False`` skips the explanation, which re-runs the function a
    few times.

    >>> result = assert_parity(model.apply, variables, x, paths=("eager", "jit"), ulp=2)
    >>> result.path("jit").verdict
    'within tolerance'
    """
    __tracebackhide__ = True  # pytest: show the user's call, not this frame
    from .comparison import compare
    from .metrics import Tolerance

    path_list = [paths] if isinstance(paths, str) else list(paths)
    result = compare(fn, *args, paths=path_list, baseline=baseline,
                     tolerance=Tolerance(ulp=ulp, atol=atol, rtol=rtol), timeout=timeout)
    if result.passed:
        return result
    note: str | None = None
    if explain:
        to_explain = [p.spec for p in result.paths if p.gated and not p.passed and p.status == "ok"]
        if to_explain:
            try:
                result = result.explain(to_explain)
            except Exception as e:  # the comparison still stands; say why there is no explanation
                note = f"could not explain the difference: {type(e).__name__}: {e}"
    failures.append(result)
    raise ParityError(format_failure(result, note=note), result)


def _accepting(leaf: LeafResult, baseline: str | None = None) -> str | None:
    """'ulp=1 (of bfloat16) or atol=0.00049 (…)': the assert_parity arguments that would accept this leaf,
    each with what it amounts to in the output's dtype and noise (``report.format.tolerance_choices``)."""
    from .report.format import tolerance_choices

    choices = tolerance_choices(leaf, baseline)
    return " or ".join(f"{name}={value}" + (f" ({why})" if why else "") for name, value, why in choices) or None


def format_failure(result: ComparisonResult, note: str | None = None) -> str:
    """The text of a parity failure, as the verdicts say it (``report.answer``): the headline, one block per
    divergence (the line, the mechanism, who is at fault, the fix as its re-runs showed it) and per path that could
    not run, and how to accept a difference. No tables: it is read in a test log."""
    from .report.answer import text_lines

    said = text_lines(result)
    lines = [f"jaxparity: {result.case}: {said[0]}"] + [f"  {line}" for line in said[1:]]
    for p in result.paths:
        if p.gated and not p.passed and p.verdict == "differs" and (worst := p.worst) is not None:
            accept = _accepting(worst, result.baseline)
            if accept:
                lines.append(f"  (to accept {p.spec}'s difference: assert_parity(..., {accept}))")
    if note:
        lines.append(f"note: {note}")
    return "\n".join(lines)
