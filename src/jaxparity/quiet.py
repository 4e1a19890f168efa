"""The runtimes' own log lines kept out of a command's output: TensorFlow's and absl's C++ logging,
the TFLite converter's MLIR diagnostics, XLA's warnings. They write to file descriptor 2 directly, so
the command points that descriptor at a log file while Python's ``sys.stderr`` (progress, errors,
tracebacks) keeps the terminal. Worker and serving processes inherit the log. Where a command fails,
it names the file; an empty log is removed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["RuntimeLog", "runtime_log"]


class RuntimeLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[str]:
        try:
            return [ln for ln in self.path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return []

    def describe(self) -> str:
        n = len(self.lines())
        return f"the runtimes' own log ({n} lines): {self.path}" if n else ""


@contextlib.contextmanager
def runtime_log(prefix: str = "jaxparity-") -> Iterator[RuntimeLog | None]:
    """Native writes to fd 2 go to a log file; ``sys.stderr`` stays on the terminal. Yields None (and
    changes nothing) where fd 2 cannot be redirected (no such descriptor, or a non-file ``sys.stderr``)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's INFO and WARNING lines: not even logged
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield None
        return
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".log")
    original = sys.stderr
    try:
        on_fd2 = original.fileno() == 2
    except (AttributeError, OSError, ValueError):  # captured (pytest's capsys): it never wrote to fd 2
        on_fd2 = False
    terminal = (os.fdopen(os.dup(saved), "w", buffering=1, errors="backslashreplace",
                          encoding=getattr(original, "encoding", None) or "utf-8") if on_fd2 else original)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = terminal
    log = RuntimeLog(Path(name))
    try:
        yield log
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        sys.stderr = original
        if terminal is not original:
            terminal.close()
        if not log.lines():
            with contextlib.suppress(OSError):
                log.path.unlink()
