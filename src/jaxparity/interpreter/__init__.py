"""Reference evaluation of a jaxpr, equation by equation, in float64.

Each equation is computed in float64 (complex128) from its inputs; a :class:`Semantics`
says how its float results are then rounded. The two original modes are strings:

* ``"declared"`` (``Semantics.declared()``): every float result is rounded *once* to the
  equation's declared output dtype (the program's declared semantics: a bf16 conv is exact
  math rounded to bf16).
* ``"f64"`` (``Semantics.ideal()``): float results are never rounded (float64 / complex128
  throughout).

The other candidates model what compilers and runtimes actually do (skipped roundings,
float32 instead of bf16, narrow accumulators, flushed subnormals, fused multiply-adds);
see :class:`Semantics`. Values are held in the dtype this semantics rounded them to: the
declared dtype, float32 (a narrow value kept in float32), or float64 (never rounded).

Integer and bool values keep their exact dtypes in every mode; PRNG key values stay JAX key
arrays (numpy cannot hold them); every other value is a numpy array. The JAX-version-specific
facts sit in ``jaxparity.jaxcompat``; the rule tables (``_CALL_PARAM``, ``_RECURSE``, ``_BIT_LEVEL``,
``_NUMPY``) pick how each primitive is evaluated; anything else is bound with float64
operands through a cache of jitted callables. Samplers (random_gamma) are bit-level: run on
the declared dtypes, op by op as eager runs them, so that they draw eager's stream.

The package, one concept per module: ``semantics`` (the candidate semantics and how a value is
held under each), ``relaxations`` (which results a semantics rounds differently, from their
consumers), ``evaluate`` (jaxprs and equations), ``primitives`` (one primitive in float64: the
numpy rules and the jitted-bind fallback), ``accumulation`` (narrow sequential sums) and
``jaxparity.jaxcompat`` (the JAX-version-specific details).
"""

from __future__ import annotations

from .evaluate import EqnEvent, InterpretError, evaluate_eqn, evaluate_jaxpr, interpret, trace
from .semantics import DECLARED, IDEAL, Mode, Semantics

__all__ = ["DECLARED", "EqnEvent", "IDEAL", "InterpretError", "Mode", "Semantics", "evaluate_eqn",
           "evaluate_jaxpr", "interpret", "trace"]
