"""Explain one diverging path: where (localization), how (compiler evidence, fingerprint), why (the
known causes, each confirmed or refuted by re-running an experiment) and what fixes it (re-run to
prove it).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..localize.blame import CARRIES, blame_localization
from ..localize.localizer import Localization, localize, output_cone, replayable
from ..localize.program import FlatProgram, flatten
from ..localize.values import op_values
from ..metrics import max_gaps, ulp_distance
from ..paths import make_path, parse_spec
from ..rounding import is_float_dtype
from .artifact_evidence import ARTIFACT_RULES, fused_noise, kept_wide
from .causes import CAUSES, COMPILED, RUNTIMES, Cause
from .op_evidence import OP_RULES, decide
from .variant_evidence import decide_variant
from .verdicts import CauseVerdict, Fix, Rerun, Status

__all__ = ["CauseVerdict", "Fix", "PathExplanation", "explain_path", "explain_paths", "share_across",
           "with_xla_option"]

@dataclass(frozen=True)
class PathExplanation:
    path: str
    baseline: str
    summary: str
    localization: Localization | None
    evidence: Any  # explain.hlo.CompilerEvidence | None
    fingerprint: Any  # explain.fingerprint.Fingerprint | None
    causes: tuple[CauseVerdict, ...]
    fixes: tuple[Fix, ...]
    notes: tuple[str, ...] = ()
    # When the closest fix restores parity only partly: that fix applied, and what remains explained
    # the same way (a chain: cause 1 -> remainder -> cause 2 ...).
    remainder: PathExplanation | None = None
    # Another explained path whose outputs are bit for bit this path's: they share the mechanism.
    same_values: str | None = None

    @property
    def confirmed(self) -> tuple[CauseVerdict, ...]:
        return tuple(c for c in self.causes if c.status in ("confirmed", "partly", "noise"))


def with_xla_option(spec: str, key: str, value: str) -> str:
    """The same path with one more XLA option: a compile option, or a flag in XLA_FLAGS for TF."""
    name, options = parse_spec(spec)
    if name in ("savedmodel", "savedmodel-c"):
        flags = options.get("XLA_FLAGS", "")
        options["XLA_FLAGS"] = f"{flags} --{key}={value}".strip()
    else:
        options[key] = value
    return make_path(f"{name}:" + ",".join(f"{k}={v}" for k, v in options.items())).spec


def _distance(outs: Sequence[np.ndarray], base: Sequence[np.ndarray]) -> tuple[int, int]:
    """(elements that differ, max ULP) between two flat output lists."""
    n = worst = 0
    for a, b in zip(outs, base):
        u = ulp_distance(np.asarray(a), np.asarray(b))
        n += int(np.count_nonzero(u))
        worst = max(worst, int(np.where(u < 0, np.iinfo(np.int64).max, u).max(initial=0)))
    return n, worst


@dataclass
class _Context:
    fn: Callable[..., Any]
    args: tuple
    path: str
    baseline: str
    path_out: list[np.ndarray]
    base_out: list[np.ndarray]
    device: str
    program: FlatProgram
    dtypes: set[str]
    localization: Localization | None
    fingerprint: Any
    runs: dict[str, list[np.ndarray] | str]  # spec -> outputs, or the error message
    base_vals: Any = None  # the baseline's per-op values of the case: a re-run is judged at the op it names
    flat_args: Sequence[Any] = ()
    # The model changes tried, by label ("fixed model": round_like_declared(fn)); a Fix's spec names one
    # as "PATH [LABEL]".
    models: dict[str, Callable[..., Any]] = dataclasses.field(default_factory=dict)
    path_vals: Any = None  # the path's per-op values of the case
    notes: list[str] = dataclasses.field(default_factory=list)  # what the experiments add to the report
    memo: dict[str, Any] = dataclasses.field(default_factory=dict)
    ahead: dict[str, Any] = dataclasses.field(default_factory=dict)  # spec -> its re-run started ahead (a Future)

    def artifact(self) -> Any:
        """What the path's runtime really runs, read back (``Path.artifact``), once; None where the path has
        no artifact of its own or it cannot be read (then said in the notes)."""
        if "artifact" not in self.memo:
            from ..execution.crashes import attempt, crashed_before

            found, key = None, f"{self.path} [its artifact read back]"
            try:
                if (how := crashed_before(key)) is not None:
                    raise RuntimeError(f"reading it back {how.removeprefix('hung: ')} before; skipped")
                path = make_path(self.path)
                with attempt(key):  # a runtime that crashes or hangs running its own model costs this only
                    found = path.artifact(self.fn, self.args)
            except Exception as e:  # evidence, never a failure of the explanation
                self.notes.append(f"{self.path}'s artifact could not be read back ({_first_line(e)})")
            if found is not None:
                self.notes.extend(found.notes)
            self.memo["artifact"] = found
        return self.memo["artifact"]

    def compare(self, mine: Sequence[np.ndarray], theirs: Sequence[np.ndarray]) -> Rerun:
        """A model change re-run on both sides: the path's and the baseline's outputs of the changed model,
        against the difference the two had before."""
        before = (*_distance(self.path_out, self.base_out), max(max_gaps(self.path_out, self.base_out), default=0.0))
        after = (*_distance(mine, theirs), max(max_gaps(mine, theirs), default=0.0))
        result = narrowing(before, after, _distance(mine, self.path_out)[0] > 0)
        return Rerun(before, after, _OUTCOMES[result], self.ideal_errors(mine, theirs))  # type: ignore[arg-type]

    def ideal_errors(self, mine: Sequence[np.ndarray], theirs: Sequence[np.ndarray] | None = None
                     ) -> tuple[float, float, float, float] | None:
        """Max abs error against the f64 ideal of the path before and after a re-run (``mine``), and of the
        baseline before and after (``theirs``; None: the baseline did not change). The ideal is the
        program's own: a fix rewrites how a value is rounded, not the math it means. None where the ideal
        cannot be computed or the outputs cannot be set against it."""
        ideal = self.run("f64")
        if isinstance(ideal, str) or len(ideal) != len(self.path_out):
            return None
        try:
            def worst(outs: Sequence[np.ndarray]) -> float:
                return max(max_gaps(outs, ideal), default=0.0)

            return (worst(self.path_out), worst(mine), worst(self.base_out),
                    worst(self.base_out if theirs is None else theirs))
        except Exception:  # noqa: BLE001 - shapes the ideal does not share: no such measure
            return None

    def run(self, spec: str, fn: Callable[..., Any] | None = None, label: str = "fixed model"
            ) -> list[np.ndarray] | str:
        """Outputs of ``spec`` (flattened), or why it failed; each distinct run happens once. ``fn``: a
        model change of the case's function, named ``label``."""
        from ..execution.crashes import attempt, crashed_before
        from ..execution.inprocess import run_in_process

        if fn is not None:
            self.models[label] = fn
        key = spec if fn is None else f"{spec} [{label}]"
        if key not in self.runs and (how := crashed_before(key)):
            self.runs[key] = (f"timeout: re-running {key} {how.removeprefix('hung: ')} (it was stopped; that re-run "
                              "is skipped)" if how.startswith("hung: ") else
                              f"crashed: re-running {key} {how} (its process died there; that re-run is skipped)")
        if key not in self.runs and key in self.ahead:
            with attempt(key):  # a re-run started ahead that hangs is named, as one run here would be
                self.runs[key] = self.ahead.pop(key).result()
        if key not in self.runs:
            with attempt(key):
                self.runs[key] = self._outputs(run_in_process(make_path(spec), fn or self.fn, self.args))
        return self.runs[key]

    @staticmethod
    def _outputs(r: Any) -> list[np.ndarray] | str:
        return [a for _, a in r.outputs] if r.status == "ok" and r.outputs else f"{r.status}: {r.message}"

    def settle(self) -> None:
        """Wait for the re-runs started ahead that no experiment asked for (each under its breadcrumb)."""
        from ..execution.crashes import attempt

        for key in list(self.ahead):
            with attempt(key):
                self.runs[key] = self.ahead.pop(key).result()

    def run_ahead(self, specs: Sequence[str], pool: Any) -> None:
        """Start the re-runs of ``specs`` now on ``pool``'s threads (paths that ``overlap``: each waits on a
        serving process of its own); ``run`` then waits for its result. Not under a crash breadcrumb: the
        run happens in that serving process, whose death is the run's failure, not this process's; ``run``
        and ``settle`` wait for it under one, so that one that hangs is named and skipped next time."""
        from ..execution.crashes import crashed_before
        from ..pytree import named_leaves, to_numpy

        def finish(served: Callable[[], Any]) -> list[np.ndarray] | str:
            try:
                return [a for _, a in named_leaves(to_numpy(served()), "out")]
            except Exception as e:  # noqa: BLE001 - the re-run's failure, as ``run`` words it
                return f"error: {_first_line(e)}"

        for spec in specs:
            if spec in self.runs or spec in self.ahead or crashed_before(spec):
                continue
            try:  # converted here, now: under the JAX configuration the case runs with
                served = make_path(spec).start(self.fn, self.args)
            except Exception:  # noqa: BLE001 - ``run`` runs it again and says why it fails
                continue
            self.ahead[spec] = pool.submit(finish, served)


def _applies(cause: Cause, ctx: _Context) -> str | None:
    """Why the cause cannot be behind this divergence, or None when its experiment should run. A cause the
    op's own values place on the baseline's side (excess precision kept by jit as the baseline of eager)
    applies where it applies to the baseline."""
    kind = ctx.path.split(":", 1)[0]
    if kind not in cause.paths and not (_widened_side(cause, ctx) == "baseline" and
                                        ctx.baseline.split(":", 1)[0] in cause.paths):
        return f"not applicable to the {kind} path"
    if ctx.device not in cause.devices:
        return f"does not occur on {ctx.device}"
    if cause.dtypes is not None and not ctx.dtypes & set(cause.dtypes):
        return f"the program has no {'/'.join(cause.dtypes)} values"
    if cause.primitives is not None and ctx.localization is not None and ctx.localization.local:
        prims = {d.op.primitive for d in ctx.localization.local}
        if not prims & set(cause.primitives) and cause.experiment != "recompile":
            return f"no local divergence in {', '.join(cause.primitives)}"
    return None


NARROWS = ": narrows, not parity"  # the words of a re-run that moved closer without restoring parity


def narrowing(before: tuple[int, ...], after: tuple[int, ...], changed: bool) -> str:
    """What a re-run did to the difference, from (elements that differ, max ULP[, max abs]) before and
    after: one judgement for the cause's status and every sentence that reports it. Narrower means no
    more elements and no larger a distance, in ULP or in absolute terms, and less in one of them (a
    re-run can move the worst element to a larger value: fewer ULP, yet a larger difference)."""
    if after[0] == 0:
        return ": parity restored"
    if all(a <= b for a, b in zip(after, before)) and after != before:
        return NARROWS
    return ": no change" if not changed else ": no closer"


_OUTCOMES = {": parity restored": "parity", NARROWS: "narrows", ": no change": "no change", ": no closer": "no closer"}


def measured_rerun(outs: Sequence[np.ndarray], ctx: _Context) -> tuple[Rerun, str]:
    """The re-run ``outs`` against the baseline, and the words of its judgement (``narrowing``)."""
    before = (*_distance(ctx.path_out, ctx.base_out), max(max_gaps(ctx.path_out, ctx.base_out), default=0.0))
    after = (*_distance(outs, ctx.base_out), max(max_gaps(outs, ctx.base_out), default=0.0))
    result = narrowing(before, after, _distance(outs, ctx.path_out)[0] > 0)
    return Rerun(before, after, _OUTCOMES[result], ctx.ideal_errors(outs)), result  # type: ignore[arg-type]


def _recompile(cause: Cause, ctx: _Context, at_op: bool = True) -> CauseVerdict:
    """Re-run the path with the cause's flags; where that does not restore parity and ``at_op``, judge the
    cause at the op that carries the error (``_at_the_op``)."""
    spec = ctx.path
    for key, value in cause.options:
        spec = with_xla_option(spec, key, value)
    outs = ctx.run(spec)
    if isinstance(outs, str):  # a re-run that fails tests nothing: the cause stands untested, never refuted
        return CauseVerdict(cause.id, cause.title, "not run", f"re-ran {spec}", f"the re-run failed ({outs})")
    rerun, result = measured_rerun(outs, ctx)
    before, after = rerun.before, rerun.after
    seen = (f"{ctx.path} differs from {ctx.baseline} in {before[0]} elements (max {before[1]} ULP, max abs "
            f"{before[2]:.3g}); {spec} differs in {after[0]} (max {after[1]} ULP, max abs {after[2]:.3g})")
    status: Status = {": parity restored": "confirmed", NARROWS: "partly"}.get(result, "refuted")  # type: ignore[assignment]
    if status != "confirmed" and at_op:  # judged at the op it names: the flag may fix that op and leave noise elsewhere
        at_op = _at_the_op(cause, ctx, spec)
        if at_op is not None:
            d, gone = at_op
            proof = Fix("serving flag" if ctx.path.startswith("savedmodel") else "compile option", cause.fix, spec,
                        False, seen + result, rerun=rerun)
            return CauseVerdict(cause.id, cause.title, "confirmed", f"the values of {_short(d)} re-run with {spec}",
                                gone, cause.fix, proof)
    return CauseVerdict(cause.id, cause.title, status, f"re-ran {spec}", seen + result,
                        cause.fix if status != "refuted" else None, rerun=rerun)


def _at_the_op(cause: Cause, ctx: _Context, spec: str) -> tuple[Any, str] | None:
    """Where a flag's whole-program re-run does not restore parity: does the divergence that carries the
    output error (``Localization.lead``) stop departing on its own under the flag? Then the cause is
    confirmed at that op (the rest is another divergence), with what the re-run showed; None otherwise."""
    loc = ctx.localization
    d = loc.lead if loc is not None else None
    if d is None or d.within or ctx.base_vals is None or not replayable(ctx.baseline):
        return None
    if cause.primitives is not None and d.op.primitive not in cause.primitives:
        return None
    try:
        again = localize(ctx.program, op_values(ctx.program, spec, ctx.flat_args), ctx.base_vals, ctx.flat_args,
                         ctx.baseline)
    except Exception:  # no per-op values under the flag: the whole-program re-run stands
        return None
    if any(x.op.index == d.op.index and not x.within for x in again.local):
        return None
    where = d.op.user_source or d.op.source or "unknown line"
    return d, (f"with {spec}, #{d.op.index} {d.op.primitive} ({where}) no longer departs from {ctx.baseline} on its "
               f"own inputs ({d.n_differ} of {d.size} elements did without it); {len(again.local)} other op"
               f"{'s' if len(again.local) != 1 else ''} still depart{'s' if len(again.local) == 1 else ''}, "
               "so the whole program does not reach parity with it")


# Beyond this many ULP at an output, a difference is not called rounding noise, whatever the local
# evidence: the real divergence is elsewhere, or was not captured.
NOISE_OUTPUT_ULP = 2**16


BLAMED = 0.9  # share of the output difference the divergences injected together must reproduce to judge by them
# Of a capture that moved the outputs, the share its divergences must reproduce to be judged by them at all
# (as far as they go, where the outputs are within the model's own rounding noise): what one divergence must
# carry to count as carrying any of it (``localize.blame.CARRIES``); below it they say nothing.
PARTLY = CARRIES


def _rounding_only(d: Any, ctx: _Context | None = None) -> str | None:
    """How a local divergence is rounding and nothing more, or None: a reduction within the error bound of
    two summation orders, an elementary function both sides compute within a math library's few ULP, an
    op the runtime computes with its producers as one kernel within the bound of its sums (``fused_noise``),
    or a loop whose result is as accurate on the path as on the baseline (``ElementEvidence.as_accurate``)."""
    from .op_evidence import _MATH, MATH_LIBRARY_ULP

    if d.within_noise_bound:
        return "a sum within its error bound"
    if ctx is not None and (fused := fused_noise(ctx, d)):
        return fused
    ev = d.elements
    if ev is not None and ev.as_accurate():
        return (f"a loop both sides compute as accurately (against its exact result on the same inputs: "
                f"{ev.path_error:.3g} and {ev.baseline_error:.3g})")
    if (d.op.primitive in _MATH and ev is not None and ev.path_ulp is not None and ev.baseline_ulp is not None
            and not ev.flushes and not ev.implementation_defined
            and max(ev.path_ulp, ev.baseline_ulp) <= MATH_LIBRARY_ULP):
        return f"both within {max(ev.path_ulp, ev.baseline_ulp)} ULP of the correctly rounded {d.op.primitive}"
    if (d.op.primitive == "integer_pow" and ev is not None and ev.path_ulp is not None and ev.baseline_ulp is not None
            and not ev.flushes and max(ev.path_ulp, ev.baseline_ulp) <= POWER_ULP):
        return (f"both within {max(ev.path_ulp, ev.baseline_ulp)} ULP of the correctly rounded power (x**n as products, "
                "each rounded, or as one pow)")
    return None


# x**n computed as a few products, each rounded (XLA: repeated squaring), or by one correctly rounded pow:
# within this many ULP of the correctly rounded power for the exponents models use (n up to 4 or so).
POWER_ULP = 8


def _carried_noise(cause: Cause, ctx: _Context, loc: Localization) -> CauseVerdict | None:
    """Where blame measured which divergences carry the output difference, the noise verdict is judged on
    those (the others carry none of it) when together they reproduce most of it. Where they reproduce
    less (the rest arises where per-op values cannot be seen, e.g. inside another runtime's fused kernels),
    every divergence found must be rounding only and the outputs within twice the model's own rounding
    noise (the baseline's distance to f64), and the verdict says how much the divergences account for."""
    b = loc.blame
    if b is None or not b.carriers:
        return None
    what = "checked each divergence that carries the output difference against its error bound"
    blamed = b.together >= BLAMED
    named = [(c, loc.local[c.divergence]) for c in b.carriers]
    how = [(f"#{d.op.index} {d.op.primitive} ({max(c.alone, c.needed):.0%})", _rounding_only(d, ctx)) for c, d in named]
    if not blamed:  # every divergence found, not only those that carry part of it
        what = "checked every local divergence against its error bound"
        how += [(f"#{d.op.index} {d.op.primitive}", _rounding_only(d, ctx)) for d in loc.local
                if all(d is not n for _, n in named)]
    how.sort(key=lambda x: x[1] is not None)  # what is not rounding alone first
    shown = "; ".join(f"{who}: {why or 'not rounding alone'}" for who, why in how[:3]) + \
        (f"; {len(how) - 3} more" if len(how) > 3 else "")
    bad = sum(why is None for _, why in how)
    if bad:
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{bad} of the {len(how)} divergences "
                            f"{'that carry the output difference ' if blamed else ''}are not rounding alone "
                            f"({shown})")
    _, out_ulp = _distance(ctx.path_out, ctx.base_out)
    unsound = []
    if loc.perturbed:
        unsound.append("observing every op removed the difference, so the per-op values are not the program's")
    if out_ulp > NOISE_OUTPUT_ULP:
        unsound.append(f"the outputs differ by {out_ulp} ULP, more than rounding noise of sums grows to here")
    if not blamed:
        ideal = ctx.run("f64")
        if isinstance(ideal, str) or not all(g <= 2 * f for g, f in zip(max_gaps(ctx.path_out, ctx.base_out),
                                                                         max_gaps(ctx.base_out, ideal))):
            unsound.append(f"the divergences found reproduce only {b.together:.0%} of the output difference and "
                           "the outputs are not within twice the model's own rounding noise")
    floor = "" if unsound else ", and the outputs are within twice the model's own rounding noise"
    others = len(loc.local) - len(named)
    if blamed:
        found = (f"the {len(named)} divergences that carry the output difference (together {b.together:.0%} of "
                 f"it) are rounding only: {shown}" + (f"; the other {others} carry none of it" if others else ""))
    else:
        found = (f"all {len(how)} local divergences are rounding only ({shown}); together they reproduce "
                 f"{b.together:.0%} of the output difference, the rest arises where per-op values cannot be "
                 f"seen{floor}")
    if unsound:
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{found}; but {'; and '.join(unsound)}: "
                            "not established as noise")
    # Elementary functions among them (exp, tanh within a few ULP): two math libraries, not only two orders.
    math = any(why is not None and "ULP of the correctly rounded" in why for _, why in how)
    title = cause.title.replace("reduction order", "reduction order and math libraries", 1) if math else cause.title
    return CauseVerdict(cause.id, title, "noise", what, found, cause.fix)


def _noise(cause: Cause, ctx: _Context) -> CauseVerdict:
    """Expected rounding noise only when it is sound: every local divergence is a reduction within its
    bound, every op was checked (a divergence among unchecked ops would go unseen), the per-op values
    show the compiled program's difference, and the outputs are not too far apart to be noise."""
    loc = ctx.localization
    what = "checked each local divergence against the error bound of its reduction"
    unseen = ctx.memo.get("outputs within noise")
    if loc is None and unseen:  # no op-level view, but the outputs are within the model's own noise
        gaps = max_gaps(ctx.path_out, ctx.base_out)
        ideal = ctx.run("f64")
        floor = max_gaps(ctx.base_out, ideal) if not isinstance(ideal, str) else None
        sizes = (f" ({ctx.path} is up to {max(gaps):.3g} from {ctx.baseline}, {ctx.baseline} up to {max(floor):.3g} "
                 "from the f64 ideal)" if gaps and floor else "")
        return CauseVerdict(cause.id, "rounding noise, judged at the outputs only", "noise",
                            "the outputs against twice the model's own rounding noise",
                            f"the outputs are within twice the model's own rounding noise{sizes}; {unseen}",
                            "compare with a tolerance (the smallest passing --ulp / --atol is printed); no op-level "
                            "view shows which ops round otherwise")
    if loc is None or not loc.local:
        return CauseVerdict(cause.id, cause.title, "not run", "noise bound", "no per-op values for this path")
    carried = _carried_noise(cause, ctx, loc)
    if carried is not None:
        return carried
    reductions = [d for d in loc.local if d.op.primitive in (cause.primitives or ())]
    if not (reductions and len(reductions) == len(loc.local) and all(d.within_noise_bound for d in reductions)):
        inside = sum(d.within_noise_bound for d in reductions)
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{len(loc.local) - inside} of {len(loc.local)} "
                            "local divergences are not reductions within their error bound")
    worst = max(reductions, key=lambda d: d.max_abs)
    found = (f"all {len(reductions)} local divergences found are reductions within their bound (largest: "
             f"{worst.op.primitive} at {worst.op.user_source or worst.op.source}, difference {worst.max_abs:.3g} <= "
             f"bound {worst.noise_bound:.3g})")
    _, out_ulp = _distance(ctx.path_out, ctx.base_out)
    unsound = []
    if loc.unchecked:
        unsound.append(f"{loc.unchecked} ops could not be checked, so a divergence among them would go unseen")
    if loc.perturbed:
        unsound.append("observing every op removed the difference, so the per-op values are not the program's")
    if out_ulp > NOISE_OUTPUT_ULP:
        unsound.append(f"the outputs differ by {out_ulp} ULP, more than rounding noise of sums grows to here")
    if unsound:
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{found}; but {'; and '.join(unsound)}: "
                            "not established as noise, the real divergence may lie elsewhere")
    return CauseVerdict(cause.id, cause.title, "noise", what, found, cause.fix)


def _fingerprinted(cause: Cause, ctx: _Context) -> CauseVerdict:
    fp = ctx.fingerprint
    what = f"candidate semantics {', '.join(repr(c) for c in cause.candidates)} against {ctx.path}'s outputs"
    if fp is None:
        return CauseVerdict(cause.id, cause.title, "not run", what, "no fingerprint for this path")
    by_name = {m.candidate: m for m in fp.matches}
    declared = by_name.get("declared")
    exact = [c for c in cause.candidates if c in by_name and by_name[c].exact]
    if exact and not (declared and declared.exact):
        return CauseVerdict(cause.id, cause.title, "confirmed", what, f"'{exact[0]}' reproduces {ctx.path} bit for "
                            f"bit ({by_name[exact[0]].description}); the declared semantics do not", cause.fix)
    near = ", ".join(f"'{c}' gives other values in {by_name[c].n_differ} element"
                     f"{'s' if by_name[c].n_differ != 1 else ''}" + (f" (up to {by_name[c].max_ulp} ULP)"
                                                                      if by_name[c].max_ulp is not None and
                                                                      by_name[c].max_ulp < 2**31 else "")
                     for c in cause.candidates if c in by_name)
    return CauseVerdict(cause.id, cause.title, "refuted", what, near or "no such candidate")


def _same_compiler(cause: Cause, ctx: _Context) -> CauseVerdict:
    _, options = parse_spec(ctx.path)
    flags = options.get("XLA_FLAGS", "")
    jit = "jit"
    for flag in flags.split():
        key, _, value = flag.lstrip("-").partition("=")
        jit = with_xla_option(jit, key, value or "true")
    outs = ctx.run(jit)
    if isinstance(outs, str):
        return CauseVerdict(cause.id, cause.title, "not run", f"ran {jit}", f"it failed ({outs})")
    jit_vs_base = _distance(outs, ctx.base_out)
    jit_vs_path = _distance(outs, ctx.path_out)
    if jit_vs_base[0] == 0 and jit_vs_path[0] > 0:
        return CauseVerdict(cause.id, cause.title, "confirmed", f"ran {jit} with the same XLA settings",
                            f"{jit} agrees with {ctx.baseline}; {ctx.path} does not", cause.fix)
    return CauseVerdict(cause.id, cause.title, "refuted", f"ran {jit} with the same XLA settings",
                        f"{jit} gives {ctx.path}'s numbers" if jit_vs_path[0] == 0 else
                        f"{jit} differs from both {ctx.baseline} and {ctx.path}")


def _matmul_precision(cause: Cause, ctx: _Context) -> CauseVerdict:
    """Re-run the path with matmul precision 'highest': as the path option ``jax_default_matmul_precision``
    where the path takes JAX options (a spec the user can run), else under ``jax.default_matmul_precision``."""
    import jax

    from ..execution.crashes import attempt, crashed_before
    from ..execution.inprocess import run_in_process

    if "jax_*" in make_path(ctx.path).options_help:
        spec = with_xla_option(ctx.path, "jax_default_matmul_precision", "highest")
        what = f"re-ran {spec}"
        outs: list[np.ndarray] | str | None = ctx.run(spec)
    else:
        spec, what = f"{ctx.path} [matmul precision highest]", "re-ran with jax.default_matmul_precision('highest')"
        if (how := crashed_before(spec)) is not None:
            return CauseVerdict(cause.id, cause.title, "not run", what,
                                f"the re-run {how.removeprefix('hung: ')} in an earlier worker (that re-run is skipped)")
        with jax.default_matmul_precision("highest"), attempt(spec):
            r = run_in_process(make_path(ctx.path), ctx.fn, ctx.args)
        outs = [a for _, a in r.outputs] if r.status == "ok" and r.outputs else f"{r.status}: {r.message}"
    if isinstance(outs, str):  # a re-run that fails tests nothing: the cause stands untested, never refuted
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the re-run failed ({outs})")
    rerun, result = measured_rerun(outs, ctx)
    before, after = rerun.before, rerun.after
    seen = (f"{ctx.path} differs from {ctx.baseline} in {before[0]} elements (max abs {before[2]:.3g}); with the "
            f"highest precision in {after[0]} (max abs {after[2]:.3g}){result}")
    if after[0] == 0:
        status: Status = "confirmed"
    elif rerun.outcome == "narrows" and after[2] <= PRECISION_REST * before[2]:
        # a float32 matmul summed in another order still differs by a few ULP: what is left is that order
        status = "confirmed"
        seen += (f": the reduced precision carried {1 - after[2] / before[2]:.1%} of the difference; what is left is "
                 "float32 summed in another order")
    else:
        status = "partly" if rerun.outcome == "narrows" else "refuted"
    proof = Fix("compile option", cause.fix, spec, after[0] == 0, seen, rerun=rerun)
    return CauseVerdict(cause.id, cause.title, status, what, seen, cause.fix if status != "refuted" else None,
                        proof if status != "refuted" else None, rerun=rerun)


PRECISION_REST = 0.01  # the share of a difference a highest-precision re-run may leave and still explain it


def _op_check(cause: Cause, ctx: _Context) -> CauseVerdict | None:
    """Decide ``cause`` on the diverging ops' own captured inputs (``LocalDivergence.semantics``); the
    whole-program experiment then proves the fix. None where no op offers such evidence."""
    loc = ctx.localization
    if cause.op_check == "widened":
        return _widened_check(cause, ctx)
    if cause.op_check == "kept-wide":
        return kept_wide(cause, ctx)
    if cause.op_check in OP_RULES:
        return decide(cause, loc, ctx.path, ctx.baseline)
    checked = [(d, m) for d in (loc.local if loc else ()) for m in d.semantics if m.name == cause.op_check]
    if not checked:
        return None
    hits = [(d, m) for d, m in checked if m.reproduces_path]
    if not hits:
        d, m = min(checked, key=lambda dm: dm[1].max_ulp_to_path)
        return CauseVerdict(cause.id, cause.title, "refuted", f"{m.name} semantics on the captured inputs of "
                            f"{_short(d)}", f"{m.description} is {m.max_ulp_to_path} ULP from {ctx.path}'s output")
    d, m = hits[0]
    declared = (f"; the declared semantics (each op rounded) reproduce {ctx.baseline}'s" if d.declared_side in
                ("baseline",) else "")
    evidence = (f"{m.description} reproduces {ctx.path}'s output of #{d.op.index} bit for bit ({d.n_differ} of "
                f"{d.size} elements differ from {ctx.baseline}){declared}")
    others = len({id(x) for x, _ in hits}) - 1
    if others:
        evidence += f"; so do {others} more diverging op{'s' if others > 1 else ''}"
    proof, _ = _flag_proof(cause, ctx, ": the flag changes more than this op")
    return CauseVerdict(cause.id, cause.title, "confirmed", f"{m.name} semantics on the captured inputs of "
                        f"{_short(d)}", evidence, cause.fix, proof)


def _flag_proof(cause: Cause, ctx: _Context, unless: str = "") -> tuple[Fix, str]:
    """The whole-program re-run with the cause's flags, as the proof (or not) of its fix, for a cause
    already decided on an op's own evidence; and what the re-run showed."""
    rerun = _recompile(cause, ctx, at_op=False)
    restored = rerun.status == "confirmed"
    spec = rerun.experiment.removeprefix("re-ran ")
    proof = Fix("serving flag" if ctx.path.startswith("savedmodel") else "compile option", cause.fix, spec,
                restored, rerun.evidence + ("" if restored else unless), rerun=rerun.rerun)
    return proof, rerun.evidence


def _widened_hits(ctx: _Context) -> list[Any]:
    """The divergences at a widening convert fed a narrow result never rounded, the carrier first."""
    loc = ctx.localization
    ranked = (loc.ranked + [d for d in loc.local if d.within_noise_bound]) if loc else []
    return [d for d in ranked if d.unrounded is not None and d.detail]


def _widened_side(cause: Cause, ctx: _Context) -> str | None:
    """Which side the op's own values show keeping excess precision ("path" or "baseline"), for the cause
    decided on them; None where no op shows it."""
    if cause.op_check != "widened":
        return None
    hits = _widened_hits(ctx)
    return hits[0].unrounded_side if hits else None


def _widened_check(cause: Cause, ctx: _Context) -> CauseVerdict | None:
    """Excess precision on the op's own values: a widening convert whose float32 outputs are not values
    of the declared narrow dtype, so the narrow result feeding it was never rounded. Confirmed there;
    the flag re-run then proves the fix (None where no op shows it: the re-run decides). Where the
    baseline is the side that kept it (jit as the baseline of eager), the baseline is re-run with the
    flag, and the fix holds where it then gives the path's values."""
    hits = _widened_hits(ctx)
    if not hits:
        return None
    d = hits[0]
    if d.unrounded_side == "baseline":
        proof, seen_rerun = _baseline_flag_proof(cause, ctx)
    else:
        proof, seen_rerun = _flag_proof(cause, ctx)
    more = f"; {len(hits) - 1} more such op{'s' if len(hits) > 2 else ''}" if len(hits) > 1 else ""
    u = d.unrounded
    narrow = u.outputs[0].split("[", 1)[0] if u.outputs else "narrow"
    who = f"in {ctx.baseline} (the baseline), " if d.unrounded_side == "baseline" else ""
    seen = (f"{who}#{d.op.index} {d.op.primitive} receives values that are not {narrow}: the {narrow} result of "
            f"#{u.index} {u.primitive} was never rounded{more}")
    return CauseVerdict(cause.id, cause.title, "confirmed", f"the values of {_short(d)}",
                        f"{seen}; {seen_rerun}", cause.fix, proof)


def _baseline_flag_proof(cause: Cause, ctx: _Context) -> tuple[Fix, str]:
    """The baseline re-run with the cause's flags, against the path's outputs: the fix where the baseline
    is the side that departs from the declared semantics."""
    spec = ctx.baseline
    for key, value in cause.options:
        spec = with_xla_option(spec, key, value)
    kind = "serving flag" if spec.startswith("savedmodel") else "compile option"
    outs = ctx.run(spec)
    if isinstance(outs, str):
        seen = f"the re-run of the baseline failed ({outs})"
        return Fix(kind, cause.fix, spec, False, seen), seen
    before = (*_distance(ctx.path_out, ctx.base_out), max(max_gaps(ctx.path_out, ctx.base_out), default=0.0))
    after = (*_distance(ctx.path_out, outs), max(max_gaps(ctx.path_out, outs), default=0.0))
    result = narrowing(before, after, _distance(outs, ctx.base_out)[0] > 0)
    ideal = ctx.ideal_errors(ctx.path_out, outs)
    rerun = Rerun(before, after, _OUTCOMES[result], ideal)  # type: ignore[arg-type]
    seen = (f"{ctx.path} differs from {ctx.baseline} in {before[0]} elements (max {before[1]} ULP, max abs "
            f"{before[2]:.3g}); from {spec} in {after[0]} (max {after[1]} ULP, max abs {after[2]:.3g}){result}")
    return Fix(kind, cause.fix, spec, after[0] == 0, seen, rerun=rerun), seen


def _short(d: Any) -> str:
    loops = "".join(f"{f.describe()}: " for f in d.within)
    return f"{loops}#{d.op.index} {d.op.primitive} ({d.op.user_source or d.op.source or 'unknown line'})"


def _no_op_evidence(cause: Cause, ctx: _Context) -> CauseVerdict:
    return CauseVerdict(cause.id, cause.title, "not run", "the diverging ops' own evidence",
                        "no diverging op shows it" if ctx.localization is not None else "no per-op values for this path")


_COLLECTIVE = re.compile(r"%([\w.\-]+) = \S+ (all-reduce|reduce-scatter)(?:-start)?\(.*?op_name=\"([^\"]*)\"")


def _partitioned(cause: Cause, ctx: _Context) -> CauseVerdict:
    """A sharded path's divergence at a reduction: the collective that combines its partial sums (from
    the optimized HLO of the sharded program), and whether the difference is within the bound."""
    import jax

    from ..paths import make_path

    options = parse_spec(ctx.path)[1]
    what = "the collectives of the sharded program's optimized HLO, and each reduction's error bound"
    if "mesh" not in options:
        return CauseVerdict(cause.id, cause.title, "not run", what, f"{ctx.path} is not sharded (no mesh=N)")
    loc = ctx.localization
    reductions = [d for d in (loc.local if loc is not None else ()) if d.op.primitive in (cause.primitives or ())]
    if not reductions:
        return CauseVerdict(cause.id, cause.title, "refuted", what, "no local divergence is a reduction")
    try:
        path = make_path(ctx.path)
        placed = path.placed(ctx.args)
        hlo = jax.jit(ctx.fn).lower(*placed).compile(compiler_options=path.compiler_options()).as_text()
    except Exception as e:
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the sharded program could not be compiled "
                            f"for its HLO ({_first_line(e)})")
    found = _COLLECTIVE.findall(hlo)
    parts = []
    for d in reductions[:3]:
        suffix = "/".join(x for x in (d.op.name_stack, d.op.primitive) if x)
        mine = [f"%{name} ({kind})" for name, kind, op_name in found if op_name.endswith(suffix)]
        if not mine:
            continue
        bound = (f"within the error bound of this sum ({d.max_abs:.3g} <= {d.noise_bound:.3g})" if d.within_noise_bound
                 else f"beyond the error bound of this sum ({d.max_abs:.3g} > {d.noise_bound:.3g}): not order alone"
                 if d.noise_bound is not None else "no error bound known for it")
        parts.append((d, f"#{d.op.index} {d.op.primitive} ({d.op.user_source or d.op.source or 'unknown line'}) is "
                      f"summed as {options['mesh']} partial sums, one per device, combined by {', '.join(mine[:2])}; "
                      f"{bound}"))
    if not parts:
        kinds = sorted({kind for _, kind, _ in found})
        return CauseVerdict(cause.id, cause.title, "refuted", what, "the diverging reductions are not combined by a "
                            f"collective ({'the program has ' + ', '.join(kinds) if kinds else 'none in the program'})")
    status = "noise" if all(d.within_noise_bound for d, _ in parts) and len(parts) == len(loc.local) else "confirmed"
    return CauseVerdict(cause.id, cause.title, status, what, "; ".join(t for _, t in parts), cause.fix)


WELL_CONDITIONED = "well-conditioned model"


def _well_conditioned(cause: Cause, ctx: _Context) -> CauseVerdict:
    """Where blame found small divergences amplified by a recognised ill-conditioned form: rewrite that form
    (``fixes.well_conditioned``), re-run the path, the baseline and f64 on it, and judge the remaining
    difference against the fixed program's own rounding noise (the baseline's distance to f64)."""
    from ..fixes import rewrites, well_conditioned
    from ..paths.staging import reused

    blame = ctx.localization.blame if ctx.localization is not None else None
    amp = blame.amplifier if blame is not None else None
    if amp is None or amp.pattern is None:
        return CauseVerdict(cause.id, cause.title, "not run", "", "no small divergence is amplified by a recognised "
                            "ill-conditioned form")
    at = [amp.where] if ":" in amp.where else None
    what = f"rewrote #{amp.index} {amp.primitive} ({amp.where}) in its well-conditioned form"
    try:
        sites = rewrites(ctx.fn, ctx.args, at=at)
    except Exception as e:
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the program could not be rewritten ({_first_line(e)})")
    if not sites:
        return CauseVerdict(cause.id, cause.title, "refuted", what, f"{amp.pattern} is not written in a form the "
                            "rewrite recognises there (masked or cross-device means are not)")
    fixed = reused(WELL_CONDITIONED, (id(ctx.fn), amp.where), ctx.fn, lambda: well_conditioned(ctx.fn, at=at))
    what += f" ({len(sites)} site{'s' if len(sites) > 1 else ''}: {sites[0]}); ran {ctx.path}, {ctx.baseline} and f64 on it"
    mine, theirs, ideal = (ctx.run(spec, fixed, WELL_CONDITIONED) for spec in (ctx.path, ctx.baseline, "f64"))
    ideal_before = ctx.run("f64")
    failed = next((f"{spec}: {o}" for spec, o in zip((ctx.path, ctx.baseline, "f64"), (mine, theirs, ideal))
                   if isinstance(o, str)), None)
    if failed is not None:
        return CauseVerdict(cause.id, cause.title, "not run", what, f"the rewritten program failed ({failed})")
    before, worst = max(max_gaps(ctx.path_out, ctx.base_out)), max(max_gaps(mine, theirs))
    # Rounding noise: the path is then about as far from f64 as the baseline is (a factor 2), output by output.
    mine_err, base_err = max_gaps(mine, ideal), max_gaps(theirs, ideal)
    within = all(m <= 2 * b for m, b in zip(mine_err, base_err))
    were = ""
    if not isinstance(ideal_before, str):
        were = (f" (were {max(max_gaps(ctx.path_out, ideal_before)):.3g} and "
                f"{max(max_gaps(ctx.base_out, ideal_before)):.3g})")
    words = (f"on {ctx.path} the difference from {ctx.baseline} falls from {before:.3g} to {worst:.3g} (max abs); "
             f"{ctx.path} is then {max(mine_err):.3g} and {ctx.baseline} {max(base_err):.3g} from the f64 ideal{were}"
             f": {'within' if within else 'beyond'} the rewritten program's own rounding noise")
    status = "confirmed" if within and worst < before else "partly" if worst < before / 2 else "refuted"
    remedy = (amp.remedy or "its well-conditioned form") + ", or wrap the model in jaxparity.fixes.well_conditioned(fn)"
    proof = Fix("model change", remedy, f"{ctx.path} [{WELL_CONDITIONED}]", status == "confirmed",
                words + (NARROWS if status == "partly" else ""))
    return CauseVerdict(cause.id, cause.title, status, what, f"{amp.pattern} amplifies the small divergences; "
                        f"{proof.evidence}", cause.fix if status != "refuted" else None,
                        proof if status != "refuted" else None)


def _artifact(cause: Cause, ctx: _Context) -> CauseVerdict:
    """Decided on what the runtime really runs (``explain.artifact_evidence``)."""
    if ctx.base_vals is None:
        return CauseVerdict(cause.id, cause.title, "not run", "the runtime's own artifact", "no per-op values for "
                            "the baseline")
    try:
        verdict = ARTIFACT_RULES[cause.id](cause, ctx)
    except Exception as e:  # evidence, never the end of the explanation
        return CauseVerdict(cause.id, cause.title, "not run", "the runtime's own artifact",
                            f"the artifact's evidence could not be read ({_first_line(e)})")
    if verdict is None:
        return CauseVerdict(cause.id, cause.title, "not run", "the runtime's own artifact",
                            "no diverging op shows it" if ctx.artifact() is not None or cause.id == "stored-constant"
                            else f"{ctx.path} has no artifact of its own to read back")
    return verdict


def _variants(cause: Cause, ctx: _Context) -> CauseVerdict:
    """Decided by the op's known variants on its own inputs (``explain.variant_evidence``)."""
    try:
        verdict = decide_variant(cause, ctx)
    except Exception as e:  # evidence, never the end of the explanation
        return CauseVerdict(cause.id, cause.title, "not run", "the diverging op's known variants",
                            f"the variants could not be run ({_first_line(e)})")
    if verdict is None:
        return CauseVerdict(cause.id, cause.title, "not run", "the diverging op's known variants",
                            "no diverging op has a known variant that reproduces its values")
    return verdict


def _option_diff(cause: Cause, ctx: _Context) -> CauseVerdict:
    """The path is the baseline's runtime with other options: those options are the difference."""
    (kind, mine), (base_kind, theirs) = parse_spec(ctx.path), parse_spec(ctx.baseline)
    what = f"the specs of {ctx.path} and {ctx.baseline}"
    if kind != base_kind or mine == theirs:
        return CauseVerdict(cause.id, cause.title, "not run", what, "the paths differ by more than options")
    keys = sorted(set(mine) | set(theirs))
    differ = "; ".join(f"{k}={mine.get(k, 'default')} on {ctx.path}, {theirs.get(k, 'default')} on {ctx.baseline}"
                       for k in keys if mine.get(k) != theirs.get(k))
    return CauseVerdict(cause.id, cause.title, "confirmed", what, f"the two paths run the same runtime and differ only "
                        f"in {differ}: that setting changes the numbers", cause.fix)


_EXPERIMENTS: dict[str, Callable[[Cause, _Context], CauseVerdict]] = {
    "option-diff": _option_diff,
    "well-conditioned": _well_conditioned,
    "partition": _partitioned,
    "op-evidence": _no_op_evidence,
    "recompile": _recompile,
    "noise-bound": _noise,
    "fingerprint": _fingerprinted,
    "same-compiler": _same_compiler,
    "matmul-precision": _matmul_precision,
    "artifact": _artifact,
    "variants": _variants,
}


_RERUNS = ("recompile", "same-compiler", "matmul-precision")


def _ahead(ctx: _Context, pool: Any) -> None:
    """The first flag re-runs below, as many as there are cores, started now where they are independent
    of this process: a savedmodel re-run under other XLA_FLAGS is a serving process of its own
    (TensorFlow's import, its load and compile of the model: seconds each), converted here now and
    served from ``pool``'s threads while the experiments before them run here. Another path's serving
    processes are only started (``Path.prestart``)."""
    specs = []
    for cause in CAUSES:
        if (cause.experiment == "recompile" and cause.options and _applies(cause, ctx) is None
                and ctx.path.split(":", 1)[0] in cause.paths):  # not a cause applied to the baseline's side
            spec = ctx.path
            for key, value in cause.options:
                spec = with_xla_option(spec, key, value)
            specs.append(spec)
    specs = list(dict.fromkeys(specs))[:os.cpu_count() or 1]  # at most that many started for nothing
    try:
        if specs and make_path(ctx.path).overlaps:
            ctx.run_ahead(specs, pool)
            return
        for spec in specs[:max(1, (os.cpu_count() or 1) - 1)]:
            make_path(spec).prestart()
    except Exception:  # noqa: BLE001 - a head start, never a failure
        pass


def explain_path(
    fn: Callable[..., Any],
    args: tuple,
    path: str,
    baseline: str,
    path_out: Sequence[np.ndarray],
    base_out: Sequence[np.ndarray],
    *,
    evidence: bool = True,
    depth: int = 0,
    keep: dict | None = None,
) -> PathExplanation:
    """Explain why ``path`` gave ``path_out`` where ``baseline`` gave ``base_out`` (flat output leaves).
    Where the closest fix restores parity only partly, what remains after it is explained too
    (``remainder``), up to ``MAX_PEEL`` causes deep. ``keep``, when given, receives the program and
    both sides' per-op values of the case (key ``()``) and of every loop body opened (see
    ``localize.loops.frame_key``): what ``jaxparity reduce`` cuts its reproducer from."""
    import jax

    from ..paths.staging import reused, signature

    # Made once per function, shapes and configuration while compile_once() is active (a sweep worker
    # explaining input set after input set): the program does not depend on the inputs' values.
    program = reused("flat program", (id(fn), signature(args)), fn, lambda: flatten(fn, args))
    flat_args = jax.tree_util.tree_leaves(args)
    keep = {} if keep is None else keep
    kind = path.split(":", 1)[0]
    notes: list[str] = []
    localization = path_vals = None
    if kind == "observed":
        notes.append("outputs read from a file have no per-op values: explained by fingerprint only")
    else:
        base_vals, path_vals = (_captured(program, spec, flat_args, notes) for spec in (baseline, path))
        if base_vals is None:
            path_vals = None
    unsound = False  # the per-op values are not the program's, and what they show does not reproduce its outputs
    memo: dict[str, Any] = {}  # the context's memo (``_Context.memo``), begun where the capture says something
    if path_vals is not None:
        moved = _distance(path_vals.outputs, path_out)[0]
        localization = localize(program, path_vals, base_vals, flat_args, baseline)
        keep[()] = (program, path_vals, base_vals)
        localization = _open_loops(program, localization, path_vals, base_vals, flat_args, path_out, notes, keep)
        localization = blame_localization(program, localization, path_vals, base_vals, flat_args, path_out,
                                          base_vals.outputs)
        if moved:
            together = localization.blame.together if localization.blame is not None else None
            seen = f"returning every intermediate changed {moved} output element{'s' if moved > 1 else ''} of {path}"
            if not localization.local and kind in RUNTIMES:
                notes.append(f"{seen} (the model it serves computes them with other kernels than the instrumented "
                             "one): its per-op values show no op departing on its own, so the kernels of its own "
                             "artifact decide")
            elif not localization.local:
                notes.append(f"{seen} (the compiler fused differently): per-op values are evidence, cross-checked "
                             "by the compiler's own HLO")
            elif together is not None and together >= BLAMED:
                notes.append(f"{seen}, yet the divergences seen in its per-op values reproduce {together:.0%} of "
                             "its own output difference: judged by them")
            elif (unstable := _unstable(fn, args, path, path_out, path_vals.outputs)) is not None:
                notes.append(f"{seen}, but only where two plain runs of {path} disagree with each other too "
                             f"({unstable} output element{'s' if unstable > 1 else ''}: {path}'s result there is not determined by its inputs, "
                             "e.g. a read of memory it does not own): judged by them")
            elif (already := _moved_where_differing(path_out, path_vals.outputs, base_out)) is not None and \
                    (together or 0) >= PARTLY:
                notes.append(f"{seen}, only where its outputs already differ from {baseline} ({already} output "
                             f"element{'s' if already > 1 else ''}: their values depend on how the program is compiled, e.g. a read out of "
                             f"bounds); the divergences seen in its per-op values reproduce {together:.0%} of its "
                             "output difference: judged by them")
            elif (within := _within_own_noise(path_out, base_out, program, flat_args)) and (together or 0) >= PARTLY:
                notes.append(f"{seen}; the divergences seen in its per-op values reproduce {together:.0%} of its "
                             "own output difference, and its outputs are within twice the model's own rounding noise: "
                             "judged by them as far as they go")
            elif within:
                unsound = True
                memo["outputs within noise"] = (
                    f"{seen}, and the divergences seen in its per-op values reproduce {together or 0:.0%} of its "
                    "output difference: they are not the program it runs, so no op says which")
                notes.append(f"{seen}: its per-op values are not those of the program it runs (the divergences seen "
                             f"in them reproduce {together or 0:.0%} of its output difference): no op-level "
                             "conclusion is drawn from them; its outputs are within twice the model's own rounding "
                             "noise, judged at the outputs")
            else:
                unsound = True
                notes.append(f"{seen}: its per-op values are not those of the program it runs, the divergences seen "
                             f"in them reproduce {together or 0:.0%} of its output difference, and its outputs are "
                             "beyond the model's own rounding noise: no op-level conclusion is drawn from them")
        if moved and (unsound or not localization.local):
            differing = [i for i, (a, b) in enumerate(zip(path_out, base_out)) if _distance([a], [b])[0]]
            localization = dataclasses.replace(localization, perturbed=True,
                                               cone=output_cone(program, differing))
        notes.extend(localization.notes)

    hlo = _compiler_evidence(fn, args, path, notes) if evidence and kind in COMPILED else None
    if evidence and kind in RUNTIMES:
        _runtime_evidence(fn, args, path, notes)
    fp = _fingerprint(fn, args, path_out, notes)
    device = jax.default_backend() if kind in ("jit", "export", "eager") else "cpu"
    dtypes = {str(a.dtype) for a in program.avals.values() if hasattr(a, "dtype")}
    # Causes read the per-op view only where it is the program's (or reproduces its outputs); the runtime's
    # own artifact and whole-program re-runs still decide where it is not.
    ctx = _Context(fn, tuple(args), path, baseline, list(path_out), list(base_out), device, program, dtypes,
                   None if unsound else localization, fp, {}, base_vals if path_vals is not None else None, flat_args,
                   path_vals=None if unsound else path_vals, notes=list(notes), memo=memo)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="jaxparity-rerun") as pool:
        _ahead(ctx, pool)
        causes = _experiments(ctx)
        ctx.settle()  # a re-run started ahead that no experiment needed still ends here
    causes = _name_the_pass(causes)
    if kind in RUNTIMES:  # XLA's flags do nothing in another runtime: its own fix, where the table has one
        by_id = {c.id: c for c in CAUSES}
        causes = [dataclasses.replace(c, fix=by_id[c.cause].runtime_fix) if c.cause in by_id and
                  by_id[c.cause].runtime_fix and c.fix else c for c in causes]
    causes = _converter_or_runtime(causes, ctx, keep)
    if not any(c.status in ("confirmed", "partly", "noise") for c in causes):
        causes.append(CauseVerdict("unknown", "unknown", "confirmed", "every applicable experiment above",
                                   "no known cause's experiment restored parity or reproduced the numbers"))
    fixes = _fixes(ctx, causes)
    notes.extend(n for n in ctx.notes if n not in notes)
    localization = _as_kernels(localization, ctx.memo.get("kernels", {}))
    from ..report.brief import sentences

    remainder = _peel(ctx, causes, fixes, evidence, depth)
    found = PathExplanation(path, baseline, "", localization, hlo, fp, tuple(causes), tuple(fixes), tuple(notes),
                            remainder)
    return dataclasses.replace(found, summary=sentences(found))


def _experiments(ctx: _Context) -> list[CauseVerdict]:
    """Each known cause in the table's order: not run (why not), or its experiment's verdict."""
    causes: list[CauseVerdict] = []
    explained_by: str | None = None
    for cause in CAUSES:
        reason = _applies(cause, ctx)
        # A documented option or a known mechanism that explains it is not wrong code; disabling a
        # whole pass (algsimp) can restore parity either way, so wrong code is still judged then.
        documented = cause.id == "wrong-code" and explained_by not in (None, "algebraic-rewrite")
        if reason is None and explained_by and (cause.experiment in _RERUNS or documented):
            reason = f"not needed: {explained_by} already explains it"
        if reason is not None:
            causes.append(CauseVerdict(cause.id, cause.title, "not run", "", reason))
            continue
        try:
            verdict = _op_check(cause, ctx) if cause.op_check else None
            if verdict is None:
                verdict = _EXPERIMENTS[cause.experiment](cause, ctx)
        except Exception as e:  # one experiment that fails is said, and never takes the explanation down
            verdict = CauseVerdict(cause.id, cause.title, "not run", cause.experiment,
                                   f"the experiment failed ({_first_line(e)})")
        causes.append(verdict)
        # op evidence names a cause, not a full fix; a variant or the artifact that reproduces the values is the
        # mechanism whether or not its fix held
        # (a highest-precision re-run that leaves only another summation order is the mechanism too)
        restores = verdict.proof is None or verdict.proof.verified or cause.experiment in ("variants", "artifact",
                                                                                           "matmul-precision")
        # A fingerprint of subnormal flushing and an amplifier downstream do not explain the divergence alone.
        partial = verdict.cause == "amplification" or (verdict.cause == "denormal-flush"
                                                       and verdict.experiment.startswith("candidate"))
        # rounding noise established on every divergence that carries the difference explains it too: a
        # whole-program "another lowering" re-run then adds nothing
        if (verdict.status == "confirmed" and not partial and restores) or verdict.status == "noise":
            explained_by = explained_by or verdict.cause
    return causes


def _as_kernels(loc: Localization | None, kernels: dict[int, tuple[str, tuple[str, ...]]]) -> Localization | None:
    """The localization with each divergence the runtime computes inside a fused kernel marked so (its op
    code and the ops fused with it, found by ``fused-kernel`` on the path's own artifact)."""
    if loc is None or not kernels:
        return loc
    local = tuple(dataclasses.replace(d, kernel=kernels[d.op.index][0], fused=kernels[d.op.index][1])
                  if not d.within and d.op.index in kernels else d for d in loc.local)
    return dataclasses.replace(loc, local=local)


def _within_own_noise(path_out: Sequence[np.ndarray], base_out: Sequence[np.ndarray], program: FlatProgram,
                      flat_args: Sequence[Any]) -> bool:
    """Is every output of the path within twice the baseline's own distance from the f64 ideal (the model's
    own rounding noise)? An output-level fact, whatever the per-op values show."""
    from ..localize.values import program_values

    try:
        ideal = program_values(program, "f64", flat_args).outputs
    except Exception:  # the interpreter cannot run it: not established
        return False
    return all(g <= 2 * f for g, f in zip(max_gaps(path_out, base_out), max_gaps(base_out, ideal)))


def _unchanged(a: Any, b: Any) -> np.ndarray:
    """Where two results of one output are the same (NaN against NaN the same, whatever its bits)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return np.zeros(a.shape, bool)
    same = a == b
    if a.dtype.kind == "c" or is_float_dtype(a.dtype):  # bfloat16, float8: numpy kind 'V'
        same |= np.isnan(a) & np.isnan(b)
    return same


def _unstable(fn: Callable[..., Any], args: tuple, path: str, path_out: Sequence[np.ndarray],
              captured: Sequence[Any]) -> int | None:
    """A capture that moved the outputs only where the path is not deterministic: a second plain run of the
    path differs from the first wherever the capture does (and maybe elsewhere). The number of output
    elements the two plain runs disagree on, or None (the path is deterministic, or the capture moved other
    elements too)."""
    from ..execution.inprocess import run_in_process

    r = run_in_process(make_path(path), fn, args)
    if r.status != "ok" or not r.outputs or len(r.outputs) != len(path_out):
        return None
    again = [a for _, a in r.outputs]
    stable = [_unchanged(x, y) for x, y in zip(path_out, again)]
    unstable = sum(int(np.count_nonzero(~m)) for m in stable)
    moved_elsewhere = any(np.any(m & ~_unchanged(x, c)) for m, x, c in zip(stable, path_out, captured))
    return unstable if unstable and not moved_elsewhere else None


def _moved_where_differing(path_out: Sequence[np.ndarray], captured: Sequence[Any],
                           base_out: Sequence[np.ndarray]) -> int | None:
    """The number of output elements a capture moved, where every one of them already differs from the
    baseline in the plain run (the capture changed which wrong value they hold, not which elements are wrong);
    None where it moved an element the plain run gets right."""
    moved = 0
    for x, c, b in zip(path_out, captured, base_out):
        changed = ~_unchanged(x, c)
        if np.any(changed & _unchanged(x, b)):
            return None
        moved += int(np.count_nonzero(changed))
    return moved or None


def _name_the_pass(causes: list[CauseVerdict]) -> list[CauseVerdict]:
    """Wrong code, where a re-run with a compiler pass disabled restores parity, names that pass: what
    the maintainers need first."""
    wrong = next((c for c in causes if c.cause == "wrong-code" and c.status == "confirmed"), None)
    passes = [c.experiment.removeprefix("re-ran ") for c in causes
              if c.status == "confirmed" and c.experiment.startswith("re-ran ") and "disable" in c.experiment]
    if wrong is None or not passes:
        return causes
    named = dataclasses.replace(wrong, evidence=f"{wrong.evidence}; {passes[0]} restores parity: name that pass in "
                                "the report")
    return [named if c is wrong else c for c in causes]


def _converter_or_runtime(causes: list[CauseVerdict], ctx: _Context, keep: dict) -> list[CauseVerdict]:
    """Wrong code on a path whose converted artifact another runtime also runs (``Path.same_artifact``: onnx
    and onnx-ref): the op alone on that other runtime decides between the conversion and the kernel."""
    from ..localize.loops.descend import frame_key
    from ..localize.region import differs, make_region, run_region

    other = make_path(ctx.path).same_artifact
    wrong = next((c for c in causes if c.cause in ("wrong-code", "semantic-variant") and c.status == "confirmed"),
                 None)
    d = ctx.localization.lead if ctx.localization is not None else None
    if other is None or wrong is None or d is None or frame_key(d.within) not in keep:
        return causes
    program, path_vals, _ = keep[frame_key(d.within)]
    try:
        region = make_region(program, path_vals, [d.op.index], d.op.index)
        mine, theirs = run_region(ctx.path, region), run_region(other, region)
    except Exception as e:
        note = f"; {other} could not run the op alone to tell the converter from the runtime ({_first_line(e)})"
    else:
        how = "wrongly" if wrong.cause == "wrong-code" else "so"
        note = (f"; {other} gives the same values on the op alone: "
                f"{make_path(ctx.path).same_artifact_agrees(d.op.primitive, how)}" if not differs(mine, theirs) else
                f"; {other} gives other values on the same converted op: {ctx.path}'s kernel is at fault, not the "
                "converter")
    return [dataclasses.replace(c, evidence=c.evidence + note) if c is wrong else c for c in causes]


MAX_PEEL = 2  # causes peeled after the first: a fix that only partly restores parity is applied, the rest explained


def _peel(ctx: _Context, causes: list[CauseVerdict], fixes: list[Fix], evidence: bool,
          depth: int) -> PathExplanation | None:
    """The explanation of what remains once the closest partial fix (a re-run that moved the path
    closer to the baseline without reaching it) is applied; None when a fix restores parity or none
    moved it."""
    if depth >= MAX_PEEL or any(f.verified for f in fixes):
        return None
    # The explaining causes' own fixes first (the fix the short explanation shows, ◐), then the re-runs of
    # causes that only partly explain: of two that narrow as far, the one the reader was shown is peeled.
    specs = [v.proof.spec for v in causes if v.proof is not None and not v.proof.verified and v.proof.spec
             and "[" not in v.proof.spec]  # a model change is not a path to explain
    specs += [v.experiment.removeprefix("re-ran ") for v in causes
              if v.status == "partly" and v.experiment.startswith("re-ran ")]
    before = _distance(ctx.path_out, ctx.base_out)[0]
    best: tuple[int, str, list[np.ndarray]] | None = None
    for spec in dict.fromkeys(specs):
        outs = ctx.runs.get(spec)
        if isinstance(outs, list):  # a fix that narrows the difference (in every measure), as its sentence says
            n = _distance(outs, ctx.base_out)[0]
            if 0 < n < before and measured_rerun(outs, ctx)[0].outcome == "narrows" and (best is None or n < best[0]):
                best = (n, spec, outs)
    if best is None:
        return None
    _, spec, outs = best
    try:
        return explain_path(ctx.fn, ctx.args, spec, ctx.baseline, outs, ctx.base_out, evidence=evidence,
                            depth=depth + 1)
    except Exception:
        return None


def _open_loops(program: FlatProgram, loc: Localization, path_vals: Any, base_vals: Any, flat_args: Sequence[Any],
                path_out: Sequence[np.ndarray], notes: list[str], keep: dict | None = None) -> Localization:
    """Open the loops and branches that diverge on their own (``localize.loops``)."""
    from ..localize.loops.descend import open_loops

    try:
        return open_loops(program, loc, path_vals, base_vals, case=program, flat_args=flat_args,
                          plain_outputs=path_out, keep=keep)
    except Exception as e:  # the loop op itself stays the finding
        notes.append(f"loops could not be opened ({type(e).__name__}: {_first_line(e)})")
        return loc


def _captured(program: FlatProgram, spec: str, flat_args: Sequence[Any], notes: list[str]) -> Any:
    """Every op's values along ``spec``, or None with a note saying why they could not be captured
    (e.g. a runtime with no kernel for an op only the instrumented program has)."""
    try:
        found = op_values(program, spec, flat_args)
        if found.reused:
            notes.append(f"jaxparity's cache held the per-op values of {spec} (entry {found.reused}: the same "
                         "program, inputs, options and versions): reused")
        return found
    except Exception as e:
        other = (" (the program that returns every intermediate is converted into another model than the one "
                 "served, which runs)" if spec.split(":", 1)[0] in RUNTIMES else "")
        notes.append(f"per-op values of {spec} could not be captured ({type(e).__name__}: {_first_line(e)}){other}: "
                     "explained from the outputs only")
        return None


def explain_paths(fn: Callable[..., Any], args: tuple, paths: Sequence[tuple[str, Sequence[np.ndarray]]],
                  baseline: str, base_out: Sequence[np.ndarray]) -> list[PathExplanation]:
    """Each path of ``paths`` ((spec, flat outputs)) explained against ``baseline``, then reasoned across:
    paths whose outputs are the same bit for bit say so, and one whose own experiments found no cause
    takes the cause another such path confirmed ("iree gives jit's values: FMA contraction, as jit")."""
    found = [explain_or_report(fn, args, spec, baseline, outs, base_out) for spec, outs in paths]
    return share_across(found, [outs for _, outs in paths])


def share_across(found: Sequence[PathExplanation], outputs: Sequence[Sequence[np.ndarray]]) -> list[PathExplanation]:
    """``found`` with ``same_values`` set where two paths' outputs are identical, and a path left
    without a cause (unknown, or only the catch-all of another lowering) given the other's."""
    from ..report.format import explaining_cause

    out = list(found)
    for j, e in enumerate(out):
        first = next((i for i in range(j) if _identical(outputs[i], outputs[j])), None)
        if first is None:
            continue
        other = out[first]
        shared = dataclasses.replace(e, same_values=other.path)
        mine = explaining_cause(e.causes, e.localization.lead if e.localization is not None else None)
        theirs = explaining_cause(other.causes, other.localization.lead if other.localization is not None else None)
        catch_all = mine is None or mine.cause in ("unknown", "other-lowering")
        if catch_all and theirs is not None and theirs.cause not in ("unknown", "other-lowering"):
            adopted = CauseVerdict(theirs.cause, theirs.title, "confirmed", f"{other.path}'s explanation",
                                   f"{e.path} gives {other.path}'s values bit for bit, and on {other.path}: "
                                   f"{theirs.evidence}", theirs.fix)
            shared = dataclasses.replace(shared, causes=(adopted,) + tuple(c for c in e.causes if c.cause != "unknown"))
        out[j] = shared
    return out


def _identical(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.asarray(x).dtype == np.asarray(y).dtype and np.asarray(x).shape ==
                                    np.asarray(y).shape and np.asarray(x).tobytes() == np.asarray(y).tobytes()
                                    for x, y in zip(a, b))


def explain_or_report(fn: Callable[..., Any], args: tuple, path: str, baseline: str, path_out: Sequence[np.ndarray],
                      base_out: Sequence[np.ndarray]) -> PathExplanation:
    """``explain_path``, or, where explaining this path fails, an explanation that says why: one path
    never stops the explanation of the others."""
    try:
        return explain_path(fn, args, path, baseline, path_out, base_out)
    except Exception as e:
        import traceback

        where = traceback.extract_tb(e.__traceback__)[-1]
        return PathExplanation(path, baseline, f"{path} could not be explained: {type(e).__name__}: {_first_line(e)}",
                               None, None, None, (), (),
                               (f"explaining failed in {where.name} ({where.filename.rsplit('/', 1)[-1]}:"
                                f"{where.lineno}); its comparison above stands",))


def _first_line(e: BaseException) -> str:
    """The message's first line, and the next one where the first only introduces it ('...:')."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    return " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def _compiler_evidence(fn: Callable[..., Any], args: tuple, path: str, notes: list[str]) -> Any:
    from ..paths.staging import reused, signature
    from ..paths.xla import recent_optimized_hlo
    from . import hlo

    name, options = parse_spec(path)
    if name in ("savedmodel", "savedmodel-c"):
        options = {k.lstrip("-"): v for k, _, v in (f.partition("=") for f in options.get("XLA_FLAGS", "").split())}
        notes.append("compiler evidence for savedmodel comes from JAX's XLA on the same program; TensorFlow "
                     "runs its own XLA build")
    jit = make_path("jit:" + ",".join(f"{k}={v}" for k, v in options.items() if k.islower()))
    compile_options = jit.compiler_options()  # type: ignore[attr-defined]
    # The optimized HLO of jit with the same options, when the comparison has just compiled it
    # (export and TensorFlow run the same program; evidence is read in jit's naming).
    recent = recent_optimized_hlo(jit.spec, fn, args)
    try:  # the HLO does not depend on the inputs' values: read once per program while compile_once() is active
        return reused("compiler evidence", (id(fn), signature(args), path, jit.spec), fn,
                      lambda: hlo.compiler_evidence(fn, args, compiler_options=compile_options, path=path,
                                                    optimized_text=recent))
    except Exception as e:  # evidence is optional: the experiments still decide
        notes.append(f"no compiler evidence: {type(e).__name__}: {e}")
        return None


def _runtime_evidence(fn: Callable[..., Any], args: tuple, path: str, notes: list[str]) -> None:
    """The runtime's own words on how it compiles this program (``Path.evidence``: IREE's bf16 arithmetic
    computed in float32), as notes; nothing where it says nothing."""
    p = make_path(path)
    try:
        lines = p.evidence(fn, args)
    except Exception as e:
        notes.append(f"no {p.name} evidence: {type(e).__name__}: {e}")
        return None
    notes.extend(f"{p.evidence_label}: {line}" for line in lines)
    return None


def _fingerprint(fn: Callable[..., Any], args: tuple, outs: Sequence[np.ndarray], notes: list[str]) -> Any:
    from .fingerprint import fingerprint

    try:
        return fingerprint(fn, args, list(outs))
    except Exception as e:
        notes.append(f"no fingerprint: {type(e).__name__}: {e}")
        return None


def _fixes(ctx: _Context, causes: list[CauseVerdict]) -> list[Fix]:
    from ..report.format import explaining_cause, is_rerun, short_title

    fixes = []
    kind = ctx.path.split(":", 1)[0]
    loc = ctx.localization
    main = explaining_cause(causes, loc.lead if loc is not None else None)
    # A cause shown on the diverging op's own values: a flag re-run that restores parity proves it, and
    # the fix shown is that cause's (not the generic text of the flag's own cause, e.g. algsimp's x * (1/c)).
    shown = main if main is not None and not is_rerun(main) and main.cause != "unknown" else None
    for verdict in causes:
        if verdict.status == "confirmed" and verdict.proof is not None:
            fixes.append(verdict.proof)
            continue
        if verdict.status != "confirmed" or not verdict.experiment.startswith("re-ran "):
            continue
        spec = verdict.experiment.removeprefix("re-ran ").split(" with ")[0]
        description = verdict.fix or ""
        cause = next((c for c in CAUSES if c.id == verdict.cause), None)
        flags = [f"{k}={v}" for k, v in cause.options] if cause is not None else []
        if shown is not None and shown.cause != verdict.cause and flags:
            if shown.fix and all(f in shown.fix for f in flags):
                description = shown.fix
            else:
                how = (f"serve with XLA_FLAGS={' '.join('--' + f for f in flags)}" if kind == "savedmodel"
                       else f"compile with {', '.join(flags)}")
                description = (f"{how}: with it {ctx.path} matches {ctx.baseline} (it turns off the "
                               f"{short_title(verdict.title)} behind this)")
        fixes.append(Fix("serving flag" if kind == "savedmodel" else "compile option", description, spec,
                         True, verdict.evidence, rerun=verdict.rerun))
    narrow = {"excess-precision", "narrow-rounding-skipped"}
    if any(v.cause in narrow and v.status in ("confirmed", "partly") for v in causes):
        from ..fixes import round_like_declared

        # Outputs from a file cannot be re-run: show the model-side fix on the TF serving path here.
        target = "savedmodel" if kind == "observed" else ctx.path
        if kind == "observed":
            fixes.append(Fix("serving flag", "XLA_FLAGS=--xla_allow_excess_precision=false on the serving system",
                             None, False, f"{ctx.path} cannot be re-run from here: set the flag on the system that "
                             "produced it and compare again"))
        from ..paths.staging import reused

        # One wrapper per model while compile_once() is active: a sweep worker compiles it once.
        fixed = reused("fixed model", (id(ctx.fn),), ctx.fn, lambda: round_like_declared(ctx.fn))
        outs = ctx.run(target, fixed)
        # where the baseline is the side that skipped the rounding, it runs the fixed model too
        theirs = (ctx.run(ctx.baseline, fixed) if any(_widened_side(c, ctx) == "baseline" for c in CAUSES)
                  else ctx.base_out)
        if isinstance(outs, str) or isinstance(theirs, str):
            failed, where = (outs, target) if isinstance(outs, str) else (theirs, ctx.baseline)
            fixes.append(Fix("model change", "jaxparity.fixes.round_like_declared(fn)", None, False,
                             f"the fixed model failed on {where}: {failed}"))
        else:
            if theirs is ctx.base_out:
                rerun, result = measured_rerun(outs, ctx)
            else:
                rerun = ctx.compare(outs, theirs)
                result = next(k for k, v in _OUTCOMES.items() if v == rerun.outcome)
            (n, worst, gap), before = rerun.after, rerun.before
            fixes.append(Fix("model change", "wrap the model with jaxparity.fixes.round_like_declared(fn): it "
                             "inserts lax.reduce_precision where the program declares a bf16/f16 rounding, so "
                             "every compiler keeps it; no flag needed", f"{target} [fixed model]", n == 0,
                             f"{target} on the fixed model " + (
                                 ("equals " + ctx.baseline if theirs is ctx.base_out else
                                  f"equals {ctx.baseline} on the fixed model") if n == 0 else
                             f"still differs from {ctx.baseline} in {n} elements (max {worst} ULP, max abs {gap:.3g}; "
                             f"before: {before[0]}, max {before[1]} ULP, max abs {before[2]:.3g}){result}"),
                             rerun=rerun))
    return [_with_cost(ctx, f) for f in fixes]


def _with_cost(ctx: _Context, fix: Fix) -> Fix:
    """A verified fix with its run-time cost: the fixed path (or fixed model) against the path as it was,
    each warm, timed interleaved (``execution.timing``), where the path can time a call apart from
    compiling it (jit, export). A cost within the timing's own spread is reported as 0."""
    from ..execution.timing import relative_cost

    if not fix.verified or not fix.spec:
        return fix
    spec, _, label = fix.spec.partition(" [")
    fixed_fn = ctx.models.get(label.removesuffix("]"), ctx.fn) if label else ctx.fn
    try:
        after = make_path(spec).warm_call(fixed_fn, ctx.args)
        before = make_path(ctx.path).warm_call(ctx.fn, ctx.args) if after is not None else None
        cost = relative_cost(after, before) if after is not None and before is not None else None
    except Exception:  # the cost is extra: a fix stays verified without it
        return fix
    if cost is None:
        return fix  # not timed here, or a call this short is timing noise, not a cost
    return dataclasses.replace(fix, cost=round(cost.ratio, 3) if cost.measurable else 0.0)
