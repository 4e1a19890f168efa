"""The explanation of a diverging path, as a pipeline of stages, each a module of its own:

    triage → localize → blame → evidence → mechanism → fix → search → sentence

``localize`` captures both sides' per-op values and finds where the path departs; ``blame`` says which
departures carry the output difference and whether the values are the program's (reading ``triage``'s
output-level facts); ``evidence`` reads the compiler's and the runtime's own words and the candidate
semantics of the outputs; ``mechanism`` decides each known cause by its rule and names the layer at fault;
``fix`` verifies and costs the fixes; ``search``, where none restores parity, searches the changes at the
carrying op (formulations, a wider dtype, guards) and re-runs each; ``sentence`` writes the summary. This module only wires them: where
the closest fix restores parity only partly, what remains after it goes through the pipeline again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..localize.program import flatten
from ..paths import Path, as_path
from .blame import blame_path
from .context import Context, first_line
from .evidence import gather_evidence
from .explanation import PathExplanation
from .fix import closest_partial, verify_fixes
from .localize import localize_path
from .measure import identical
from .same import explained_as
from .search import placed, search_fixes
from .search.whole import said_bound
from .mechanism import find_mechanism
from .mechanism.artifact.fused import with_kernels
from .sentence import summarize
from .verdicts import CauseVerdict

__all__ = ["explain_or_report", "explain_path", "explain_paths", "share_across", "watched"]

# Who is told of each stage as it starts ((path, stage)) and of each path as it is explained ((path, explanation)):
# the worker passes them on to the command, which shows them while the explanation runs (``watched``).
_WATCHERS: list[Callable[[str, Any], None]] = []


def watched(watcher: Callable[[str, Any], None] | None) -> Any:
    """A context in which ``watcher(path, stage)`` is called as each stage of a path's explanation starts (a
    string: "localize", "blame", ...) and ``watcher(path, explanation)`` as each path is explained."""
    from contextlib import contextmanager

    @contextmanager
    def scope() -> Any:
        if watcher is not None:
            _WATCHERS.append(watcher)
        try:
            yield
        finally:
            if watcher is not None:
                _WATCHERS.remove(watcher)

    return scope()


def _tell(path: Any, what: Any) -> None:
    for w in list(_WATCHERS):
        try:
            w(str(path), what)
        except Exception:  # noqa: BLE001 - a watcher never stops the explanation
            pass


def explain_path(
    fn: Callable[..., Any],
    args: tuple,
    path: Path | str,
    baseline: Path | str,
    path_out: Sequence[np.ndarray],
    base_out: Sequence[np.ndarray],
    *,
    evidence: bool = True,
    depth: int = 0,
    keep: dict | None = None,
    models: dict[str, Any] | None = None,
    contexts: dict[str, Context] | None = None,
) -> PathExplanation:
    """Explain why ``path`` gave ``path_out`` where ``baseline`` gave ``base_out`` (flat output leaves).
    Where the closest fix restores parity only partly, what remains after it is explained too
    (``remainder``), up to ``fix.MAX_PEEL`` causes deep. ``keep``, when given, receives the program and
    both sides' per-op values of the case (key ``()``) and of every loop body opened (see
    ``localize.loops.frame_key``): what ``jaxparity reduce`` cuts its reproducer from. ``contexts``, when given,
    receives the path's ``Context`` by path: its re-runs and model changes (shared, so later ones too), not its
    per-op values."""
    import jax

    from ..paths.staging import reused, signature

    mine, theirs = as_path(path), as_path(baseline)
    # Made once per function, shapes and configuration while compile_once() is active (a sweep worker
    # explaining input set after input set): the program does not depend on the inputs' values.
    program = reused("flat program", (id(fn), signature(args)), fn, lambda: flatten(fn, args))
    flat_args = jax.tree_util.tree_leaves(args)
    keep = {} if keep is None else keep
    notes: list[str] = []
    stage = (lambda name: _tell(path, name)) if depth == 0 else (lambda name: _tell(path, f"{name} (what remains)"))
    stage("localize")
    view = localize_path(program, flat_args, mine, theirs, path_out, notes, keep)
    stage("blame")
    view = blame_path(view, fn, args, mine, theirs, path_out, base_out, notes)
    stage("evidence")
    seen = gather_evidence(fn, args, mine, path_out, notes, compiler=evidence)
    # Causes read the per-op view only where it is the program's (or reproduces its outputs); the runtime's
    # own artifact and whole-program re-runs still decide where it is not.
    dtypes = {str(a.dtype) for a in program.avals.values() if hasattr(a, "dtype")}
    ctx = Context(fn, tuple(args), mine, theirs, list(path_out), list(base_out), mine.device(), program, dtypes,
                  None if view.unsound else view.localization, seen.fingerprint, {}, view.base_vals, flat_args,
                  path_vals=None if view.unsound else view.path_vals, notes=list(notes), memo=view.memo,
                  instrumented=(view.localization, view.path_vals) if view.unsound and view.localization is not None
                  and view.path_vals is not None else None)
    if models is not None:
        ctx.models = models  # the caller sees every model change tried (to re-run them on other paths)
    if contexts is not None:  # without the per-op values (held by the caller till every path is explained)
        contexts[str(path)] = dataclasses.replace(ctx, base_vals=None, path_vals=None, memo={}, ahead={},
                                                  instrumented=None)
    stage("mechanism")
    causes = find_mechanism(ctx, keep)
    rounding = _rounding(ctx, causes, view.localization, notes)
    stage("fix")
    fixes = verify_fixes(ctx, causes)
    if rounding is None:
        stage("search")
    try:
        searched_fixes, searched = ([], []) if rounding is not None else search_fixes(ctx, causes, fixes)
    except Exception as e:  # the search adds fixes; it never ends the explanation
        searched_fixes, searched = [], []
        notes.append(f"the fix search stopped: {first_line(e)}")
    fixes += searched_fixes
    fixes = said_bound(ctx, fixes)
    causes = placed(causes, searched_fixes, ctx)
    notes.extend(n for n in ctx.notes if n not in notes)
    partial = closest_partial(ctx, causes, fixes, depth) if rounding is None else None  # noise: nothing to peel
    found = PathExplanation(str(path), str(baseline), "", with_kernels(view.localization, ctx.memo.get("kernels", {})),
                            seen.hlo, seen.fingerprint, tuple(causes), tuple(fixes), tuple(notes), None,
                            searched=tuple(searched), rounding=rounding, dispatches=_dispatches(ctx))
    if partial is None:
        return summarize(found)
    if depth == 0:  # the path's own verdict is decided: told now, what remains after the partial fix follows
        _tell(path, summarize(found))
    return summarize(dataclasses.replace(found, remainder=_remainder(ctx, partial, evidence, depth)))


def _dispatches(ctx: Context) -> tuple[Any, ...]:
    """The per-dispatch findings the mechanism stage captured (``artifact.dispatches.findings``), if any."""
    found = ctx.memo.get("dispatches")
    return tuple(found[0]) if found else ()


def _rounding(ctx: Context, causes: list[CauseVerdict], localization: Any, notes: list[str]) -> Any:
    """``noise.rounding_only`` for this path; it only relaxes the default gate, so where it fails the
    tolerance decides (said in the notes)."""
    from .noise import rounding_only

    try:
        return rounding_only(ctx.program, ctx.flat_args, causes, localization, ctx.path_out, ctx.base_out)
    except Exception as e:
        notes.append(f"whether the difference is only rounding could not be judged ({first_line(e)})")
        return None


def _remainder(ctx: Context, partial: tuple[str, list[np.ndarray], str], evidence: bool,
               depth: int) -> PathExplanation | None:
    """What remains once the closest partial fix is applied (to the path, or to the baseline where it runs
    there: the accelerator's matmul precision), explained the same way; None where that fails."""
    spec, outs, side = partial
    try:
        if side == "baseline":
            return explain_path(ctx.fn, ctx.args, ctx.path, spec, ctx.path_out, outs, evidence=evidence,
                                depth=depth + 1)
        return explain_path(ctx.fn, ctx.args, spec, ctx.baseline, outs, ctx.base_out, evidence=evidence,
                            depth=depth + 1)
    except Exception:
        return None


def explain_paths(fn: Callable[..., Any], args: tuple, paths: Sequence[tuple[str, Sequence[np.ndarray]]],
                  baseline: str, base_out: Sequence[np.ndarray], agreeing: Sequence[str] = (),
                  explained: Sequence[str] | None = None, across: bool = True) -> list[PathExplanation]:
    """Each path of ``paths`` ((spec, flat outputs)) explained against ``baseline``, a model change verified on
    one re-run on every other (``every_path``), then reasoned across (``across``): paths whose outputs are the
    same bit for bit say so, and one whose own experiments found no cause takes the cause another such path
    confirmed ("iree gives jit's values: FMA contraction, as jit"). ``explained``: every path of the comparison
    explained, in its order, where some are explained elsewhere (another worker; then the caller reasons across
    them all, ``across=False``)."""
    import jax

    from ..paths.staging import reused, signature
    from .every_path import on_every_path

    models: list[dict[str, Any]] = [{} for _ in paths]
    contexts: dict[str, Context] = {}
    found: list[PathExplanation] = []
    for i, (spec, outs) in enumerate(paths):
        host = next((k for k in range(i) if paths[k][0] in contexts and _sharable(found[k], paths[k][0], spec)
                     and identical(paths[k][1], outs)), None)
        if host is not None:  # another path's values bit for bit: its explanation, the fixes re-run here
            try:
                _tell(spec, "fix (as " + paths[host][0] + ")")
                found.append(explained_as(found[host], contexts[paths[host][0]], as_path(spec), outs))
                _tell(spec, found[-1])
                continue
            except Exception:  # noqa: BLE001 - explained on its own instead
                pass
        found.append(explain_or_report(fn, args, spec, baseline, outs, base_out, models[i], contexts))
        _tell(spec, found[-1])
    try:  # a model change the search verified, re-run on every other path of the comparison
        _tell("", "every path")
        program = reused("flat program", (id(fn), signature(args)), fn, lambda: flatten(fn, args))
        found = on_every_path(args, program, jax.tree_util.tree_leaves(args), found, models,
                              list(explained) if explained is not None else [spec for spec, _ in paths], agreeing,
                              baseline)
    except Exception:  # noqa: BLE001 - the check adds to the fixes' evidence; the explanations stand without it
        pass
    return share_across(found, [outs for _, outs in paths]) if across else found


def share_across(found: Sequence[PathExplanation], outputs: Sequence[Sequence[np.ndarray]]) -> list[PathExplanation]:
    """``found`` with ``same_values`` set where two paths' outputs are identical, and a path left
    without a cause (unknown, or only the catch-all of another lowering) given the other's."""
    from ..report.format import explaining_cause

    out = list(found)
    for j, e in enumerate(out):
        first = next((i for i in range(j) if identical(outputs[i], outputs[j])), None)
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


def _sharable(host: PathExplanation, host_spec: str, spec: str) -> bool:
    """Whether ``spec`` may take ``host``'s explanation where their outputs are the same bit for bit: XLA
    compiles the whole program on both (jit, export, savedmodel: one program, one compiler pipeline), both run
    in this environment, and the host was explained. Two converters may reach the same values by different
    mechanisms (TFLite drops a -0 that ONNX's atan2 decomposition reads as +0): each is explained on its own."""
    from ..paths import make_path, spec_env

    return (spec_env(spec) is None and spec_env(host_spec) is None and host.localization is not None
            and make_path(spec).has("takes_xla_options") and make_path(host_spec).has("takes_xla_options")
            and not any(n.startswith("explaining failed") for n in host.notes))


def explain_or_report(fn: Callable[..., Any], args: tuple, path: str, baseline: str, path_out: Sequence[np.ndarray],
                      base_out: Sequence[np.ndarray], models: dict[str, Any] | None = None,
                      contexts: dict[str, Context] | None = None) -> PathExplanation:
    """``explain_path``, or, where explaining this path fails, an explanation that says why: one path
    never stops the explanation of the others. ``models`` receives the model changes its re-runs tried;
    ``contexts`` each path's ``Context``."""
    try:
        return explain_path(fn, args, path, baseline, path_out, base_out, models=models, contexts=contexts)
    except Exception as e:
        import traceback

        where = traceback.extract_tb(e.__traceback__)[-1]
        return PathExplanation(path, baseline, f"{path} could not be explained: {type(e).__name__}: {first_line(e)}",
                               None, None, None, (), (),
                               (f"explaining failed in {where.name} ({where.filename.rsplit('/', 1)[-1]}:"
                                f"{where.lineno}); its comparison above stands",))
