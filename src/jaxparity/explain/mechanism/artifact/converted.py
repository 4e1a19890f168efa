"""What the converter made of the program, read on the runtime's own run of its artifact.

- ``converter-decomposition``: one JAX op written by the converter as several kernels (jax2onnx's erfc as
  1 - Erf), found between the tensors that hold the op's inputs and output in the runtime's own run, each
  kernel's value at the example element shown; the artifact's other runtime (``Path.same_artifact``) tells the
  converter from the runtime.
- ``kernel-attribute``: the first kernel of the runtime's own run whose inputs hold the baseline's values and
  whose output does not (localized on the served model itself, not on a second conversion), re-run with each
  other value of its attributes the path knows (``Path.kernel_variants``): the value that brings the path to
  the baseline is what the converter chose otherwise (Resize's exclude_outside)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from jax.extend.core import Literal

from ....metrics import max_gaps
from ....paths.artifact import MOVES
from ...causes import Cause
from ...verdicts import CauseVerdict, Fix
from ..captured import differing_output as _differing_output
from ..captured import named as _named
from ..captured import op_inputs as _op_inputs
from ..captured import show as _show
from ..captured import where as _where
from ..op_rules import MATH_LIBRARY_ULP
from .graph import ancestors, reaches_from

__all__ = ["decomposed", "kernel_attribute"]


def _between(artifact: Any, start: set[int], end: int) -> list[Any] | None:
    """The kernels that compute tensor ``end`` from the tensors ``start`` (and stored constants), in the
    artifact's order; None where ``end`` depends on another computed tensor."""
    chain: dict[int, Any] = {}
    stack = [end]
    while stack:
        t = stack.pop()
        if t in start or (artifact.tensors.get(t) is not None and artifact.tensors[t].constant):
            continue
        k = artifact.producer(t)
        if k is None:
            return None
        if k.index not in chain:
            chain[k.index] = k
            stack.extend(i for i in k.inputs if i >= 0)
    return [chain[i] for i in sorted(chain)]


def _path_far(d: Any) -> bool:
    """The path, not the baseline, is far from the op's correctly rounded result: wrong where the baseline is
    right, or beyond a math library's few ULP and many times the baseline's distance."""
    ev = d.elements
    if ev is None or ev.path_ulp is None or ev.baseline_ulp is None:
        return False
    return ev.wrong_side() == "path" or (ev.path_ulp > MATH_LIBRARY_ULP and ev.path_ulp > 16 * max(ev.baseline_ulp, 1))


def _same_fault(other: str, path: str, alone: np.ndarray, mine: np.ndarray, theirs: np.ndarray) -> str:
    """Where the path departs from the baseline, does the artifact's other runtime, on the op alone, err as
    the path does (nearer its values than the baseline's: the converter's doing) or not (the kernels')?"""
    from ....localize.localizer import values_equal
    from ....metrics import ulp_distance

    if alone.shape != mine.shape or alone.dtype != mine.dtype:
        return f"{other} gives another kind of value on the op alone"
    differ = ulp_distance(mine, theirs) != 0
    to_path = ulp_distance(alone[differ], mine[differ])
    to_base = ulp_distance(alone[differ], theirs[differ])
    worst = lambda u: int(np.where(u < 0, np.iinfo(np.int64).max, u).max(initial=0))  # noqa: E731
    if values_equal(alone, mine):
        return f"{other} runs the same kernels to the same values: the converter's decomposition is at fault, not {path}'s kernels"
    if worst(to_path) < worst(to_base):
        return (f"{other} runs the same kernels to within {worst(to_path)} ULP of {path}'s values where {path} departs "
                f"(and {worst(to_base)} from the baseline's): the converter's decomposition is at fault, not {path}'s "
                "kernels")
    return f"{other} gives the baseline's values on the same kernels: {path}'s kernels are at fault"


def decomposed(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """One JAX op that the converter wrote as several kernels (jax2onnx's erfc as 1 - Erf): found between
    the tensors that hold the op's inputs and its output in the runtime's own run; each kernel's value at
    the example element shown; the same kernels on the other runtime of that artifact (onnx-ref for onnx)
    tell the converter from the runtime."""
    from ....localize.region import make_region, run_region

    artifact = ctx.artifact()
    if artifact is None or not artifact.values or ctx.path_vals is None or ctx.base_vals is None:
        return None
    for d in _named(ctx.localization):
        found = _differing_output(ctx, d)
        if found is None:
            continue
        _, mine, theirs = found
        outs = artifact.holding(mine, constant=False)
        ins = [x for x in _op_inputs(ctx, d) if x is not None and np.asarray(x).size > 1]
        starts = {t for x in ins for t in artifact.holding(np.asarray(x))}
        chain = next((c for t in outs if (c := _between(artifact, starts, t)) is not None), None)
        computing = [k for k in chain or () if k.kind not in MOVES]
        if chain is None or len(computing) < 2 or d.within_noise_bound or not _path_far(d):
            continue  # one kernel that computes (the others move values), rounding noise, or not the path's error
        kinds_ = [k.kind for k in chain]
        names = " → ".join(kinds_ if len(kinds_) <= 6 else [*kinds_[:3], "…", *kinds_[-2:]])
        seen = (f"the converter writes {_where(d)} as {len(chain)} kernels of {artifact.runtime}: {names}")
        ex = d.elements.example if d.elements is not None else None
        if ex is not None and mine.ndim and len(ex.index) == mine.ndim:
            steps = []
            for k in (chain if len(chain) <= 6 else [*chain[:3], *chain[-2:]]):
                x = artifact.values.get(k.outputs[0])
                if x is not None and x.shape == mine.shape:
                    steps.append(f"{k.kind} gives {_show(x[tuple(ex.index)])}")
            shown = ", ".join(f"{v:.9g}" if isinstance(v, float) else str(v) for v in ex.inputs if v is not None)
            correct = f", where the correctly rounded result is {_show(np.asarray(ex.correct))}" if ex.correct is not None else ""
            seen += (f"; at element {list(ex.index)}{f' (inputs {shown})' if shown else ''}: {', '.join(steps)}"
                     f"{correct} ({ctx.baseline} {_show(np.asarray(ex.baseline))})")
        what = f"{artifact.runtime}'s kernels for {_where(d)}, and the op alone on the artifact's other runtime"
        other = ctx.path.same_artifact
        if other is not None:
            try:
                region = make_region(ctx.program, ctx.path_vals, [d.op.index], d.op.index)
                position = [v for v in ctx.program.ops[d.op.index].outputs if v is not None].index(found[0])
                theirs_alone = np.asarray(run_region(other, region)[position])
            except Exception as e:  # noqa: BLE001 - evidence, not a requirement
                seen += f"; {other} could not run the op alone ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
            else:
                fault = _same_fault(other, ctx.path, theirs_alone, mine, np.asarray(theirs))
                seen += "; " + fault
                if fault.endswith("kernels are at fault"):  # the decomposition computes it right elsewhere
                    return CauseVerdict(cause.id, cause.title, "refuted", what,
                                        seen + ", not the converter's decomposition", layer="kernel")
        wrong = d.elements.wrong_side() if d.elements is not None else None
        if wrong == "baseline":
            seen += f"; {ctx.baseline} is the side farther from the correctly rounded result"
        return CauseVerdict(cause.id, cause.title, "confirmed", what, seen, cause.fix)
    return None


def _first_diverging_kernel(ctx: Any, artifact: Any) -> tuple[Any, list[int], int, list[int]] | None:
    """Localized on the runtime's own run of its artifact, against the baseline's per-op values: the first
    kernel (in the artifact's order) whose inputs all hold values of the baseline (or stored constants) and
    whose output holds none. Returns the kernel, the value ids its inputs hold, the value id its output
    stands for (a case output by position, else the baseline value of that shape nearest to it) and the
    JAX ops between: what the kernel computes in the program's terms."""
    import hashlib

    def digest(a: np.ndarray) -> tuple:  # a value by its bits, without keeping them
        return a.shape, a.dtype.name, hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).digest()

    program, base = ctx.program, ctx.base_vals
    pool: dict[tuple, int] = {}
    for vid, x in [*zip(program.arg_ids, ctx.flat_args), *program.consts.items(), *base.values.items()]:
        pool.setdefault(digest(np.asarray(x)), vid)
    outputs = {t: program.out_ids[i] for i, t in enumerate(artifact.outputs)
               if i < len(program.out_ids) and not isinstance(program.out_ids[i], Literal)}
    for k in artifact.kernels:
        key = lambda t: digest(artifact.values[t])  # noqa: E731
        if any(t >= 0 and t not in artifact.values for t in (*k.inputs, *k.outputs)):
            return None  # a value the run did not keep: no kernel-level view past it
        held = [pool.get(key(t)) for t in k.inputs if t >= 0 and not artifact.tensors[t].constant]
        ins = [v for v in held if v is not None]
        if len(ins) < len(held):
            continue  # fed by a value the baseline never has: downstream of the first departure
        departs = [t for t in k.outputs if key(t) not in pool]
        if not departs:
            continue
        t = departs[0]
        vid = outputs.get(t)
        if vid is None:
            x = artifact.values[t].astype(np.float64)
            near = [(float(np.nanmax(np.abs(np.asarray(y, np.float64) - x), initial=0.0)), v) for v, y in base.values.items()
                    if np.asarray(y).shape == x.shape and np.asarray(y).dtype == artifact.values[t].dtype]
            if not near:
                return None
            vid = min(near)[1]
        producers = {v: i for i, op in enumerate(program.ops) for v in op.outputs if v is not None}
        if vid not in producers:
            return None
        index = producers[vid]
        sources = set(ins)
        region = [i for i in sorted(ancestors(program, index)) if reaches_from(program, i, sources)
                  and not any(v in sources for v in program.ops[i].outputs)] + [index]
        return k, list(ins), vid, region
    return None


def kernel_attribute(cause: Cause, ctx: Any) -> CauseVerdict | None:
    """The kernel where the served model departs, run with each other value of its attributes that the path
    knows (``Path.kernel_variants``: Resize's exclude_outside, cubic_coeff_a...): the value with which the
    path meets the baseline, at parity or within the model's own rounding noise, is the mechanism (the
    converter chose the other one), and setting it on the converted model is the fix, verified by that run."""
    artifact = ctx.artifact()
    if artifact is None or not artifact.values or ctx.base_vals is None:
        return None
    path = ctx.path
    if not any(path.kernel_variants(k) for k in artifact.kernels):
        return None  # no kernel of this artifact has other semantics to try
    first = _first_diverging_kernel(ctx, artifact)
    if first is None:
        return None
    kernel, _, vid, region = first
    variants = path.kernel_variants(kernel)
    if not variants:
        return None
    ops = [ctx.program.ops[i].info for i in region]
    lines = sorted({o.user_source or o.source or "?" for o in ops})
    covers = (f"#{ops[0].index} {ops[0].primitive}" if len(ops) == 1 else
              f"#{ops[0].index}..#{ops[-1].index} ({len(ops)} ops)") + f" at {', '.join(lines[:2])}"
    settings = ", ".join(f"{a}={v}" for a, v in kernel.attributes.items())
    seen = (f"{artifact.runtime} computes {covers} as one {kernel.kind} kernel ({settings}); it is where {ctx.path} "
            f"departs from {ctx.baseline}: its inputs hold {ctx.baseline}'s values, its output does not")
    what = f"each other attribute value of that {kernel.kind} on the served model, re-run on {ctx.path}"
    ideal = ctx.run("f64")
    noise = max(max_gaps(ctx.base_out, ideal)) if not isinstance(ideal, str) else 0.0
    tried = []
    for words, spec in variants:
        outs = ctx.run(spec)
        if isinstance(outs, str):
            tried.append((math.inf, words, spec, None))
            continue
        tried.append((max(max_gaps(outs, ctx.base_out), default=0.0), words, spec, ctx.compare(outs, ctx.base_out)))
    gap, words, spec, rerun = min(tried, key=lambda x: x[0])
    before = max(max_gaps(ctx.path_out, ctx.base_out), default=0.0)
    if rerun is None or not (rerun.outcome == "parity" or gap <= 2 * noise) or gap >= before:
        shown = "; ".join(f"{sp.split('set_attribute=', 1)[-1]}: max abs {g:.3g}" for g, _, sp, _ in tried[:4])
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{seen}; no other attribute value brings it to "
                            f"{ctx.baseline} ({shown}; before: {before:.3g})")
    same = path.same_artifact
    if same is not None:
        other = ctx.run(same)
        if not isinstance(other, str) and max(max_gaps(other, ctx.path_out), default=0.0) <= 2 * noise < before:
            seen += (f"; {same} runs the same converted model to {ctx.path}'s values (within the model's rounding "
                     "noise): the converter's choice of attribute, not the runtime's kernel")
    state = (f"at parity with {ctx.baseline}" if rerun.outcome == "parity" else
             f"within the model's own rounding noise of {ctx.baseline} (max abs {before:.3g} → {gap:.3g}; "
             f"{ctx.baseline} is {noise:.3g} from f64)")
    setting = spec.split("set_attribute=", 1)[1]
    evidence = f"with {setting} ({words}) {ctx.path} is {state}"
    remedy = (f"set {setting} on the converted model (the path option set_attribute={setting}; in the model file: "
              f"that attribute on its {kernel.kind} nodes), and report the converter's choice to its maintainers")
    proof = Fix("runtime option", remedy, spec, True, evidence, rerun=rerun)
    return CauseVerdict(cause.id, cause.title, "confirmed", what, f"{seen}; {evidence}", remedy, proof)
