"""Hypothesis strategies that write small random JAX programs, for testing jaxparity itself (issue 55): ops drawn
from a table of primitives and ``jax.numpy``/``jax.nn`` calls, shapes including 0-d and empty, every float width,
inputs at their domain's edges (zeros of both signs, subnormals, the largest finite values, inf and NaN), a
``lax.scan`` loop, and outputs as pytrees of mixed shapes (tuples, dicts, None) and of every dtype (an output may
be cast at the end to bool, int32, complex64 or float8).

A program is data (``Program``): a list of steps over a growing list of values, so Hypothesis shrinks a failure to
the fewest ops, and ``source()`` writes it as a case file a failure can be kept as (a regression test).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

FLOATS = ("float32", "bfloat16", "float16")

# Each op is one line of this file: a divergence's line is where the op is.
UNARY = {
    "exp": lambda a: jnp.exp(a),
    "log": lambda a: jnp.log(a),
    "log1p": lambda a: jnp.log1p(a),
    "tanh": lambda a: jnp.tanh(a),
    "sin": lambda a: jnp.sin(a),
    "sqrt": lambda a: jnp.sqrt(jnp.abs(a)),
    "logistic": lambda a: jax.nn.sigmoid(a),
    "abs": lambda a: jnp.abs(a),
    "neg": lambda a: -a,
    "floor": lambda a: jnp.floor(a),
    "round": lambda a: jnp.round(a),
    "square": lambda a: a * a,
    "gelu": lambda a: jax.nn.gelu(a),
    "softplus": lambda a: jax.nn.softplus(a),
    "rsqrt": lambda a: jax.lax.rsqrt(jnp.abs(a) + 1),
    "expm1": lambda a: jnp.expm1(a),
    "to_bf16": lambda a: a.astype(jnp.bfloat16),
    "to_f32": lambda a: a.astype(jnp.float32),
    "to_f16": lambda a: a.astype(jnp.float16),
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": lambda a, b: jnp.maximum(a, b),
    "min": lambda a, b: jnp.minimum(a, b),
    "atan2": lambda a, b: jnp.arctan2(a, b),
    "where": lambda a, b: jnp.where(a > b, a, b),
    "hypot": lambda a, b: jnp.hypot(a, b),
}
REDUCE = {  # a 0-d result, broadcast back: the values keep one shape
    "sum": lambda a: jnp.sum(a) + jnp.zeros_like(a),
    "mean": lambda a: jnp.mean(a) + jnp.zeros_like(a),
    "max": lambda a: jnp.max(a, initial=-jnp.inf) + jnp.zeros_like(a),
    "logsumexp": lambda a: jax.nn.logsumexp(a) + jnp.zeros_like(a),
    "norm": lambda a: jnp.sqrt(jnp.sum(a * a)) + jnp.zeros_like(a),
}
CASTS = {  # an output's last step: the values of every dtype a report must compare
    "bool": lambda a: a > 0,
    "int32": lambda a: jnp.nan_to_num(jnp.clip(a.astype(jnp.float32), -1e6, 1e6)).astype(jnp.int32),
    "complex64": lambda a: jax.lax.complex(a.astype(jnp.float32), jnp.sin(a.astype(jnp.float32))),
    "float8": lambda a: a.astype(jnp.float8_e4m3fn),
}
EDGES = (0.0, -0.0, 1.0, -1.0, 0.5, 1e-39, -1e-39, 3.0e38, -3.0e38, 88.0, -88.0, 1e-7, float("inf"),
         float("-inf"), float("nan"), 100.0)


@dataclass(frozen=True)
class Step:
    kind: str  # "unary", "binary", "reduce", "scan", "matmul", "cast" (an output's dtype)
    name: str
    args: tuple[int, ...]  # positions of the values it reads


@dataclass(frozen=True)
class Program:
    shape: tuple[int, ...]
    dtypes: tuple[str, ...]  # of the inputs
    inputs: tuple[tuple[float, ...], ...]  # flat values of each input
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]  # positions of the values returned
    structure: str  # "tuple", "dict", "single", "with_none"

    def args(self) -> tuple[np.ndarray, ...]:
        import ml_dtypes

        out = []
        for dtype, flat in zip(self.dtypes, self.inputs):
            dt = np.dtype(getattr(ml_dtypes, dtype)) if dtype == "bfloat16" else np.dtype(dtype)
            with np.errstate(over="ignore", invalid="ignore"):
                out.append(np.asarray(flat, np.float64).astype(dt).reshape(self.shape))
        return tuple(out)

    def fn(self) -> Any:
        """The program as a function of its inputs (every op at this module's ``_apply``: a line of its own)."""
        steps, outputs, structure = self.steps, self.outputs, self.structure

        def program(*xs: Any) -> Any:
            values = list(xs)
            for s in steps:
                values.append(_apply(s, values))
            got = [values[k] for k in outputs]
            if structure == "single":
                return got[0]
            if structure == "dict":
                return {f"o{j}": g for j, g in enumerate(got)}
            if structure == "with_none":
                return (got[0], None, tuple(got[1:]))
            return tuple(got)

        return program

    def literal(self) -> str:
        """The program as Python that builds it again: a failure kept as a regression test (``test_fuzz.py``)."""
        def number(x: float) -> str:
            return f"float('{x}')" if not np.isfinite(x) else repr(x)

        inputs = "(" + ", ".join("(" + "".join(f"{number(x)}, " for x in flat) + ")" for flat in self.inputs) + ",)"
        return (f"Program(shape={self.shape!r}, dtypes={self.dtypes!r}, inputs={inputs}, steps={self.steps!r}, "
                f"outputs={self.outputs!r}, structure={self.structure!r})")


def _apply(s: Step, values: list[Any]) -> Any:
    a = jnp.asarray(values[s.args[0]])
    b = jnp.asarray(values[s.args[1]]).astype(a.dtype) if len(s.args) > 1 else None
    if s.kind == "unary":
        return UNARY[s.name](a)
    if s.kind == "binary":
        return BINARY[s.name](a, b)
    if s.kind == "reduce":
        return REDUCE[s.name](a)
    if s.kind == "cast":
        return CASTS[s.name](a)
    if s.kind == "scan":  # along the first axis, a tanh recurrence
        return a if a.ndim == 0 or a.shape[0] == 0 else _scan(a)
    if a.ndim == 2 and a.shape[0] >= a.shape[1]:  # matmul: a @ b.T, cut back to a's shape
        return _matmul(a, b)
    return a * b


def _scan(a: Any) -> Any:
    return jax.lax.scan(lambda h, x: (jnp.tanh(h * x + 0.5), h), jnp.zeros_like(a[0]), a)[1]


def _matmul(a: Any, b: Any) -> Any:
    return (a @ b.T)[:, : a.shape[1]]


@st.composite
def programs(draw: Any, max_steps: int = 6) -> Program:
    """A small program: 1-3 inputs of one shape (0-d, empty, 1-d, 2-d), each a float width, at edges or not."""
    shape = draw(st.sampled_from([(), (0,), (1,), (5,), (3, 4), (4, 4), (2, 3)]))
    n_in = draw(st.integers(1, 3))
    dtypes = tuple(draw(st.sampled_from(FLOATS)) for _ in range(n_in))
    size = int(np.prod(shape, dtype=np.int64))
    plain = st.floats(-8, 8, allow_nan=False, width=32)
    edgy = st.one_of(plain, plain, plain, st.sampled_from(EDGES))  # an edge value among ordinary ones, at times
    inputs = tuple(tuple(draw(st.lists(draw(st.sampled_from([plain, plain, edgy])), min_size=size, max_size=size)))
                   for _ in range(n_in))
    steps: list[Step] = []
    mixed = draw(st.booleans())  # a model's pattern: computed in bfloat16, widened at the end (excess precision)
    if mixed:
        steps.append(Step("unary", "to_bf16", (0,)))
    for _ in range(draw(st.integers(1, max_steps))):
        n = n_in + len(steps)
        kind = draw(st.sampled_from(["unary", "unary", "binary", "binary", "reduce", "scan", "matmul"]))
        if kind == "unary":
            steps.append(Step(kind, draw(st.sampled_from(sorted(UNARY))), (draw(st.integers(0, n - 1)),)))
        elif kind == "reduce":
            steps.append(Step(kind, draw(st.sampled_from(sorted(REDUCE))), (draw(st.integers(0, n - 1)),)))
        elif kind == "scan":
            steps.append(Step(kind, "scan", (draw(st.integers(0, n - 1)),)))
        else:
            name = draw(st.sampled_from(sorted(BINARY))) if kind == "binary" else "matmul"
            steps.append(Step(kind, name, (draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)))))
    if mixed:
        steps.append(Step("unary", "to_f32", (n_in + len(steps) - 1,)))
    total = n_in + len(steps)
    outputs = tuple(draw(st.lists(st.integers(n_in, total - 1), min_size=1, max_size=3, unique=True)))
    if mixed and total - 1 not in outputs:
        outputs = (total - 1, *outputs[:2])
    casts = [Step("cast", draw(st.sampled_from(sorted(CASTS))), (k,)) for k in outputs if draw(st.integers(0, 4)) == 0]
    if casts:
        steps += casts
        cast = {s.args[0]: total + j for j, s in enumerate(casts)}
        outputs = tuple(cast.get(k, k) for k in outputs)
    structure = draw(st.sampled_from(["single", "tuple", "dict", "with_none"]))
    return Program(shape, dtypes, inputs, tuple(steps), outputs, structure)


def invariants(result: Any) -> list[str]:
    """What every report keeps, broken (beyond ``verdict.violations``, which the suite checks everywhere): no stage
    error, the exit status consistent with the table, a line of the program named for every explained divergence."""
    broken = []
    for v in result.verdicts:
        who = ", ".join(v.paths)
        if v.stage_errors:
            broken.append(f"{who}: stage errors: {'; '.join(v.stage_errors)}")
        if v.kind == "divergence" and v.explained and v.cause not in (None, "other-lowering", "unknown", "path-option"):
            if not v.carriers or not v.carriers[0].line:  # a mechanism, not a catch-all: shown on an op
                broken.append(f"{who}: a divergence with a mechanism ({v.title}) and no line")
    differs = {p.spec for p in result.paths if p.gated and p.verdict == "differs"}
    judged = {p for v in result.verdicts if v.kind in ("divergence", "noise") for p in v.paths}
    if not differs <= judged:
        broken.append(f"paths that differ in the table but not in a verdict: {sorted(differs - judged)}")
    if result.passed != all(v.passes for v in result.verdicts):
        broken.append("the exit status is not the verdicts'")
    return broken


__all__ = ["Program", "Step", "invariants", "programs"]
