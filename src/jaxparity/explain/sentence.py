"""Stage 7, the sentence: the explanation's summary in prose, rendered from its verdicts by the short
explanation every reporter shows (``report.brief``): what the JSON, the pytest message and a sweep keep."""

from __future__ import annotations

import dataclasses

from .explanation import PathExplanation

__all__ = ["summarize"]


def summarize(found: PathExplanation) -> PathExplanation:
    """``found`` with its summary written."""
    from ..report.brief import sentences

    return dataclasses.replace(found, summary=sentences(found))
