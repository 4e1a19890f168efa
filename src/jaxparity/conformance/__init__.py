"""Conformance suite: JAX's own primitive test corpus through every path, judged independently.

``load_corpus``/``stratified`` pick harnesses, ``run_suite`` runs, audits (with an oracle that
shares no code with ``jaxparity.metrics``) and classifies each declared-vs-eager disagreement as
the tool's error, XLA's error, within JAX's documented accuracy, or the same decomposition up to
sign/order; ``render`` writes ``docs/conformance.md``. Imports of JAX, mpmath and scipy stay
inside the functions that need them.
"""

from __future__ import annotations

from .classify import CLASSES, Outcome, classify
from .corpus import load_corpus, stratified
from .harness import HarnessRun, audit, run_harness
from .oracle import count_differ, round_to, same_values, ulp_distance
from .report import Totals, render, totals
from .suite import run_one, run_suite

__all__ = ["CLASSES", "HarnessRun", "Outcome", "Totals", "audit", "classify", "count_differ", "load_corpus",
           "render", "round_to", "run_harness", "run_one", "run_suite", "same_values", "stratified", "totals",
           "ulp_distance"]
