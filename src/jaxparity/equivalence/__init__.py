"""Comparisons that respect the math: outputs that are defined only up to sign, phase or order.

An eigenvector is defined up to its sign (real) or phase (complex), the eigenvalues of a general
matrix have no order, a QR factorization is unique only up to a diagonal of signs, and an unstable
sort may order equal keys either way. Comparing such outputs element by element reports a
divergence where the math has none. ``producers`` (needs JAX) finds which outputs of a function come
straight from such an operation; ``rules`` (numpy only) brings two paths' values of those outputs to
one canonical form before they are measured, and names the rule it used for the report.
"""

from .rules import OutputRule, align

__all__ = ["OutputRule", "align"]
