"""Like against like: which run a path is explained against.

A difference between devices is measured between the same mode on each (jit against jit, eager against
eager): where a path differs from the baseline both in its device and in how it computes (``jit:device=cpu``
against eager on a TPU), the path that computes as it does on the baseline's device (``jit`` there) is its
counterpart, so that a compiler's difference is not called the device's, nor the device's the compiler's. Every
other path is explained against the baseline.
"""

from __future__ import annotations

from typing import Any

from ..paths.base import PathOptionError, parse_spec, spec_env

__all__ = ["counterpart"]

def _mode(spec: str) -> tuple[str, tuple[tuple[str, str], ...], str | None] | None:
    """How a path computes, whatever its device: (name, options but the device, environment)."""
    try:
        name, options = parse_spec(spec)
    except PathOptionError:
        return None
    return name, tuple(sorted((k, v) for k, v in options.items() if k != "device")), spec_env(spec)


def counterpart(result: Any, spec: str) -> str:
    """The path ``spec`` is explained against in ``result``: the baseline, unless the two ran on different devices
    and compute otherwise (eager against jit), and a path that computes as ``spec`` does ran on the baseline's
    device; then that path."""
    paths = {p.spec: p for p in result.paths}
    me, base = paths.get(spec), paths.get(result.baseline)
    if me is None or base is None or not me.device or not base.device or me.device == base.device:
        return result.baseline
    mode = _mode(spec)
    if mode is None or mode == _mode(result.baseline):
        return result.baseline
    for p in result.paths:
        if p.spec not in (spec, result.baseline) and p.status == "ok" and p.device == base.device \
                and not p.reference and _mode(p.spec) == mode:
            return p.spec
    return result.baseline
