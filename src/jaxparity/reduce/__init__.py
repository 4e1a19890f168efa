"""``jaxparity reduce``: a standalone, minimal, verified reproducer of one divergence (``reducer``),
cut from the program as a region of ops (``region``), written as a script (``script``, ``source``)
with a bug-report draft beside it (``report``)."""

from .reducer import NotReproduced, Reduction, ReduceError, reduce_case, verify_script

__all__ = ["NotReproduced", "Reduction", "ReduceError", "reduce_case", "verify_script"]
