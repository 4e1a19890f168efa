"""What a cache key holds. Every key is a SHA-256 of JSON parts: the kind of entry, the program as
the converter or compiler reads it, the options that change what it makes, the versions of every
package that takes part, and, where the artifact is compiled for this CPU, the CPU."""

from __future__ import annotations

import hashlib
import json
import platform
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = ["fingerprint", "machine", "package_versions"]


def fingerprint(*parts: Any) -> str:
    """The key of these parts (JSON, keys sorted; anything else by ``repr``)."""
    text = json.dumps(parts, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def package_versions(*packages: str) -> dict[str, str]:
    """The installed version of each package, and always jaxparity's, jax's and jaxlib's."""
    found = {}
    for name in ("jaxparity", "jax", "jaxlib", *packages):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


@lru_cache(maxsize=1)
def machine() -> str:
    """This CPU, for artifacts compiled for it (XLA:CPU and IREE compile for the host's features): the
    architecture, the model name and the feature flags the kernel reports."""
    parts = [platform.machine(), platform.system()]
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        for field in ("model name", "flags", "Features"):  # x86 and arm name their features differently
            line = next((ln for ln in info.splitlines() if ln.startswith(field)), "")
            parts.append(line.split(":", 1)[-1].strip())
    except OSError:
        parts.append(platform.processor())
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
