"""pytest plugin: a report file for every test that fails a ``jaxparity.testing.assert_parity``.

Registered as the ``jaxparity`` pytest11 entry point, so it is loaded by every pytest session in an
environment where jaxparity is installed: importing it must stay cheap (no JAX, no NumPy); it only
imports jaxparity's reporters when a parity assertion has failed.

    pytest --jaxparity-report reports/

writes ``reports/<sanitized test id>.html`` (or ``.json`` where the HTML reporter is unavailable)
for each test that failed with a ``ParityError``, names the file in the test's failure output, and
lists the files in the terminal summary. Without the option it does nothing.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Any

import pytest

__all__ = ["report_name"]

_KEY = "jaxparity_report"
_MAX_NAME = 120


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jaxparity")
    group.addoption("--jaxparity-report", metavar="DIR", default=None,
                    help="write a jaxparity report (HTML, else JSON) into DIR for each test that fails "
                         "jaxparity.testing.assert_parity")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Summary(), "jaxparity-summary")


class _Summary:
    """The reports written in this session (read back from each test report, so that it also works
    where tests run in worker processes), listed at the end."""

    def __init__(self) -> None:
        self.written: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.written.extend(str(v) for k, v in report.user_properties if k == _KEY)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.written:
            terminalreporter.section("jaxparity reports")
            for path in self.written:
                terminalreporter.write_line(f"jaxparity: wrote {path}")


def report_name(nodeid: str) -> str:
    """A file name (no suffix) for a test id: safe characters only, unique, not too long."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.replace("::", "__")).strip("._") or "test"
    if len(name) > _MAX_NAME:
        digest = hashlib.sha1(nodeid.encode()).hexdigest()[:10]
        name = f"{name[:_MAX_NAME - 11]}-{digest}"
    return name


def _parity_error(exc: BaseException | None) -> Any:
    """The ParityError in ``exc`` or its cause/context chain, if any."""
    testing = sys.modules.get("jaxparity.testing")
    if testing is None:  # never imported, so no parity assertion ran in this process
        return None
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, testing.ParityError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _write(result: Any, base: Path) -> tuple[Path, str | None]:
    """Write the report; returns (file, a note when HTML could not be written)."""
    base.parent.mkdir(parents=True, exist_ok=True)
    try:
        from jaxparity.report.html import write_html
    except ImportError as e:
        note = f"HTML reporter unavailable ({e}); wrote the JSON report instead"
    else:
        target = base.parent / f"{base.name}.html"
        try:
            write_html(result, target)
            return target, None
        except Exception as e:  # a broken report must not hide the test failure
            note = f"HTML report failed ({type(e).__name__}: {e}); wrote the JSON report instead"
    target = base.parent / f"{base.name}.json"
    target.write_text(result.to_json(), encoding="utf-8")
    return target, note


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    directory = item.config.getoption("jaxparity_report")
    if not directory or call.excinfo is None:
        return rep
    err = _parity_error(call.excinfo.value)
    if err is None or getattr(err, "result", None) is None:
        return rep
    name = report_name(item.nodeid) + ("" if call.when == "call" else f"-{call.when}")
    try:
        path, note = _write(err.result, item.config.invocation_params.dir / directory / name)
    except Exception as e:
        rep.sections.append(("jaxparity", f"jaxparity: could not write a report: {type(e).__name__}: {e}"))
        return rep
    if note:  # the path itself is listed once, in the session's summary
        rep.sections.append(("jaxparity", f"jaxparity: {note}"))
    rep.user_properties.append((_KEY, f"{path} ({item.nodeid})"))  # travels to the controller under pytest-xdist
    return rep
