"""The sweep's append-only store: one SQLite row per finished cell (``results.db``), the outputs of
each diverging cell as safetensors (``arrays/<digest>.safetensors``), and the spec it was made for.

Only the process that drives the sweep writes, one cell at a time, in a transaction; a cell's key is
the primary key, so a cell that reports twice (a retried task) is kept once. A sweep run again on the
same store skips the cells already in it: an interrupted sweep resumes without recomputing or losing
one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..arrayio import save_arrays
from .cells import Cell

__all__ = ["Store", "StoreError"]

_COLUMNS = ("key", "case_", "sample", "path", "status", "verdict", "max_ulp", "n_differ", "size", "cause", "op",
            "line", "summary", "error", "seconds", "arrays", "degenerate", "baseline_digest")
_ADDED = ("degenerate", "baseline_digest")  # columns newer than the first stores: added to an older one


class StoreError(ValueError):
    """The store belongs to another sweep, or cannot be written."""


class Store:
    def __init__(self, directory: str | Path, spec_text: str | None = None) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "arrays").mkdir(exist_ok=True)
        self.db = sqlite3.connect(self.dir / "results.db", timeout=60)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash of this process loses no committed cell
        self.db.execute("CREATE TABLE IF NOT EXISTS cells (key TEXT PRIMARY KEY, case_ TEXT, sample INTEGER, "
                        "path TEXT, status TEXT, verdict TEXT, max_ulp INTEGER, n_differ INTEGER, size INTEGER, "
                        "cause TEXT, op TEXT, line TEXT, summary TEXT, error TEXT, seconds REAL, arrays TEXT, "
                        "written REAL DEFAULT (julianday('now')), degenerate TEXT, baseline_digest TEXT)")
        have = {row[1] for row in self.db.execute("PRAGMA table_info(cells)")}
        for column in _ADDED:
            if column not in have:
                self.db.execute(f"ALTER TABLE cells ADD COLUMN {column} TEXT")
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
        self.db.commit()
        if spec_text is not None:
            row = self.db.execute("SELECT v FROM meta WHERE k = 'spec'").fetchone()
            if row is None:
                self.db.execute("INSERT INTO meta VALUES ('spec', ?)", (spec_text,))
                self.db.commit()
            elif row[0] != spec_text:
                raise StoreError(f"{self.dir} holds the results of another sweep spec: give another --store, or "
                                 "remove it to start again")

    def done(self) -> set[str]:
        return {k for (k,) in self.db.execute("SELECT key FROM cells")}

    def add(self, cell: Cell, record: dict[str, Any]) -> bool:
        """Keep one finished cell; False when it was already kept (a duplicate report)."""
        arrays = record.pop("arrays", None)
        name = None
        if arrays:
            name = f"arrays/{cell.digest}.safetensors"
            save_arrays(self.dir / name, arrays)
        values = {**record, "case_": record.get("case"), "key": cell.key, "arrays": name}
        with self.db:
            cur = self.db.execute(f"INSERT OR IGNORE INTO cells ({', '.join(_COLUMNS)}) VALUES "
                                  f"({', '.join('?' for _ in _COLUMNS)})", [values.get(c) for c in _COLUMNS])
        return cur.rowcount == 1

    def rows(self) -> Iterator[dict[str, Any]]:
        cur = self.db.execute(f"SELECT {', '.join(_COLUMNS)} FROM cells ORDER BY case_, path, sample")
        for row in cur:
            r = dict(zip(_COLUMNS, row))
            r["case"] = r.pop("case_")
            yield r

    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM cells").fetchone()[0]

    def close(self) -> None:
        self.db.close()

    @staticmethod
    def spec_text(spec: Any) -> str:
        from dataclasses import asdict

        return json.dumps(asdict(spec), sort_keys=True, default=str)
