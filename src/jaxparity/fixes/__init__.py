"""Model-side fixes: the user's function re-emitted with a change that every runtime keeps.

- ``round_like_declared(fn)`` (``rounding``): a ``lax.reduce_precision`` after every narrow-float
  result, so compilers that keep excess precision round where the program declares.
- ``well_conditioned(fn)`` (``conditioning``): each recognised ill-conditioned form (a one-pass
  variance, an unshifted log-sum-exp) computed in its well-conditioned form, so rounding noise is not
  amplified into a difference between runtimes.
"""

from .conditioning import REMEDIES, forms_at, rewrites, well_conditioned
from .rounding import ROUND_IN_F32, inserted_roundings, round_like_declared, write_fixed_case

__all__ = ["REMEDIES", "ROUND_IN_F32", "forms_at", "inserted_roundings", "rewrites", "round_like_declared", "well_conditioned",
           "write_fixed_case"]
