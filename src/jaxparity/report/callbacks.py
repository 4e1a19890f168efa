"""The words for a path that could not run because of the program's host callbacks (``result.HostCallback``,
found by ``localize.callbacks``): the calls and the user's lines, grouped by the library that made them, each
library's switch, and the command that runs again with the switches set. Every reporter says the same."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from ..result import ComparisonResult, HostCallback

__all__ = ["callbacks_line", "switch_command"]


def callbacks_line(callbacks: Sequence[HostCallback], said: str | None, same_as: str | None = None,
                   limit: int = 4, brief: bool = False) -> str:
    """'could not run because of 2 host callbacks in the program (...): pure_callback at model.py:16
    (equinox/_errors.py:111, :115 via equinox/_errors.py:250), from Equinox's error_if ...; switch: ... The
    runtime said: ...'. ``same_as``: a path already named these callbacks; they are not listed again. ``brief``: the
    calls, lines and switches only (a verdict's reason: the runtime's words and what a host callback is, left out)."""
    n = len(callbacks)
    head = f"could not run because of {n} host callback{'s' if n != 1 else ''} in the program"
    said_text = f". The runtime said: {said.strip().splitlines()[0]}" if said and said.strip() else ""
    if same_as is not None:
        return f"{head}, the same as {same_as}{said_text}"
    groups: dict[str | None, list[HostCallback]] = {}
    for cb in callbacks:
        groups.setdefault(cb.library, []).append(cb)
    parts = []
    for calls in groups.values():
        lines = _call_lines(calls)
        shown = ", ".join(lines[:limit]) + (f" and {len(lines) - limit} more" if len(lines) > limit else "")
        origin = f", from {calls[0].origin}" if calls[0].origin else ""
        cb = calls[0]
        remedy = (f"switch: {cb.switch}" if cb.switch else
                  "no switch is known" + (f": {cb.instead}" if cb.instead else ""))
        parts.append(f"{shown}{origin}; {remedy}")
    if brief:
        return f"{head}: " + "; and ".join(parts)
    return (f"{head} (Python called back on the host: eager and jit run them, a program exported or converted for "
            f"another runtime cannot hold them): " + "; and ".join(parts) + said_text)


def _call_lines(calls: Sequence[HostCallback]) -> list[str]:
    """'pure_callback at model.py:16 (equinox/_errors.py:111, :115 via diffrax/_integrate.py:640)': one per
    primitive, user's line and library call, the library's own lines of each together."""
    merged: dict[tuple[str, str | None, str | None], list[str]] = {}
    for cb in calls:
        inner = merged.setdefault((cb.primitive, cb.user_source, cb.via), [])
        if cb.library_source and cb.library_source not in inner:
            inner.append(cb.library_source)
    out = []
    for (primitive, user, via), inner in merged.items():
        first = inner[0] if inner else None
        file = first.rpartition(":")[0] if first else None
        more = [f":{s.rpartition(':')[2]}" if s.rpartition(":")[0] == file else s for s in inner[1:]]
        lib = ", ".join(filter(None, [first, *more])) + (f" via {via}" if via else "")
        out.append(f"{primitive} at {user or first or 'an unknown line'}" + (f" ({lib})" if lib and user else ""))
    return out


def switch_command(result: ComparisonResult, argv: Sequence[str], program: str = "jaxparity") -> str | None:
    """The command that runs again with every switch of the result's host callbacks set in its environment
    ('EQX_ON_ERROR=nan jaxparity compare case.py --paths ...'); None where no callback has one, or where this
    environment has them set already (the callbacks are then there for another reason)."""
    env: dict[str, str] = {}
    for p in result.paths:
        for cb in p.callbacks:
            env.update(cb.env)
    if not env or all(os.environ.get(k) == v for k, v in env.items()):
        return None
    settings = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f"{settings} {program} {shlex.join(argv)}"
