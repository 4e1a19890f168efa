"""Re-runs that crash the process explaining them (a compiler that segfaults under one flag).

An explanation re-runs the path under flags and model changes, in its worker. Where one of those re-runs
kills the worker, the runner reads which one from a breadcrumb file the worker keeps (``attempt``), starts
a new worker and explains again with that re-run skipped (``configure``): the crash is said as that
experiment's outcome, and the other experiments and paths are still explained.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["attempt", "configure", "crashed_before", "last_attempt"]

_breadcrumb: str | None = None
_crashed: dict[str, str] = {}


def configure(breadcrumb: str | None, crashed: Mapping[str, str]) -> None:
    """Where this worker notes the re-run in progress, and the re-runs that crashed an earlier worker (run
    key -> how its process died)."""
    global _breadcrumb
    _breadcrumb = breadcrumb
    _crashed.clear()
    _crashed.update(crashed)


def crashed_before(key: str) -> str | None:
    """How re-running ``key`` ended an earlier worker ("killed by SIGSEGV"), or None."""
    return _crashed.get(key)


@contextmanager
def attempt(key: str) -> Iterator[None]:
    """Run ``key`` with the breadcrumb naming it, so that a crash inside is traced back to it."""
    if _breadcrumb is None:
        yield
        return
    with open(_breadcrumb, "w") as f:
        f.write(key)
    try:
        yield
    finally:
        with open(_breadcrumb, "w"):
            pass


def last_attempt(breadcrumb: str) -> str | None:
    """The re-run a dead worker was in, from its breadcrumb (None: it died elsewhere)."""
    try:
        with open(breadcrumb) as f:
            return f.read() or None
    except OSError:
        return None
    finally:
        try:
            os.unlink(breadcrumb)
        except OSError:
            pass
