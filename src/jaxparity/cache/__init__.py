"""What jaxparity keeps between commands: converted models and compiled programs, keyed so that a
changed model, weight, option or package version never finds an old one.

``store`` is the cache on disk (a directory per entry, written whole or not at all, bounded in size,
least recently used first out); ``keys`` says what a key holds. ``jax_cache`` points JAX's own
persistent compilation cache into it for the processes jaxparity starts, and ``compiling`` has one of
them compile a program the others wait for (a command's workers load the same case at the same time).

The place: ``$JAXPARITY_CACHE``, else ``$XDG_CACHE_HOME/jaxparity``, else ``~/.cache/jaxparity`` (the
virtual environments of ``--env`` live there too, in ``envs/``, and are never evicted). Its bound:
``$JAXPARITY_CACHE_MAX_MB`` (default 4096) over converted models and compiled programs. Off:
``--no-cache`` or ``JAXPARITY_NO_CACHE=1``.
"""

from __future__ import annotations

from .keys import fingerprint, machine, package_versions
from .store import Cache, Entry, cache, disable, enabled, jax_cache, root

__all__ = ["Cache", "Entry", "cache", "disable", "enabled", "fingerprint", "jax_cache", "machine",
           "package_versions", "root"]
