"""The JAX versions jaxparity is tested on, and what it says of one outside them.

Read from the installed package's metadata, without importing JAX (``import jaxparity`` stays cheap).
The package's declared dependency range (pyproject.toml) says the same; the README's "Versions"
section lists the stacks each range end was measured on.
"""

from __future__ import annotations

import re
from importlib import metadata

__all__ = ["SUPPORTED", "SUPPORTED_TEXT", "installed", "parse", "unsupported"]

SUPPORTED = ((0, 4, 38), (0, 13))  # jax from 0.4.38, below 0.13
SUPPORTED_TEXT = "0.4.38 to 0.12"


def parse(version: str) -> tuple[int, ...]:
    """(0, 12, 0) from '0.12.0.1' or '0.5.0rc1': the first three numbers."""
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def unsupported(jax_version: str | None = None) -> str | None:
    """Why this JAX is outside the tested range, with what to do; None inside it (or with no JAX)."""
    version = jax_version or installed("jax")
    if version is None:
        return None
    low, high = SUPPORTED
    if low <= parse(version) < high:
        return None
    return (f"jax {version} is outside the versions jaxparity is tested on ({SUPPORTED_TEXT}): its results may "
            "be wrong or fail; use a JAX in that range, or report what breaks with `jaxparity paths` output")
