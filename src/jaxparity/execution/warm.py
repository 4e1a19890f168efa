"""Serving processes kept warm between runs: started once per interpreter and environment, asked one
request per line, answered by one ``@@jaxparity {...}`` JSON line.

A TensorFlow serving process spends seconds importing TensorFlow before it serves its first model;
kept alive, the next run of the savedmodel path (the next `compare` in a notebook, the next test of
a pytest session, the next experiment of `explain` with the same environment) pays nothing of it.
Isolation is unchanged where it matters: a process that dies or does not answer within the timeout
is killed and forgotten, its request fails alone, and the next request starts a fresh one. Each
process leaves when its stdin closes: when this process exits, however it exits.
``JAXPARITY_WARM=0`` starts a fresh process for every request; at most ``JAXPARITY_WARM_MAX`` (8)
are kept, holding at most ``JAXPARITY_SERVE_MAX_MB`` (2048) of memory together where they outlive their
command, the one used longest ago stopped first; a command says on stderr which stay, and how much they hold.

Where ``JAXPARITY_SERVE_IDLE`` is a number of seconds (jaxparity's commands set 600), the process
outlives this one (``Daemon``): it serves on a Unix socket in ``<cache>/serve`` and the next command
with the same serving environment, interpreter and serving script finds it there. It leaves after that
many idle seconds, when its socket is removed, and when a package of its interpreter changed. One
command talks to it at a time (a lock file); another command meanwhile runs a process of its own.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import socket
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["Daemon", "WarmDied", "WarmProcess", "close_all", "give_back", "most_megabytes", "outlive", "prestart",
           "staying", "stop_daemons", "waiting", "warm", "warm_enabled"]

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


class Daemon:
    """A serving process that outlives this one, found by its key under ``<cache>/serve``: ``<id>.sock``
    (it listens there), ``<id>.pid``, ``<id>.log`` (its stdout and stderr) and ``<id>.lock``, held by the
    command talking to it. The same interface as ``WarmProcess``; ``stop`` leaves it running (it is the
    next command's), a request it does not answer in time kills it."""

    outlives = True

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None, key: tuple, idle: float, where: Path) -> None:
        self.argv, self.env, self.idle = list(argv), env, idle
        # what it runs: its scripts and the module they read arrays with, as they are now
        code = [Path(a) for a in argv[1:] if a.endswith(".py") and Path(a).is_file()]
        code.append(Path(__file__).resolve().parents[1] / "arrayio.py")
        digest = hashlib.sha256(repr((key, [p.read_bytes() for p in code])).encode())
        self.id = digest.hexdigest()[:20]
        self.dir = where
        self.sock, self.pidfile, self.logfile, self.lockfile = (where / f"{self.id}{ext}" for ext in
                                                                 (".sock", ".pid", ".log", ".lock"))
        self.served = 0  # requests it answered, this one's and earlier commands'
        self._offset = 0  # where this request's output begins in its log
        self._started: subprocess.Popen | None = None
        self._own: WarmProcess | None = None  # this process's own, while another command holds the shared one

    @staticmethod
    def usable(where: Path) -> bool:
        """A directory where a socket can be (a Unix socket's path holds at most 107 bytes) that only this user
        may enter: created 700, else refused (a serving process never listens where another user could reach
        it, nor is this command served by one another user could have started)."""
        if len(str(where)) >= 80:
            return False
        try:
            where.mkdir(parents=True, exist_ok=True, mode=0o700)
            st = where.stat()
            if st.st_uid == os.getuid() and st.st_mode & 0o077:
                where.chmod(0o700)  # ours, made by an older jaxparity: made private
                st = where.stat()
            return st.st_uid == os.getuid() and not st.st_mode & 0o077
        except OSError:
            return False

    def alive(self) -> bool:
        return True  # a handle: whether its process lives is found at the next request

    def output(self) -> str:
        try:
            with open(self.logfile) as f:
                f.seek(self._offset)
                return f.read()[-20000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """This process's own one stopped; the shared one is the next command's (``kill`` stops it)."""
        if self._own is not None:
            self._own.stop()

    def kill(self) -> None:
        pid = self._pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for f in (self.sock, self.pidfile):
            f.unlink(missing_ok=True)

    def _pid(self) -> int | None:
        """The pid of this key's process: the one this process started while it runs (its command line
        is empty until its exec is done), else the one the pid file names if it is running it."""
        if self._started is not None and str(self._started.pid) == _read(self.pidfile):
            return self._started.pid if self._started.poll() is None else None
        try:
            pid = int(self.pidfile.read_text())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return pid if str(self.sock).encode() in f.read() else None
        except (OSError, ValueError):
            return None

    def request(self, line: str, timeout: float | None) -> dict[str, Any]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.lockfile, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # another command is talking to it: a process of this command's own
                return self._alone(line, timeout)
            os.utime(self.lockfile)  # used now: the last to be stopped
            deadline = None if timeout is None else time.monotonic() + timeout
            for _ in range(2):
                answer = self._ask(line, deadline, timeout)
                if answer is not None and "stale" not in answer:
                    return answer
                # It left before it took the request (idle, or a package changed): the next one starts
                # afresh, with the packages installed now.
                self.kill()
            return self._alone(line, timeout)  # a directory on its sys.path changes all the time

    def _alone(self, line: str, timeout: float | None) -> dict[str, Any]:
        """Served by a process of this one's own, kept for the next time the shared one is busy (two
        sweep workers on one serving environment)."""
        if self._own is None or not self._own.alive():
            self._own = WarmProcess([*self.argv], self.env)
        answer = self._own.request(line, timeout)
        self.served = self._own.served
        return answer

    def prestart(self) -> None:
        """Started now where none is running or starting (nothing where another command holds it)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.lockfile, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return
            if self._pid() is None:
                self._start()

    def _start(self) -> None:
        for f in (self.sock, self.pidfile):
            f.unlink(missing_ok=True)
        _bound(self.dir, _most() - 1)
        with open(self.logfile, "w") as log:
            self._started = subprocess.Popen([*self.argv, "--socket", str(self.sock), "--idle", f"{self.idle:g}",
                                              "--root", str(self.dir.parent)],
                                             env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             cwd="/", start_new_session=True)  # not the command's Ctrl-C
        _CHILDREN.append(self._started)
        self.pidfile.write_text(str(self._started.pid))

    def _connect(self, deadline: float | None) -> socket.socket:
        """A connection to the running process, started now where none runs; WarmDied where it dies
        before it listens or is not listening by the deadline."""
        if self._pid() is None:
            self._start()
        while True:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(str(self.sock))
                return conn
            except OSError:
                conn.close()
            if self._pid() is None:  # it died importing TensorFlow, or was killed
                self._offset = 0
                self._fail("the serving process exited before it served", None)
            if deadline is not None and time.monotonic() > deadline:
                self.kill()
                raise WarmDied("the serving process did not start listening in time", self.output(), None)
            time.sleep(0.05)

    def _fail(self, message: str, code: int | None) -> None:
        started = self._started
        if started is not None and started.poll() is None:
            try:
                started.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        if started is not None and started.returncode is not None:
            code = started.returncode
            message = (f"the serving process was killed by {signal.Signals(-code).name}" if code < 0 else
                       f"the serving process exited with status {code}")
        self.kill()
        raise WarmDied(message, self.output(), 1 if code is None else code)

    def _ask(self, line: str, deadline: float | None, timeout: float | None) -> dict[str, Any] | None:
        """Its answer; None where it closed the connection before its hello (it was leaving: the
        request was never sent); WarmDied where it died with the request or did not answer in time."""
        self._offset = self.logfile.stat().st_size if self.logfile.exists() else 0
        conn = self._connect(deadline)
        with conn, conn.makefile("rw") as stream:
            got = []
            try:
                for text in ("", line.rstrip("\n") + "\n"):
                    if text:
                        stream.write(text)
                        stream.flush()
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    ready, _, _ = select.select([conn], [], [], left)
                    if not ready:
                        self.kill()
                        raise WarmDied(f"the serving process did not answer within {timeout:g} s", self.output(),
                                       None)
                    got.append(stream.readline())
                    if not got[-1].startswith(_MARK):
                        break
                    if len(got) == 1:  # its hello: whether it served before decides a retry if it dies now
                        self.served = int(json.loads(got[0][len(_MARK):]).get("served", 0))
            except OSError:
                got.append("")
            if len(got) == 1 and not got[0].startswith(_MARK):
                return None
            if not got[-1].startswith(_MARK):  # the connection closed unanswered: it died
                self._fail("the serving process died (it was started by an earlier command, which alone "
                           "could read its exit status)", None)
        answer = json.loads(got[1][len(_MARK):])
        self.served += "error" not in answer and "stale" not in answer
        return answer


_POOL: dict[tuple, WarmProcess | Daemon] = {}
_LOCK = threading.Lock()
_CHILDREN: list[subprocess.Popen] = []  # daemons started here, kept so their exit status can be read
# Variables that do not tell serving environments apart: the shell's bookkeeping and jaxparity's own.
_SHELL = frozenset({"_", "PWD", "OLDPWD", "SHLVL"})


def _key(argv: Sequence[str], env: dict[str, str] | None, ignore: frozenset[str]) -> tuple:
    return tuple(argv), tuple(sorted((k, v) for k, v in (env or {}).items()
                                     if k not in ignore and k not in _SHELL and not k.startswith("JAXPARITY_")))


def outlive() -> float:
    """Seconds a serving process outlives the command that started it (``JAXPARITY_SERVE_IDLE``; 0 where
    unset, in Python; jaxparity's commands set 600)."""
    try:
        return max(0.0, float(os.environ.get("JAXPARITY_SERVE_IDLE", "0") or 0))
    except ValueError:
        return 0.0


def _daemons() -> Path:
    from ..cache.store import enabled, root

    return root() / "serve" if enabled() else Path()


def _bound(where: Path, keep: int, megabytes: float | None = None) -> None:
    """At most ``keep`` daemons running in ``where``, together holding at most ``megabytes`` of memory
    (``most_megabytes()`` where None): those used longest ago (and not in use) stopped first."""
    budget = most_megabytes() if megabytes is None else megabytes
    running = []
    for pidfile in where.glob("*.pid") if where.is_dir() else []:
        lock = pidfile.with_suffix(".lock")
        running.append((lock.stat().st_mtime if lock.exists() else 0.0, pidfile))
    running.sort()
    held = sum(_megabytes(_read(pidfile)) for _, pidfile in running)
    for k, (_, pidfile) in enumerate(running):
        if len(running) - k <= keep and held <= budget:
            break
        with open(pidfile.with_suffix(".lock"), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # in use by another command
            held -= _megabytes(_read(pidfile))
            _stop_one(pidfile)


def _megabytes(pid: str) -> float:
    """The resident memory of process ``pid`` (its TensorFlow, its models), in MB; 0 where it is not running."""
    try:
        with open(f"/proc/{int(pid)}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


_MOST_MB = 2048  # two or three TensorFlow serving processes with a model each


def most_megabytes() -> float:
    """How much memory the serving processes that outlive their commands may hold together
    (``JAXPARITY_SERVE_MAX_MB``, default 2048): beyond it, those used longest ago are stopped."""
    try:
        return max(0.0, float(os.environ.get("JAXPARITY_SERVE_MAX_MB", str(_MOST_MB))))
    except ValueError:
        return float(_MOST_MB)


def staying(where: Path | None = None) -> list[tuple[int, float]]:
    """The serving processes that stay warm after this command, once bounded by count and memory: (pid, MB)."""
    where = _daemons() if where is None else where
    if not where.parts or not where.is_dir():
        return []
    _bound(where, _most())
    return [(pid, _megabytes(str(pid))) for pid in waiting(where)]


def _read(f: Path) -> str:
    try:
        return f.read_text()
    except OSError:
        return ""


def _stop_one(pidfile: Path) -> None:
    sock = pidfile.with_suffix(".sock")
    try:
        pid = int(pidfile.read_text())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if str(sock).encode() in f.read():
                os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass
    for f in (sock, pidfile):
        f.unlink(missing_ok=True)


def waiting(where: Path) -> list[int]:
    """The pids of the serving processes running in ``where`` (``<cache>/serve``)."""
    found = []
    for pidfile in where.glob("*.pid") if where.is_dir() else []:
        try:
            pid = int(pidfile.read_text())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if str(pidfile.with_suffix(".sock")).encode() in f.read():
                    found.append(pid)
        except (OSError, ValueError):
            continue
    return found


def stop_daemons(where: Path | None = None) -> int:
    """Stop every serving process that outlives its command in ``where`` (``<cache>/serve``); how many."""
    where = _daemons() if where is None else where
    running = waiting(where)
    for pidfile in list(where.glob("*.pid")) if where.is_dir() else []:
        _stop_one(pidfile)
    return len(running)


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
    where = _daemons()
    if warm_enabled() and outlive() and where.parts and Daemon.usable(where):
        process: WarmProcess | Daemon = Daemon(argv, env, key, outlive(), where)
    else:
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
    process = warm(argv, env, ignore)
    if isinstance(process, Daemon):
        process.prestart()
    give_back(process)


_MOST = 8  # explain of examples/resnet_bf16.py's savedmodel path served from 6 environments


def _most() -> int:
    """How many warm processes one process keeps, and how many outlive their commands in one cache
    (``JAXPARITY_WARM_MAX``, default 8): each holds a TensorFlow and its models, hundreds of MB; the one
    used longest ago goes first."""
    try:
        return max(1, int(os.environ.get("JAXPARITY_WARM_MAX", str(_MOST))))
    except ValueError:
        return _MOST


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
        if isinstance(p, Daemon):
            p.stop()  # its own process only: the shared one is the next command's
            continue
        try:
            p.proc.stdin.close()
            p.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            p.stop()


atexit.register(close_all)
