"""``jaxparity sweep SPEC.toml``: a matrix of cases x input sets x paths, one task per cell, run by a
local process pool or a Ray cluster, streamed into an append-only store that an interrupted sweep
resumes from; summarized across the matrix as a table, JSON and HTML.

``spec`` reads the TOML; ``cells`` expands the matrix and runs one cell; ``store`` keeps results
(SQLite) and arrays (safetensors); ``executors`` runs the cells; ``summary`` reads the store back.
"""

from .cells import Cell, run_cell
from .executors import run_sweep
from .spec import SpecError, SweepSpec, load_spec
from .store import Store
from .summary import summarize

__all__ = ["Cell", "SpecError", "Store", "SweepSpec", "load_spec", "run_cell", "run_sweep", "summarize"]
