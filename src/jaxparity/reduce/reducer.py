"""``jaxparity reduce``: from a divergence to a standalone reproducer a runtime's maintainers accept.

1. explain the path against the baseline, keeping the per-op values of the case and of the loop
   body where the first local divergence lies;
2. cut the smallest region around that op which still diverges when each side runs it alone
   (``region``), then keep only its differing elements where its ops are elementwise;
3. write the script (``script``), run it in a fresh process: it must exit 1; with ``--fixed`` (the
   explanation's fix: a compile option, a serving flag, a model change on the region, or the change
   its fix search kept at the op, else one the same search finds on the region: ``searched``) it must
   exit 0, else that fix is left out and the next tried. A version that does not reproduce is never
   kept when an earlier one did.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jax
import numpy as np

from .._version import __version__
from ..localize.loops.descend import frame_key
from ..paths import make_path
from ..paths.base import parse_spec, spec_env
from ..pytree import host
from ..localize.region import Region
from .region import NotReproduced, ReduceError, grow_and_shrink, shrink_elements, shrink_operands
from .script import Script, runnable, runnable_paths, write_script

__all__ = ["NotReproduced", "Reduction", "ReduceError", "reduce_case", "verify_script"]

VERIFY_TIMEOUT = 600.0


@dataclass
class Reduction:
    path: str
    baseline: str
    where: str  # "op #3 log (runtimes.py:12)", with its loop frames
    region: tuple[str, ...]  # the region's primitives, in order
    elements: tuple[int, int]  # (kept, of) elements of the diverging output
    script: Script
    reproduces: bool  # the script exits 1 in a fresh process
    fixed_restores: bool | None  # ``--fixed`` exits 0 (None: no fix to apply)
    seconds: float
    explanation: Any  # explain.PathExplanation
    expected: list[np.ndarray]
    observed: list[np.ndarray]
    notes: list[str] = field(default_factory=list)
    markdown: str = ""
    fix_said: str | None = None  # where --fixed's change was found and what that measured
    # fixes written into --fixed whose fresh-process run still differed, each with what it gave: left out
    fixes_left_out: tuple[str, ...] = ()
    fix_ulp: int = 0  # --fixed lets elements this many ULP apart agree (two roundings of the same math)


def _flat(outs: Any) -> list[np.ndarray]:
    return [host(x) for x in jax.tree_util.tree_leaves(outs)]


def _check_specs(baseline: str, path: str) -> None:
    for spec in (baseline, path):
        options = parse_spec(spec)[1]
        if not runnable(spec):
            raise ReduceError(f"{spec}: reduce writes scripts for {', '.join(runnable_paths())}")
        if spec_env(spec):
            raise ReduceError(f"{spec}: reduce runs in this environment; paths in another --env cannot be reduced yet")
        if any(k.startswith("jax_") for k in options):
            raise ReduceError(f"{spec}: JAX config options (jax_*) cannot be written into a reproducer yet")
    if make_path(path).reference:
        raise ReduceError(f"{path} is a reference: put it first (--paths {path},PATH)")


Option = tuple[dict[str, str], dict[str, str], "ModelFix"]  # what --fixed changes: (compile options, env, model)
MAX_FIXED = 3  # fixes written into --fixed and run in a fresh process, per region, before the script goes without


def _flag_fix(expl: Any, path: str) -> Option | None:
    """The explanation's compile option or serving flag, where it changes ``path``'s options."""
    _, mine = parse_spec(path)
    for fix in expl.fixes:  # the script verifies it on the region; the report says whether the whole case agrees
        if not fix.spec or "[" in fix.spec or fix.kind in ("model change", "runtime option"):
            continue  # a runtime option (an attribute set on a converted model) is not a compile option
        if not fix.verified and (fix.rerun is None or fix.rerun.outcome != "narrows"):
            continue  # a fix the explanation measured as no closer is never applied by --fixed
        kind, opts = parse_spec(fix.spec)
        extra = {k: v for k, v in opts.items() if mine.get(k) != v}
        if kind != parse_spec(path)[0] or not extra:
            continue
        flags = {k: v for k, v in extra.items() if k.islower()}
        env = {k: v for k, v in extra.items() if k.isupper()}
        what = ", ".join(f"{k}={v}" for k, v in extra.items())
        return flags, env, ModelFix(text=f"{fix.kind}: {what}")
    return None


def _fixes(expl: Any, path: str, region: Region, within: tuple) -> list[Option]:
    """What ``--fixed`` may change, in the order the script tries them: the explanation's flag, the change
    its fix search kept at the region's op (``searched``), the model change its confirmed cause names."""
    from .searched import from_explanation

    options = [o for o in [_flag_fix(expl, path)] if o is not None]
    options += [({}, {}, ModelFix(instead=s.source, text=f"model change: {s.description}", said=s.said, ulp=s.ulp))
                for s in from_explanation(expl, region, within)]
    causes = [c.cause for c in expl.causes if c.status == "confirmed"]
    change = _variant_fix(expl, region) or model_fix(region, causes)
    if change.text:
        options.append(({}, {}, change))
    return options


def _region_fix(expl: Any, d: Any, region: Region, b: list[np.ndarray], p: list[np.ndarray], baseline: str,
                path: str, log: Callable[[str], None]) -> Option | None:
    """Where nothing the explanation found restores parity on the reproducer: the fix search on the region."""
    from .searched import on_region

    trigger = d.elements.trigger.predicate if d.elements is not None and d.elements.trigger is not None else None
    found = on_region(expl, region, b, p, baseline, path, trigger, log)
    if found is None:
        return None
    return {}, {}, ModelFix(instead=found.source, text=f"model change: {found.description}", said=found.said)


def _variant_fix(expl: Any, region: Region) -> ModelFix | None:
    """The verified rewrite of a known variant of the region's one op (``interpreter.variants``), computed
    instead of the op under --fixed, where its source stands alone."""
    from ..interpreter.variants import VARIANTS, standalone_source

    v = next((c for c in expl.causes if c.cause == "semantic-variant" and c.status == "confirmed"
              and c.proof is not None and c.proof.verified and c.proof.spec), None)
    if v is None or len(region.ops) != 1:
        return None
    name = v.proof.spec[v.proof.spec.index("[") + 1:].removesuffix("]").removesuffix(" rewritten")
    op = region.program.ops[region.target]
    variant = next((x for x in VARIANTS.get(op.info.primitive, ()) if x.name == name), None)
    if variant is None:
        return None
    source = standalone_source(variant)
    return ModelFix(instead=source, text=f"model change: {variant.fix}") if source else None


@dataclass(frozen=True)
class ModelFix:
    """A model-side change on the region, for causes no flag fixes: lines at the top of ``f`` (on the
    target's inputs) and parameters of the target op, each as ``--fixed`` writes them."""

    lines: tuple[str, ...] = ()
    params: tuple[tuple[str, str], ...] = ()  # (name, source expression using FIXED)
    text: str | None = None
    # A function (its source, written into the script) computed instead of the target op under --fixed.
    instead: str | None = None
    said: str | None = None  # where the fix was found and what that measured, for the report
    ulp: int = 0  # with --fixed, elements this many ULP apart agree (a fix verified as rounding apart)


def _is_index(v: np.ndarray, dimension: int) -> bool:
    """An iota along ``dimension``: the index operand jnp.argsort sorts along with its keys."""
    if v.dtype.kind not in "iu" or v.ndim == 0:
        return False
    shape = [1] * v.ndim
    shape[dimension] = v.shape[dimension]
    return bool(np.array_equal(v, np.broadcast_to(np.arange(v.shape[dimension]).reshape(shape), v.shape)))


def model_fix(region: Region, causes: Sequence[str]) -> ModelFix:
    """The model change that makes both sides agree on the region's one op, where one is known."""
    if len(region.ops) != 1:
        return ModelFix()
    op = region.program.ops[region.target]
    floats = [f"x{i}" for i, v in enumerate(region.values)
              if jax.numpy.issubdtype(np.asarray(v).dtype, jax.numpy.floating)]
    if "implementation-defined-conversion" in causes and op.info.primitive == "convert_element_type" and floats:
        to = np.dtype(op.eqn.params["new_dtype"])
        src = np.asarray(region.values[0]).dtype
        if to.kind in "iu":
            lo = float(np.iinfo(to).min)
            hi = float(np.nextafter(np.array(float(np.iinfo(to).max) + 1, src), np.array(0, src)))
            return ModelFix((f"x0 = jax.numpy.clip(jax.numpy.nan_to_num(x0, nan=0.0), {lo!r}, {hi!r}).astype(x0.dtype)",), (),
                            f"model change: make the cast defined (NaN -> 0, clip to {to.name}'s range) before it")
    if "tie-ordering" in causes and op.info.primitive == "sort":
        keys, dim = op.eqn.params["num_keys"], op.eqn.params["dimension"]
        if len(region.values) > keys and _is_index(np.asarray(region.values[keys]), dim):
            # argsort: the index operand after the keys becomes one more key, so no two keys are equal
            return ModelFix((), (("num_keys", f"{keys + 1} if FIXED else {keys}"),),
                            "model change: break ties explicitly by sorting on (key, index)")
    if "ieee-fold" in causes and floats:
        return ModelFix(tuple(f"{x} = jax.numpy.where(jax.numpy.isnan({x}), jax.numpy.zeros_like({x}), {x})"
                              for x in floats), (),
                        "model change: keep NaN out of the op's inputs (here: replaced by 0), which the runtime "
                        "does not propagate")
    if "denormal-flush" in causes and floats:
        return ModelFix(tuple(f"{x} = jax.numpy.where(jax.numpy.abs({x}) < jax.numpy.finfo({x}.dtype).tiny, jax.numpy.zeros_like({x}), {x})"
                              for x in floats), (),
                        "model change: flush subnormal inputs to zero in the model, so every runtime computes the same")
    return ModelFix()


def verify_script(script: Script, name: str = "repro.py", args: Sequence[str] = (),
                  timeout: float = VERIFY_TIMEOUT) -> tuple[int | None, str]:
    """Run the script in a fresh Python process (this interpreter, nothing of jaxparity imported);
    its exit status and the tail of its output."""
    with tempfile.TemporaryDirectory(prefix="jaxparity-reduce-") as tmp:
        file = os.path.join(tmp, name)
        with open(file, "w") as f:
            f.write(script.text)
        if script.sidecar:
            np.savez(os.path.splitext(file)[0] + ".npz", **script.sidecar)  # type: ignore[arg-type]  # numpy's stub
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
        try:
            proc = subprocess.run([sys.executable, file, *args], cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout:.0f} s"
    errors = [ln for ln in proc.stderr.strip().splitlines() if not ln.startswith(("W0000", "I0000", "INFO:"))]
    return proc.returncode, "\n".join(proc.stdout.strip().splitlines()[-12:] + errors[-6:])


def _verify_both(script: Script, name: str) -> tuple[int | None, str, tuple[int | None, str]]:
    """The script as written and with ``--fixed``, each in its own fresh process, at the same time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        plain = pool.submit(verify_script, script, name)
        fixed = pool.submit(verify_script, script, name, ["--fixed"]) if script.fixed else None
        rc, tail = plain.result()
        return rc, tail, fixed.result() if fixed is not None else (None, "")


def reduce_case(fn: Callable[..., Any], args: tuple, baseline: str, path: str, *, case_name: str = "the case",
                name: str = "repro.py", log: Callable[[str], None] = lambda _: None) -> Reduction:
    """Reduce the divergence between ``baseline`` and ``path`` on ``fn(*args)`` to a verified script."""
    from ..explain.pipeline import explain_path
    from ..paths import make_path

    _check_specs(baseline, path)
    start = time.perf_counter()
    log(f"running {baseline} and {path}")
    base_out = _flat(make_path(baseline).run(fn, args))
    path_out = _flat(make_path(path).run(fn, args))
    from ..localize.localizer import values_equal

    if all(values_equal(a, b) for a, b in zip(base_out, path_out)):
        raise ReduceError(f"{path} and {baseline} agree bit for bit on these inputs: nothing to reduce")
    log("explaining (localizing the first op that diverges on its own)")
    keep: dict = {}
    expl = explain_path(fn, args, path, baseline, path_out, base_out, keep=keep)
    loc = expl.localization
    d: Any = loc.lead if loc is not None else None  # a divergence, or the fused region (_Fused) standing for one
    fused: set[int] | None = None
    if d is None and loc is not None and loc.perturbed and loc.cone and () in keep:
        # Observing every value removed the difference: it lives in how these ops are fused. Start
        # from the ops that feed the differing outputs and shrink from there.
        fused = {op.index for op in loc.cone}
        d = _Fused(max(loc.cone, key=lambda o: o.index))
    if d is None:
        raise ReduceError(f"no op of {case_name} diverges on its own between {path} and {baseline} "
                          f"({expl.summary}); nothing small to reduce to")
    context = keep.get(frame_key(d.within))
    if context is None:
        raise ReduceError(f"the values of {d.where()} were not kept: cannot cut a region there")
    program, path_vals, _ = context
    required: set[int] = set()
    if fused is None:
        fused = _evidence_start(d)
        required = set(fused or ())
    log(f"cutting the smallest region around {d.where()}")
    region, b, p, tried = grow_and_shrink(program, path_vals, d.op.index, baseline, path, log=log, start=fused,
                                          required=required)
    notes = [f"{tried} region(s) tried; {len(region.ops)} op(s) kept"]
    candidates: list[tuple[Region, list, list]] = [(region, b, p)]
    from ..report.format import explaining_cause

    main = explaining_cause(expl.causes, d)
    cause = main.cause if main is not None else None
    small = shrink_elements(region, b, p, baseline, path, cause=cause) or shrink_operands(region, b, p, baseline, path)
    if small is not None:
        candidates.insert(0, small)
    when = datetime.datetime.now().strftime("%Y-%m-%d")
    for region, b, p in candidates:
        def write(option: Option | None, region: Region = region, b: list = b, p: list = p) -> Script:
            flags, env, change = option if option is not None else ({}, {}, ModelFix())
            said = change.text and change.text + (f" (then within {change.ulp} ULP: two roundings of the same math)"
                                                  if change.ulp else "")
            doc = _docstring(expl, d, region, baseline, path, case_name, when, said, b, p, name)
            return write_script(region, baseline, path, docstring=doc, expected=b, fix_flags=flags, fix_env=env,
                                model_fix=change.lines, fix_params=dict(change.params), fix_text=change.text,
                                name=name, fix_instead=change.instead, fix_ulp=change.ulp)

        def options(region: Region = region, b: list = b, p: list = p) -> Any:
            yield from _fixes(expl, path, region, d.within)
            found = _region_fix(expl, d, region, b, p, baseline, path, log)
            if found is not None:
                yield found

        pending = options()
        option = next(pending, None)
        script = write(option)
        log(f"checking the script in a fresh process ({script.code_lines} lines of code)")
        rc, tail, fixed_run = _verify_both(script, name)
        if rc != 1 or " elements differ" not in tail:
            notes.append(f"a version on {region.size} input elements did not reproduce in a fresh process "
                         f"(exit {rc}): {tail.splitlines()[-1] if tail else ''}")
            continue
        left_out: list[str] = []
        while option is not None:
            rc_fixed, tail_fixed = fixed_run
            if rc_fixed == 0 and " elements differ" in tail_fixed:
                break
            last = next((ln for ln in reversed(tail_fixed.splitlines()) if " elements differ" in ln),
                        tail_fixed.splitlines()[-1] if tail_fixed else "")
            left_out.append(f"{option[2].text}: with it the script still exits {rc_fixed} ({last})")
            notes.append(f"with --fixed ({option[2].text}) the script still exits {rc_fixed}: the fix is left out "
                         f"({last})")
            option = next(pending, None) if len(left_out) < MAX_FIXED else None
            if option is not None:
                script = write(option)
                log(f"checking --fixed ({option[2].text}) in a fresh process")
                fixed_run = verify_script(script, name, ["--fixed"])
        if option is None and script.fixed:
            script = write(None)
        red = Reduction(path, baseline, d.where(), tuple(region.program.ops[i].info.primitive for i in region.ops),
                        (len(region.elements) if region.elements else region.full_size or np.size(p[0]),
                         region.full_size or np.size(p[0])), script, True, True if option is not None else None,
                        time.perf_counter() - start, expl, b, p, notes,
                        fix_said=option[2].said if option is not None else None, fixes_left_out=tuple(left_out),
                        fix_ulp=option[2].ulp if option is not None else 0)
        from .report import markdown

        return replace(red, markdown=markdown(red, case_name, name))
    raise NotReproduced(f"no reproducer of {d.where()} reproduces in a fresh process: " + "; ".join(notes))


def _evidence_start(d: Any) -> set[int] | None:
    """Ops the evidence already names as part of the divergence, to start the region with: the narrow
    op whose rounding a widening convert never saw (excess precision), the mul an FMA fused in."""
    import re

    ops: set[int] = set()
    if getattr(d, "unrounded", None) is not None:
        ops.add(d.unrounded.index)
    for m in getattr(d, "semantics", ()):
        if m.reproduces_path and (k := re.match(r"#(\d+) mul fused into", m.description)):
            ops.add(int(k[1]))
    return ops or None


@dataclass(frozen=True)
class _Fused:
    """Where no single op diverges on its own: the last op of the fused region that does."""

    op: Any  # OpInfo
    within: tuple = ()
    elements: Any = None
    within_noise_bound: bool = False
    unrounded: Any = None

    def where(self) -> str:
        return f"the ops fused into op #{self.op.index} {self.op.primitive}"


def _docstring(expl: Any, d: Any, region: Region, baseline: str, path: str, case: str, when: str, fix: str | None,
               expected: list[np.ndarray], observed: list[np.ndarray], name: str) -> str:
    from .report import docstring

    return docstring(expl, d, region, baseline, path, case, when, fix, expected, observed, name, __version__)
