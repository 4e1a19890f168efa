"""Stage 5, mechanism: which known cause is behind the divergence, each decided by the evidence its rule reads
(``rules``: re-runs, the op's own values, the runtime's artifact, candidate semantics), and which layer is at
fault (``layer``)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from ..context import Context
from ..verdicts import CauseVerdict
from .decide import decide_causes, start_ahead
from .instrumented import on_instrumented
from .layer import at_fault

__all__ = ["find_mechanism"]


def find_mechanism(ctx: Context, keep: dict) -> list[CauseVerdict]:
    """Every cause's verdict on this divergence, the layer at fault said; the whole-program re-runs they ask
    for started ahead on threads where they run in a process of their own."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="jaxparity-rerun") as pool:
        start_ahead(ctx, pool)
        causes = on_instrumented(ctx, decide_causes(ctx))
        ctx.settle()  # a re-run started ahead that no experiment needed still ends here
    return at_fault(causes, ctx, keep)
