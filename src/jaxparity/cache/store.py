"""The cache on disk: ``<root>/artifacts/<kind>/<key>/``, one directory per entry, and JAX's compiled
programs in ``<root>/jax/<CPU>-<compression>/``; ``<root>`` is shared with the virtual environments of ``--env``
(``<root>/envs``, never evicted).

An entry is made in a scratch directory and renamed into place whole, its ``meta.json`` written last:
an interrupted or crashed maker leaves no entry, and two processes making the same one keep the first
(the second's is dropped). Reading an entry touches its ``meta.json``; when the cache outgrows its
bound, the entries read longest ago go first, down to 90% of it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SINCE", "Cache", "Entry", "cache", "disable", "enabled", "jax_cache"]

_META = "meta.json"
SINCE = "JAXPARITY_COMMAND_START"  # when the running command started (time.time()), for its workers too


@dataclass(frozen=True)
class Entry:
    """One entry: its directory (read it, never write it), its key and what its maker recorded."""

    dir: Path
    kind: str
    key: str
    meta: dict[str, Any]
    reused: bool  # found in the cache, not made by this call

    @property
    def short(self) -> str:
        return self.key[:12]

    @property
    def earlier(self) -> bool:
        """Made before this command started (``SINCE``; always, outside a command): only such an entry is
        said to be reused. One that another path of the same command made minutes ago is its own work."""
        return float(self.meta.get("made", 0.0)) < float(os.environ.get(SINCE, "inf"))


class Cache:
    """Entries under ``root`` (``<cache>/artifacts``); ``jax``: JAX's own directory, counted in the bound."""

    def __init__(self, root: str | Path, max_bytes: int, jax: str | Path | None = None) -> None:
        self.root, self.max_bytes = Path(root), max_bytes
        self.jax = Path(jax) if jax is not None else self.root / ".jax-none"

    def _dir(self, kind: str, key: str) -> Path:
        return self.root / kind / key

    def get(self, kind: str, key: str) -> Entry | None:
        where = self._dir(kind, key)
        try:
            meta = json.loads((where / _META).read_text())
            os.utime(where / _META)  # read now: the last to go
        except (OSError, ValueError):
            return None
        return Entry(where, kind, key, meta, reused=True)

    def fetch(self, kind: str, key: str, make: Callable[[Path], dict[str, Any]]) -> Entry:
        """The entry ``(kind, key)``: found, or made by ``make(directory)`` (which writes its files there
        and returns what to record) and kept. What ``make`` raises is raised, and nothing is kept."""
        found = self.get(kind, key)
        if found is not None:
            return found
        self.root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{kind}-", dir=self.root))
        try:
            meta = dict(make(scratch) or {})
            meta["bytes"] = sum(f.stat().st_size for f in scratch.rglob("*") if f.is_file())
            meta["made"] = time.time()
            (scratch / _META).write_text(json.dumps(meta, default=str))
            target = self._dir(kind, key)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(scratch, target)
            except OSError:  # another process made it first: theirs is kept
                shutil.rmtree(scratch, ignore_errors=True)
                found = self.get(kind, key)
                if found is not None:
                    return Entry(found.dir, kind, key, found.meta, reused=False)
                raise
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self.evict()
        return Entry(target, kind, key, meta, reused=False)

    def entries(self) -> list[tuple[float, int, Path]]:
        """(last read, bytes, directory) of every entry."""
        found: list[tuple[float, int, Path]] = []
        if not self.root.is_dir():
            return found
        for kind in self.root.iterdir():
            if not kind.is_dir() or kind.name.startswith("."):
                continue
            for entry in kind.iterdir():
                meta = entry / _META
                try:
                    found.append((meta.stat().st_mtime, int(json.loads(meta.read_text()).get("bytes", 0)), entry))
                except (OSError, ValueError):
                    continue
        return found

    def by_kind(self) -> dict[str, tuple[int, int]]:
        """(entries, bytes) of each kind of entry (``savedmodel``, ``tflite``...)."""
        found: dict[str, tuple[int, int]] = {}
        for _, size, where in self.entries():
            n, total = found.get(where.parent.name, (0, 0))
            found[where.parent.name] = (n + 1, total + size)
        return dict(sorted(found.items()))

    def jax_bytes(self) -> int:
        return _tree_bytes(self.jax)

    def clear(self) -> None:
        """Every entry and JAX's compiled programs gone (the environments of ``--env`` stay)."""
        for tree in (self.root, self.jax):
            shutil.rmtree(tree, ignore_errors=True)

    def size(self) -> int:
        return sum(b for _, b, _ in self.entries()) + _tree_bytes(self.jax)

    def evict(self) -> None:
        """Drop the entries read longest ago while the cache is over its bound (down to 90% of it)."""
        entries = sorted(self.entries())
        total = sum(b for _, b, _ in entries) + _tree_bytes(self.jax)
        if total <= self.max_bytes:
            return
        for _, size, where in entries:
            if total <= 0.9 * self.max_bytes:
                break
            shutil.rmtree(where, ignore_errors=True)
            total -= size
        if total > self.max_bytes:  # JAX's compiled programs beyond the bound: oldest first too
            files = sorted((f.stat().st_mtime, f) for f in self.jax.rglob("*") if f.is_file())
            for _, f in files:
                if total <= 0.9 * self.max_bytes:
                    break
                size = f.stat().st_size
                f.unlink(missing_ok=True)
                total -= size


def _tree_bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0


def enabled() -> bool:
    return os.environ.get("JAXPARITY_NO_CACHE", "") in ("", "0")


def disable() -> None:
    """No cache for this process and every process it starts (``--no-cache``)."""
    os.environ["JAXPARITY_NO_CACHE"] = "1"


def root() -> Path:
    """``$JAXPARITY_CACHE``, else ``$XDG_CACHE_HOME/jaxparity``, else ``~/.cache/jaxparity``."""
    if os.environ.get("JAXPARITY_CACHE"):
        return Path(os.environ["JAXPARITY_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jaxparity"


def cache() -> Cache | None:
    """The cache, or None where it is off."""
    if not enabled():
        return None
    return Cache(root() / "artifacts", int(float(os.environ.get("JAXPARITY_CACHE_MAX_MB", "4096")) * 2**20),
                 root() / "jax")


def jax_cache() -> bool:
    """Point JAX's persistent compilation cache at ``<root>/jax/<this CPU>-<compression>`` in this process (a
    worker, a serving process, the command line), every program kept however fast it compiled. JAX keys each
    program by its HLO, compile options, XLA flags and versions; the directory adds the CPU, since
    XLA:CPU compiles for the host's features, and how JAX compresses what it keeps (zstd where it can, in a
    fifth of zlib's time; an environment of ``--env`` without zstandard keeps its zlib programs apart). A
    program another of jaxparity's processes is compiling is waited for and read, not compiled twice
    (``compiling``: markers in ``<root>/compiling/<this CPU>``).
    Left alone where the cache is off or the user has set JAX's own cache directory. True where it is on."""
    import jax

    from ..jaxcompat import cache_compression
    from .keys import machine

    if not enabled():
        return False
    if getattr(jax.config, "jax_compilation_cache_dir", None):
        return True  # the user's own: theirs to keep
    try:
        jax.config.update("jax_compilation_cache_dir", str(root() / "jax" / f"{machine()}-{cache_compression()}"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except (AttributeError, ValueError):  # an older JAX without one of these options
        return False
    _one_compile_at_a_time()
    return True


def _one_compile_at_a_time() -> None:
    """A program that another of jaxparity's processes is compiling is waited for and read from JAX's cache,
    not compiled again (``compiling``): a command's workers load the same case at the same time."""
    from ..jaxcompat import one_compile_per_program
    from .compiling import Markers
    from .keys import machine

    markers = Markers(root() / "compiling" / machine())
    try:
        one_compile_per_program(markers.claim, markers.release)
    except ImportError:  # pragma: no cover - depends on JAX internals
        pass
