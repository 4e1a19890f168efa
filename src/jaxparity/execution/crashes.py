"""Re-runs that crash or hang the process explaining them (a compiler that segfaults under one flag).

An explanation re-runs the path under flags and model changes, in its worker. Where one of those re-runs
kills the worker, or runs longer than ``rerun_timeout()`` (then the runner stops it), the runner reads which
one from a breadcrumb file the worker keeps (``attempt``), starts a new worker and explains again with that
re-run skipped (``configure``): the crash or hang is said as that experiment's outcome, and the other
experiments and paths are still explained.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["attempt", "configure", "crashed_before", "last_attempt", "rerun_timeout", "running_for"]

RERUN_TIMEOUT = 600.0  # seconds one re-run may take (JAXPARITY_RERUN_TIMEOUT overrides)


def rerun_timeout() -> float:
    """How long one re-run of an explanation may take before it is stopped as hung."""
    try:
        return float(os.environ.get("JAXPARITY_RERUN_TIMEOUT", RERUN_TIMEOUT))
    except ValueError:
        return RERUN_TIMEOUT

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


def running_for(breadcrumb: str) -> tuple[str | None, float]:
    """The re-run in progress and how long it has run (None, 0.0: none is)."""
    try:
        with open(breadcrumb) as f:
            key = f.read() or None
        return key, (time.time() - os.path.getmtime(breadcrumb)) if key else 0.0
    except OSError:
        return None, 0.0


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
