"""The type hints and the lint, checked.

``ruff check`` is clean on ``src/jaxparity`` and ``tests/`` (the rules: ``[tool.ruff]`` in pyproject.toml).

mypy (``[tool.mypy]`` in pyproject.toml) finds no more errors in any module of ``src/jaxparity`` than
``tests/typecheck-baseline.json`` records, and none in a module it does not record. The record holds
each module's errors (message and code, without the line, so that an edit above does not move them):
what the test counts, and what names the new errors when a module has more. When a module has fewer
errors than recorded the test passes with a warning that the record can be lowered; rewrite it with

    python tests/test_types.py --record

(with the project's Python, ``.venv/bin/python``, from any directory). Never raise the record to let a
new error through: fix the annotation, or, where mypy cannot know (an untyped third-party object), add
``# type: ignore[code]`` with the error's own code.

mypy and ruff are in requirements.lock (``make test`` installs them): when they are missing the test
fails, it does not skip. mypy keeps its cache in ``.mypy_cache`` (ignored by git), so a second run reads
only what changed.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "typecheck-baseline.json"
SOURCE = "src/jaxparity"
_ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*)$")
_RECORD_CMD = "python tests/test_types.py --record"


def _missing(tool: str) -> str | None:
    if importlib.util.find_spec(tool) is None:
        return (f"{tool} is not installed in {sys.executable}: it is pinned in requirements.lock (`make test` "
                f"installs it) and in the `test` extra (pip install -e '.[test]')")
    return None


def _module(file: str) -> str:
    """``src/jaxparity/report/html.py`` -> ``jaxparity.report.html``; a file outside src/ stays a path."""
    if not file.startswith("src/"):
        return file
    parts = file[len("src/"):].removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _key(message: str) -> str:
    """An error as the record holds it: no line numbers, also not those inside the message."""
    return re.sub(r" on line \d+", "", message)


def mypy_errors() -> dict[str, list[tuple[str, str]]]:
    """Each module's mypy errors as (``file:line``, message with its code)."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-color-output", "--no-error-summary", "--no-pretty",
                           "--show-error-codes", SOURCE], cwd=ROOT, capture_output=True, text=True)
    errors: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for line in proc.stdout.splitlines():
        if m := _ERROR.match(line):
            errors[_module(m["file"])].append((f"{m['file']}:{m['line']}", m["message"]))
    if proc.returncode not in (0, 1) or (proc.returncode == 1) != bool(errors):
        raise RuntimeError(f"mypy did not run (exit status {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return dict(errors)


def _errors(n: int) -> str:
    return f"{n} error{'s' if n != 1 else ''}"


def record(errors: dict[str, list[tuple[str, str]]]) -> None:
    RECORD.write_text(json.dumps({m: sorted(_key(msg) for _, msg in errs) for m, errs in sorted(errors.items())},
                                 indent=1) + "\n")


def test_ruff_is_clean():
    if why := _missing("ruff"):
        pytest.fail(why, pytrace=False)
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", SOURCE, "tests"],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"ruff check {SOURCE} tests:\n{proc.stdout}{proc.stderr}", pytrace=False)


def test_mypy_errors_are_no_more_than_recorded():
    if why := _missing("mypy"):
        pytest.fail(why, pytrace=False)
    errors = mypy_errors()
    recorded: dict[str, list[str]] = json.loads(RECORD.read_text())
    report = []
    for module, errs in sorted(errors.items()):
        known = recorded.get(module, [])
        if len(errs) <= len(known):
            continue
        left = collections.Counter(known)
        new = []
        for where, msg in errs:
            if left[_key(msg)] > 0:
                left[_key(msg)] -= 1
            else:
                new.append((where, msg))
        report.append(f"{module}: {_errors(len(errs))}, {len(known)} recorded; not recorded:")
        report += [f"  {where}: {msg}" for where, msg in (new or errs)]
    if report:
        pytest.fail("mypy finds errors that tests/typecheck-baseline.json does not record (fix the types; "
                    "`# type: ignore[code]` only where mypy cannot know):\n" + "\n".join(report), pytrace=False)
    fewer = [f"{m} ({len(known)} -> {len(errors.get(m, []))})" for m, known in sorted(recorded.items())
             if len(errors.get(m, [])) < len(known)]
    if fewer:
        warnings.warn(f"fewer mypy errors than recorded in {', '.join(fewer)}: lower the record with `{_RECORD_CMD}`",
                      stacklevel=1)


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(f"usage: {_RECORD_CMD}   (rewrites {RECORD.relative_to(ROOT)} from mypy's errors now)")
    if why := _missing("mypy"):
        sys.exit(why)
    now = mypy_errors()
    record(now)
    print(f"{RECORD.relative_to(ROOT)}: {_errors(sum(map(len, now.values())))} in {len(now)} modules")
