"""Serving processes kept warm between runs: started once per interpreter and environment, asked one
request per line, answered by one ``@@jaxparity {...}`` JSON line.

A TensorFlow serving process spends seconds importing TensorFlow before it serves its first model;
kept alive, the next run of the savedmodel path (the next `compare` in a notebook, the next test of
a pytest session, the next experiment of `explain` with the same environment) pays nothing of it.
Isolation is unchanged where it matters: a process that dies or does not answer within the timeout
is killed and forgotten, its request fails alone, and the next request starts a fresh one. Each
process leaves when its stdin closes: when this process exits, however it exits.
``JAXPARITY_WARM=0`` starts a fresh process for every request; at most ``JAXPARITY_WARM_MAX`` (4)
are kept, the one used longest ago stopped first.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["WarmDied", "WarmProcess", "close_all", "give_back", "prestart", "warm", "warm_enabled"]

_MARK = "@@jaxparity "


class WarmDied(Exception):
    """The process died or did not answer: ``output`` is what it printed."""

    def __init__(self, message: str, output: str, returncode: int | None) -> None:
        super().__init__(message)
        self.output, self.returncode = output, returncode


class WarmProcess:
    def __init__(self, argv: Sequence[str], env: dict[str, str] | None) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")  # stderr: read back when it fails, never a full pipe
        self.proc = subprocess.Popen(list(argv), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, bufsize=1)
        self.served = 0  # requests answered

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-20000:]

    def request(self, line: str, timeout: float | None) -> dict[str, Any]:
        """The answer to one request; WarmDied (the process killed and gone) when it dies or is late."""
        try:
            self.proc.stdin.write(line.rstrip("\n") + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.stop()
            raise WarmDied("the serving process had died", self.output(), self.proc.returncode) from None
        deadline = None if timeout is None else time.monotonic() + timeout
        printed = []
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if not ready:
                self.stop()
                raise WarmDied(f"the serving process did not answer within {timeout:g} s", self.output(), None)
            got = self.proc.stdout.readline()
            if not got:  # EOF: it died
                self.proc.wait()
                code = self.proc.returncode
                how = (f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else
                       f"exited with status {code}")
                raise WarmDied(f"the serving process {how}", "".join(printed) + self.output(), code)
            if got.startswith(_MARK):
                self.served += 1
                return json.loads(got[len(_MARK):])
            printed.append(got)

    def stop(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()


_POOL: dict[tuple, WarmProcess] = {}
_LOCK = threading.Lock()


def _key(argv: Sequence[str], env: dict[str, str] | None, ignore: frozenset[str]) -> tuple:
    return tuple(argv), tuple(sorted((k, v) for k, v in (env or {}).items() if k not in ignore))


def warm_enabled() -> bool:
    return os.environ.get("JAXPARITY_WARM", "1") not in ("0", "")


def warm(argv: Sequence[str], env: dict[str, str] | None, ignore: frozenset[str] = frozenset()) -> WarmProcess:
    """The live process for this command line and environment, started now if there is none (or every
    time, where ``JAXPARITY_WARM=0``); ``ignore``: variables that do not tell environments apart (those
    the served library sets itself as it loads). A process serves one request at a time: one handed
    out is out of the pool until ``give_back``."""
    key = _key(argv, env, ignore)
    with _LOCK:
        found = _POOL.pop(key, None) if warm_enabled() else None
    if found is not None and found.alive():
        return found
    if found is not None:
        found.stop()
    process = WarmProcess(argv, env)
    process.key = key  # type: ignore[attr-defined]
    return process


def prestart(argv: Sequence[str], env: dict[str, str] | None, ignore: frozenset[str] = frozenset()) -> None:
    """Start the process for this command line and environment now, into the pool, where none is there:
    it loads its library while this process does other work (the experiments of ``explain`` before the
    re-run that needs it). Nothing where warm processes are off."""
    if not warm_enabled():
        return
    key = _key(argv, env, ignore)
    with _LOCK:
        if key in _POOL:
            return
    process = WarmProcess(argv, env)
    process.key = key  # type: ignore[attr-defined]
    give_back(process)


def _most() -> int:
    """How many warm processes one process keeps (``JAXPARITY_WARM_MAX``, default 4): each holds a
    TensorFlow, hundreds of MB; the one used longest ago goes first."""
    try:
        return max(1, int(os.environ.get("JAXPARITY_WARM_MAX", "4")))
    except ValueError:
        return 4


def give_back(process: WarmProcess) -> None:
    """A process that answered, back in the pool for the next request (stopped where warm is off)."""
    if not warm_enabled() or not process.alive():
        process.stop()
        return
    with _LOCK:
        old = _POOL.pop(process.key, None)  # type: ignore[attr-defined]
        _POOL[process.key] = process  # type: ignore[attr-defined]  # last: the most recently used
        evicted = []
        while len(_POOL) > _most():
            evicted.append(_POOL.pop(next(iter(_POOL))))
    for p in ([old] if old is not None and old is not process else []) + evicted:
        p.stop()


def close_all() -> None:
    """Stop every warm process (they would leave on their own when this process exits)."""
    with _LOCK:
        processes = list(_POOL.values())
        _POOL.clear()
    for p in processes:
        try:
            p.proc.stdin.close()
            p.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            p.stop()


atexit.register(close_all)
