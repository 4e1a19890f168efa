"""Comparisons that show nothing: outputs that every path can agree on without computing the model.

All-NaN outputs agree with all-NaN outputs; a zero-initialised head gives the same constant on every
path; outputs that do not move when the inputs do are a function of the weights only. A path can
agree with the baseline on such outputs bit for bit and still compute every layer differently. Each
finding names the output and what is degenerate about it; where every output is degenerate the
comparison hides the model (``hides``) and never passes.

A discrete output (bool, integers) takes few values, so equal elements are often the right answer
(``lax.min([True, False], [False, False])`` is ``[False, False]``): it is judged by whether its elements
could have differed by chance, each at least one bit, and flagged only where at least
``DISCRETE_BITS`` elements coincide beyond the first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .metrics import UnsupportedDtype, as_wide, dtype_class
from .result import Degenerate

__all__ = ["DISCRETE_BITS", "find_degenerate"]

# Elements of a discrete output that must coincide, beyond the first, before equality says the output does
# not depend on the inputs: by chance, at one bit each, 2**-10 < 0.1%.
DISCRETE_BITS = 10

def find_degenerate(outputs: Sequence[tuple[str, np.ndarray]],
                    samples: Sequence[Sequence[tuple[str, np.ndarray]]] = (),
                    varied: bool = True, varied_inputs: bool = True, batch: int | None = None) -> tuple[Degenerate, ...]:
    """The baseline's ``outputs`` that show nothing; ``samples``: the baseline's outputs on every drawn
    input set (many-inputs mode), to find outputs the varied inputs do not move (``varied``: whether
    any input was varied at all). ``varied_inputs``: some float input holds more than one value; where
    none does (``jnp.ones(3)``), a constant output is the example's, not a sign of the model. ``batch``:
    the leading size of the data leaves whose examples differ; an output of that leading size whose
    rows are all the same gives every example one answer (a zero kernel before a bias)."""
    found: list[Degenerate] = []
    # By the metric's dtype class, not numpy's kind: bfloat16, float8 and int4 (ml_dtypes) are kind 'V'.
    numeric = [(n, np.asarray(a), k) for n, a in outputs if (k := _class(a)) is not None and np.size(a)]
    for name, a, kind in numeric:
        if kind in ("float", "complex"):
            wide = as_wide(a)
            finite = int(np.count_nonzero(np.isfinite(wide)))
            if finite == 0:
                what = "all NaN" if np.isnan(wide).all() else "NaN or inf"
                found.append(Degenerate(name, "non-finite", f"{name}: 0 of {a.size} outputs finite ({what})"))
                continue
        discrete = kind in ("bool", "int", "uint")
        if a.size > 1 and varied_inputs and _constant(a) and (not discrete or a.size - 1 >= DISCRETE_BITS):
            value = a.reshape(-1)[0]
            value = (value.item() if kind == "bool" else int(value) if kind in ("int", "uint") else complex(value)
                     if kind == "complex" else float(value))
            found.append(Degenerate(name, "constant", f"{name}: every one of its {a.size} elements is {value:g}"
                                    if isinstance(value, float) else f"{name}: every one of its {a.size} elements is "
                                    f"{value}"))
            continue
        coincide = (batch - 1) * (a.size // batch) if batch else 0
        if (batch and a.ndim >= 1 and a.shape[0] == batch and _rows_same(a)
                and (not discrete or coincide >= DISCRETE_BITS)):
            found.append(Degenerate(name, "independent of the inputs",
                                    f"{name}: the same for each of the {batch} examples of the batch, whose inputs "
                                    "differ (it does not depend on them)"))
            continue
        if (len(samples) > 1 and varied and all(_same(dict(s).get(name), a) for s in samples)
                and (not discrete or (len(samples) - 1) * a.size >= DISCRETE_BITS)):
            found.append(Degenerate(name, "independent of the inputs",
                                    f"{name}: the same on all {len(samples)} samples (it does not depend on the "
                                    "varied inputs)"))
    if numeric and len({d.output for d in found}) == len(numeric):
        found = [Degenerate(d.output, d.kind, d.text, hides=True) for d in found]
    return tuple(found)


def _class(a: np.ndarray) -> str | None:
    """The output's dtype class where it holds numbers (bfloat16 and float8 are floats), else None."""
    try:
        kind = dtype_class(np.asarray(a).dtype)
    except UnsupportedDtype:
        return None
    return kind if kind != "empty" else None


def _rows_same(a: np.ndarray) -> bool:
    rows = a.reshape(a.shape[0], -1)
    return bool(np.all(rows == rows[:1]))  # a NaN row is never the same as itself: not flagged here


def _constant(a: np.ndarray) -> bool:
    flat = a.reshape(-1)
    return bool(np.all(flat == flat[0]))  # +0 and -0 alike; a NaN among numbers is not constant


def _same(b: np.ndarray | None, a: np.ndarray) -> bool:
    return b is not None and np.shape(b) == np.shape(a) and np.asarray(b).tobytes() == a.tobytes()
