"""Running paths isolated in a worker process (``worker.py``), with a per-path timeout.

Isolation is what lets one path crash its process (an abort inside XLA or TensorFlow) or hang
without taking down the others or the report: the worker that died is replaced and the next path
runs in a fresh one. A worker loads the case once and runs paths until one of them kills it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, Iterator

import numpy as np

from .runs import CaseInfo, PathRun

__all__ = ["IsolatedRunner", "TaskError", "WorkerDied"]


_GLOG_QUIET = re.compile(r"^[IW]\d{4} ")


class WorkerDied(Exception):
    pass


class TaskError(Exception):
    """A task run in the worker raised (its type and message)."""


class IsolatedRunner:
    """Runs paths of a case file in a worker process; replaces the worker when a path kills it."""

    def __init__(self, case_spec: str, inputs: str | None = None, load_timeout: float = 600.0, *,
                 python: str | None = None, env: dict[str, str] | None = None) -> None:
        self.case_spec, self.inputs, self.load_timeout = case_spec, inputs, load_timeout
        self.python, self.env = python or sys.executable, env
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="jaxparity-worker-", suffix=".log", delete=False)
        self.info: CaseInfo | None = None
        self._samples: list = []  # see send_samples
        self._samples_in: subprocess.Popen | None = None  # the worker that holds them
        # Paths whose serving processes the worker starts while it loads the case, once it has a core to spare
        # (``cache.compiling.when_waiting``): set before the first load.
        self.ahead: list[str] = []
        self.stopped = False  # ``stop()``: the command was interrupted; what runs ends at once

    # -- worker lifecycle -------------------------------------------------------------------
    def _start(self) -> CaseInfo:
        parent, child = socket.socketpair()
        self._log.seek(0)
        self._log.truncate()
        self._proc = subprocess.Popen(
            [self.python, "-m", "jaxparity.execution.worker", str(child.fileno())],
            env=self.env,
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a timeout can kill the worker and its serving children
        )
        child.close()
        self._conn = Connection(parent.detach())
        if self.ahead:
            self._conn.send(("prestart", list(self.ahead)))
        self._conn.send(("load", self.case_spec, self.inputs))
        from ..case import CaseError

        try:
            reply = self._receive(self.load_timeout, "loading the case")
        except WorkerDied as e:
            raise CaseError(f"{self.case_spec}: loading the case killed {str(e)[4:]}") from e
        except TimeoutError as e:
            raise CaseError(f"{self.case_spec}: loading the case took over {self.load_timeout:g} s") from e
        if reply[0] == "case_error":
            self.close()
            raise CaseError(reply[1])
        self.info = reply[1]
        return reply[1]

    def load(self) -> CaseInfo:
        return self.info or self._start()

    def _receive(self, timeout: float | None, doing: str) -> tuple:
        assert self._conn is not None and self._proc is not None
        try:
            ready = self._conn.poll(timeout)
            if ready:
                return self._conn.recv()
        except (EOFError, ConnectionError, OSError) as e:
            self._proc.wait()
            raise WorkerDied(self._death_message()) from e
        self._kill()
        raise TimeoutError(doing)

    def _death_message(self) -> str:
        assert self._proc is not None
        code = self._proc.returncode
        how = f"was killed by {signal.Signals(-code).name}" if code and code < 0 else f"exited with status {code}"
        self._log.flush()
        with open(self._log.name, errors="replace") as f:
            # glog's INFO and WARNING lines (JAX's persistent cache writes one per program it loads) say
            # nothing of a death; its ERROR and FATAL lines, Python's and the crash's own words do
            lines = [ln.rstrip() for ln in f if ln.strip() and not ln.startswith("WARNING: All log messages")
                     and not _GLOG_QUIET.match(ln)]
        tail = "\n".join(lines[-4:])
        return f"its process {how}" + (f":\n{tail}" if tail else "")

    def _kill(self) -> None:
        if self._proc and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        self._conn = None

    # -- running ------------------------------------------------------------------------------
    def run(self, spec: str, timeout: float | None = None) -> PathRun:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._conn is not None
        start = time.perf_counter()
        self._conn.send(("run", spec, timeout))
        try:
            reply = self._receive(timeout, spec)
        except TimeoutError:
            self._proc = None
            return PathRun(spec, "timeout", seconds=time.perf_counter() - start,
                           message=f"did not finish within {timeout:g} s (--timeout); its process was stopped")
        except WorkerDied as e:
            self._proc = None
            return PathRun(spec, "crashed", seconds=time.perf_counter() - start, message=str(e))
        return reply[1]

    def prestart(self, specs: Sequence[str]) -> None:
        """Let the worker start what these paths will wait for (``Path.prestart``: a serving process that
        imports TensorFlow while the worker runs the paths before it); nothing comes back."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._conn is not None
        self._conn.send(("prestart", list(specs)))

    def send_samples(self, sets: list) -> None:
        """The input sets (None: the case's own inputs) that ``run_many`` runs by index. They go to
        the worker once, before its first ``run_many`` (and again to a worker that replaces one)."""
        self._samples, self._samples_in = sets, None

    def run_many(self, spec: str, which: range, repeat: int = 1, timeout: float | None = None,
                 chunk: int | None = None) -> Iterator[list[list[PathRun]]]:
        """Run ``spec`` on the input sets ``which`` (indices into ``send_samples``), ``repeat`` times each,
        in one worker call so compiled paths compile once. Yields the runs of each ``chunk`` sets (default:
        all) as the worker sends them; it goes on with the next chunk without waiting to be asked. A chunk
        has ``timeout`` per set and run; a timeout or crash fails the chunk and the rest run in a new worker."""
        size = chunk or max(len(which), 1)
        parts = [range(k, min(k + size, which.stop)) for k in which[::size]]
        try:
            while parts:
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                assert self._conn is not None
                if self._samples_in is not self._proc:
                    self._conn.send(("samples", self._samples))
                    self._samples_in = self._proc
                self._conn.send(("run_many", spec, parts[0].start, parts[-1].stop, size, repeat, timeout))
                while parts and self._proc is not None:
                    yield self._receive_part(spec, parts.pop(0), repeat, timeout)
        finally:
            if parts and self._proc is not None:  # abandoned halfway: the worker would still send the rest
                self._kill()
                self._proc = None

    def _receive_part(self, spec: str, part: range, repeat: int, timeout: float | None) -> list[list[PathRun]]:
        start = time.perf_counter()
        total = None if timeout is None else timeout * len(part) * repeat
        try:
            return self._receive(total, spec)[1]
        except TimeoutError:
            self._proc = None
            run = PathRun(spec, "timeout", seconds=time.perf_counter() - start,
                          message=f"did not finish {len(part)} samples within {total:g} s (--timeout per sample)")
        except WorkerDied as e:
            self._proc = None
            run = PathRun(spec, "crashed", seconds=time.perf_counter() - start, message=str(e))
        return [[run] for _ in part]

    def arrays(self) -> dict[str, np.ndarray]:
        """The case's input arrays as the worker holds them (bit-exact), by input name."""
        self.load()
        assert self._conn is not None
        self._conn.send(("arrays",))
        return dict(self._receive(self.load_timeout, "reading the inputs")[1])

    def keys(self) -> set[str]:
        """Names of the case's inputs that are PRNG keys (``samples.key_inputs``): never drawn as data."""
        self.load()
        assert self._conn is not None
        self._conn.send(("keys",))
        return set(self._receive(self.load_timeout, "finding the PRNG keys")[1])

    def call_failure(self) -> str | None:
        """Why the case's function fails called plainly on its inputs in the worker, or None when it runs
        (``inprocess.plain_call_failure``); a worker that dies doing it says so."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._conn is not None
        self._conn.send(("call",))
        try:
            return self._receive(self.load_timeout, "calling the function")[1]
        except WorkerDied as e:
            self._proc = None
            return f"calling it crashed the worker: {e}"
        except TimeoutError:
            self._proc = None
            return None  # slow, not failing: the paths' own messages stand

    def explain(self, paths: list[tuple[str, Any]], baseline: str, base_out: Any,
                agreeing: Sequence[str] = (), explained: Sequence[str] | None = None,
                told: Callable[[tuple], None] | None = None) -> list | str:
        """Explanations of ``paths`` (spec, outputs) computed in the worker, or why that failed; not reasoned
        across (``explain.share_across``: the caller's, with the paths other workers explained, ``explained``).
        A re-run that kills the worker (a compiler crash under one flag) or runs past
        ``crashes.rerun_timeout()`` (a hang) is skipped in a new worker, and said as that experiment's outcome
        (``execution.crashes``); a crash outside any re-run ends the explanation. ``told`` receives what the worker
        says meanwhile: ("stage", path, stage) as each stage starts, ("explained_one", path, explanation) as each
        path is explained. ``stop()`` from another thread ends it at once ("stopped")."""
        from .crashes import last_attempt, running_for, rerun_timeout

        breadcrumb = self._log.name + ".rerun"
        crashed: dict[str, str] = {}
        limit = rerun_timeout()
        while True:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            assert self._conn is not None and self._proc is not None
            self._conn.send(("explain", paths, baseline, base_out, breadcrumb, crashed, list(agreeing),
                             None if explained is None else list(explained)))
            try:
                while True:
                    if self.stopped:
                        return "stopped"
                    if not self._conn.poll(1.0):  # a re-run past its time is stopped, the rest explained again
                        key, seconds = running_for(breadcrumb)
                        if key is not None and seconds > limit and key not in crashed:
                            self._kill()
                            self._proc = None
                            last_attempt(breadcrumb)
                            crashed[key] = f"hung: did not finish within {limit:g} s"
                            break
                        continue
                    message = self._conn.recv()
                    if message[0] == "explained":
                        return message[1]
                    if told is not None:
                        told(message)
            except (EOFError, ConnectionError, OSError):
                if self.stopped:
                    return "stopped"
                self._proc.wait()
                died = self._death_message()
                self._proc = None
                key = last_attempt(breadcrumb)
                if key is None or key in crashed:
                    return f"explaining crashed: {died}"
                crashed[key] = died.splitlines()[0].removeprefix("its process ").rstrip(":")

    def capture(self, spec: str) -> list | str:
        """Every op of the case as this worker's JAX traces it, with its values along ``spec`` (see
        ``localize.align.capture_ops``), or why that failed."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._conn is not None
        self._conn.send(("capture", spec))
        try:
            reply = self._receive(None, "capture")
        except WorkerDied as e:
            self._proc = None
            return f"capturing crashed: {e}"
        return reply[1]

    def task(self, name: str, *payload: Any, timeout: float | None = None) -> Any:
        """``name`` (``"jaxparity.module:function"``) called in the worker on the loaded case and ``payload``;
        its value. Raises ``TaskError`` where it raised, ``WorkerDied`` where it killed the worker (a new one
        starts with the next call), ``TimeoutError`` past ``timeout``."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._conn is not None
        self._conn.send(("task", name, payload))
        try:
            status, value = self._receive(timeout, name)[1]
        except (WorkerDied, TimeoutError):
            self._proc = None
            raise
        if status != "ok":
            raise TaskError(value)
        return value

    def stop(self) -> None:
        """End what the worker runs now (from another thread: an interrupt, a budget): it is killed, and the call
        waiting on it returns "stopped"."""
        self.stopped = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.poll() is None:
            try:
                self._conn.send(("exit",))
                self._proc.wait(timeout=10)
            except Exception:
                pass
        self._kill()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
