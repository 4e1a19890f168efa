"""One compile of a program at a time across jaxparity's processes.

A command's workers load the same case at the same moment and compile the same programs (a Keras model's
weight initializers, its jitted call): each would miss JAX's persistent cache and compile every program
again, on the same two cores. Here, the first process to miss a program's cache key leaves a marker
(``<dir>/<key>``: its host and process id) while it compiles; another that misses the same key waits for
the marker to go and then reads the program from JAX's cache. A marker whose process has died (a worker
killed for hanging), or one left on another host for longer than ``WAIT`` seconds, is ignored, and a
process never waits longer than ``WAIT``: at worst it compiles the program itself, as without markers.
A process that waits has a core to spare: what it was asked to start ahead (``when_waiting``: a serving
process that imports TensorFlow) starts then.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["WAIT", "Markers", "idle", "when_waiting"]

WAIT = 600.0  # seconds: as long as a compile of a large model may take on a loaded machine
_POLL = 0.02


_AHEAD: list[Callable[[], None]] = []


def when_waiting(task: Callable[[], None]) -> None:
    """Run ``task`` the first time this process waits for another's compile (``idle``), or at the next
    ``idle()`` call, whichever comes first; a task that raises is dropped."""
    _AHEAD.append(task)


def idle() -> None:
    """Run the tasks of ``when_waiting`` now."""
    while _AHEAD:
        task = _AHEAD.pop(0)
        try:
            task()
        except Exception:  # noqa: BLE001, S110 - a head start, never a failure
            pass


class Markers:
    """The markers of programs being compiled, in ``directory``; ``claim``/``release`` around a compile."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self._mine: set[str] = set()
        self._me = f"{socket.gethostname()} {os.getpid()}"

    def claim(self, key: str) -> bool:
        """True: this process compiles ``key`` (its marker is left until ``release``). False: another
        process was compiling it and has stopped (or ``WAIT`` ran out): read JAX's cache again."""
        marker = self.dir / key
        for _ in range(2):  # the second try: after taking away a dead process's marker
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._compiling(marker):
                    idle()
                    start = time.monotonic()
                    while self._compiling(marker) and time.monotonic() - start < WAIT:
                        time.sleep(_POLL)
                    return False
                _remove(marker)
                continue
            except OSError:  # no place for markers (a read-only cache): compile, as without them
                return True
            with os.fdopen(fd, "w") as f:
                f.write(self._me)
            self._mine.add(key)
            return True
        return True

    def release(self, key: str) -> None:
        """The compile of ``key`` ended (its program is in JAX's cache, or failed): waiters go on."""
        if key in self._mine:
            self._mine.discard(key)
            _remove(self.dir / key)

    def _compiling(self, marker: Path) -> bool:
        """The marker's process is (as far as this host can tell) still compiling."""
        try:
            owner = marker.read_text()
            age = time.time() - marker.stat().st_mtime
        except OSError:  # removed meanwhile
            return False
        host, _, pid = owner.rpartition(" ")
        if owner == self._me:
            return True  # another thread of this process
        if host != socket.gethostname() or not pid.isdigit():
            return age < WAIT  # another host's (a shared home directory): trusted for a while
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, another user's
            return True
        return True


def _remove(marker: Path) -> None:
    try:
        marker.unlink()
    except OSError:
        pass
