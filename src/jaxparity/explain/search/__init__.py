"""Stage 7, search: where no confirmed cause's fix restores parity, search the changes at the op that carries
the difference (``candidates``: other formulations of its math, the op computed wider, guards built from its
trigger), each applied at that equation by rewriting the program, so nothing in the user's file changes to
test it.

Each candidate is first run on the op's own captured inputs (in JAX, here): a formulation must give JAX's
values for the op there, a guard may change them only where the two sides disagree. Those that pass are
re-run, as the whole program, on the path and on the baseline; the first that makes them agree is the fix,
said as the change at the user's line with its measured cost. Every candidate tried is kept with why it
failed (``PathExplanation.searched``), so "nothing verifies" lists what was tried.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..context import Context, first_line
from ..fix import with_cost
from ..mechanism.captured import bound, differing_output, named, op_inputs
from ..mechanism.op_rules import MATH_LIBRARY_ULP
from ..verdicts import CauseVerdict, Fix
from .candidates import FORMULATIONS, Candidate, candidates
from .remap import input_trigger, op_remaps, remaps
from .rerun import as_accurate, recipe, rerun_candidate
from .stable import conditioned, form_lines
from .whole import bound_plainly, whole_calls

__all__ = ["FORMULATIONS", "Candidate", "MAX_RERUNS", "candidates", "judge_on_inputs", "placed", "search_fixes"]

MAX_RERUNS = 4  # candidates re-run as the whole program, per path explained (each a run on both sides)
_CARRIERS = 2  # the ops searched: those that carry the most of the output difference


def search_fixes(ctx: Context, causes: list[CauseVerdict], fixes: list[Fix]) -> tuple[list[Fix], list[Fix]]:
    """(the fix found, if one restores parity; every candidate tried that did not, with why)."""
    if any(f.verified for f in fixes) or ctx.path.has("observed"):
        return [], []
    if causes and all(c.status in ("noise", "refuted", "not run") for c in causes) \
            and any(c.status == "noise" for c in causes):
        return [], []  # rounding noise: nothing to fix
    from ..triage import within_own_noise

    wrong = _one_side_wrong(ctx)
    if not wrong and within_own_noise(ctx.path_out, ctx.base_out, ctx.program, ctx.flat_args, ctx.fn, ctx.args):
        return [], []  # the outputs are as far apart as the model's own rounding: no change is owed
    tried: list[Fix] = []
    for alternative, words in ctx.path.alternatives():
        fix = _other_setting(ctx, alternative, words)
        if fix.verified:
            return [with_cost(ctx, fix)], tried
        tried.append(fix)
    reruns = 0
    # Every change below binds the program primitive by primitive. Nothing changed but that comes first: where it
    # alone agrees, the converter's lowering of a whole call was the difference, not any op's math.
    if ctx.path.converter:
        found = whole_calls(ctx, tried)  # the calls its artifact says it replaced, named
        if found is not None:
            return [with_cost(ctx, found)], tried
        reruns += 1
        fix = bound_plainly(ctx)
        if fix.verified:
            return [with_cost(ctx, fix)], tried
        tried.append(fix)
    found_fix, tried = _search_at_ops(ctx, tried, reruns)
    return [with_cost(ctx, found_fix)] if found_fix is not None else [], tried


def _search_at_ops(ctx: Context, tried: list[Fix], reruns: int) -> tuple[Fix | None, list[Fix]]:
    """The stable forms at the carrying lines, then the candidates at the carrying ops, then by primitive and by
    remapping the trigger's inputs: the first that holds, and every one tried."""
    targets = _targets(ctx)
    for line in form_lines(ctx, [t[1] for t in targets]):
        stable = conditioned(ctx, line)  # the stable form of what is written there
        if stable is None:
            continue
        reruns += 1
        if stable.verified:
            return stable, tried
        tried.append(stable)
    for target in targets:
        index, op, ins, position, mine, theirs, trigger = target
        info = op.info
        line = info.user_source or info.source or "the op"
        generated = list(candidates(op, trigger.predicate if trigger is not None else None))
        cands = list(generated)
        if ins is not None and mine is not None:
            try:
                remapped = op_remaps(op, ins, mine, theirs)
            except Exception:  # noqa: BLE001 - the remaps are candidates, never the end of the search
                remapped = []
            k = sum(c.kind == "formulation" for c in cands)
            cands[k:k] = remapped
        for cand in cands:
            label = f"{cand.name} at #{index} rewritten"  # one model per op: two carriers, two re-runs
            why = judge_on_inputs(cand, op, ins, position, mine, theirs) if ins is not None else (
                None if cand.kind == "wider" else "no captured inputs to check it on")
            why = why or _owes_nothing(ctx, cand, index, ins)
            if why is not None:
                tried.append(Fix("model change", f"{cand.code} (at {line})", None, False,
                                 f"#{index} {info.primitive}: {cand.name}: {why}"))
                continue
            if reruns >= MAX_RERUNS:
                tried.append(Fix("model change", f"{cand.code} (at {line})", None, False,
                                 f"#{index} {info.primitive}: {cand.name}: not re-run ({MAX_RERUNS} re-runs "
                                 "tried first)"))
                continue
            reruns += 1
            how = recipe([index], cand, trigger.predicate if trigger is not None else None, generated)
            fix = rerun_candidate(ctx, cand, index, label, line, trigger, how)
            if fix.verified:
                return fix, tried
            tried.append(fix)
    last = _by_primitive(ctx, tried, MAX_RERUNS - reruns) or _input_remaps(ctx, tried)
    return last, tried


def _owes_nothing(ctx: Context, cand: Candidate, index: int, ins: list[np.ndarray] | None) -> str | None:
    """Why re-running ``cand`` at op ``index`` can show nothing new, from what is already known; None where it
    may. A formulation that differs from the op only on special values (``Candidate.only_on``) can align the two
    sides only where both sides' inputs to the op hold one: not where either holds none. Computing the op wider
    was already re-run where a fix computed it in float32 (with others, ``Context.widened``) and came no closer."""
    if cand.only_on is not None:  # it aligns the two sides only where both hold such values at the op
        words, test = cand.only_on
        for side, x in ((ctx.baseline, _baseline_inputs(ctx, ctx.program.ops[index])), (ctx.path, ins)):
            if x is not None and not test(x):
                return f"it differs from the op only on {words}, and {side}'s inputs to it hold none"
    if cand.kind == "wider":
        for ops, label, rerun in ctx.widened:
            if index in ops and rerun.outcome in ("no closer", "no change"):
                others = f" and {len(ops) - 1} other{'s' if len(ops) > 2 else ''}" if len(ops) > 1 else ""
                return (f"not re-run: the re-run with {label} computed this op{others} in float32 and came "
                        f"{rerun.outcome} (the fix above)")
    return None


def _baseline_inputs(ctx: Context, op: Any) -> list[np.ndarray] | None:
    """The op's inputs as the baseline computed them, or None where they were not captured."""
    from ...localize.localizer import _read, arg_values

    if ctx.base_vals is None:
        return None
    args = arg_values(ctx.program, ctx.flat_args)
    try:
        found = [np.asarray(_read(ctx.program, ref, ctx.base_vals.values, args)) for ref in op.inputs]
    except Exception:  # noqa: BLE001 - a value not captured
        return None
    return None if any(x.dtype == object for x in found) else found


def _one_side_wrong(ctx: Context) -> bool:
    """The carrying op shows one side far from the correctly rounded result on its own inputs (a wrong small
    value is small in absolute terms: the outputs' sizes alone would call it noise)."""
    loc = ctx.localization
    ev = loc.lead.elements if loc is not None and loc.lead is not None else None
    if ev is None or ev.path_ulp is None or ev.baseline_ulp is None or ev.flushes:
        return False  # (subnormals flushed: a flush's ULP count is huge and its values tiny)
    return max(ev.path_ulp, ev.baseline_ulp) > MATH_LIBRARY_ULP >= min(ev.path_ulp, ev.baseline_ulp)


_WHOLE = " from its primitives rewritten]"
_CATCH_ALL = ("other-lowering", "unknown")


def placed(causes: list[CauseVerdict], found: list[Fix], ctx: Context) -> list[CauseVerdict]:
    """``causes`` with the catch-all cause (another lowering, unknown) said from what the search found where
    that names the mechanism: a call the converter replaced whole, whose primitives convert right."""
    fix = next((f for f in found if f.verified), None)
    target = next((c for c in causes if c.cause in _CATCH_ALL and c.status == "confirmed"), None)
    if target is None:
        return causes
    converter = ctx.path.converter or "the converter"
    if (fix is None or fix.spec is None or not fix.spec.endswith(_WHOLE)) and ctx.path.converter:
        # a call the converter lowers whole whose primitives it cannot convert (or that the fix did not need): the
        # call's own arguments, with each changed alone, still say what its lowering does otherwise
        from ..mechanism.ablation import ablate_call

        artifact = ctx.artifact()
        for qual in dict.fromkeys(name for name, _ in getattr(artifact, "converted", ()) or ()):
            how = ablate_call(ctx, qual)
            if how:
                said = (f"{converter} converts {qual} whole, into its own lowering of the call, and "
                        f"{how.removeprefix('its lowering ')}")
                return [dataclasses.replace(target, title="a call the converter lowers whole, otherwise",
                                            evidence=said, layer="converter", fix=f"report {converter}'s lowering of "
                                            f"{qual} to its maintainers") if c is target else c for c in causes]
    if fix is None or fix.spec is None:
        return causes
    label = fix.spec.split(" [", 1)[1].removesuffix("]") if " [" in fix.spec else ""
    if fix.spec.endswith(_WHOLE):
        qual = label.removesuffix(_WHOLE.removesuffix("]"))
        at = fix.description.split(" from JAX's", 1)[0].removeprefix(f"compute {qual}")
        from ..mechanism.ablation import ablate_call

        how = ablate_call(ctx, qual)  # what the lowering does otherwise, where one argument changed reproduces it
        said = (f"{converter} converts {qual}{at} whole, into its own lowering of the call, and "
                f"{how.removeprefix('its lowering ') if how else 'that computes it otherwise'}; with the call computed "
                f"from JAX's own primitives, {ctx.path} agrees with {ctx.baseline}")
        return [dataclasses.replace(target, title="a call the converter lowers whole, otherwise", evidence=said,
                                    layer="converter", fix=f"report {converter}'s lowering of {qual} to its "
                                    "maintainers") if c is target else c for c in causes]
    if fix.kind == "model change":
        change = label.removesuffix(" rewritten")
        said = f"{target.evidence}; with {change}, {ctx.path} agrees with {ctx.baseline} (the fix below)"
        return [dataclasses.replace(target, evidence=said) if c is target else c for c in causes]
    return causes


def _by_primitive(ctx: Context, tried: list[Fix], budget: int) -> Fix | None:
    """Where no op could be singled out (the per-op view is not the program's, or changing one op did not
    do): each formulation of a primitive applied at every op of that primitive at once, judged first on the
    baseline's own inputs of each (the same math there), then re-run. The rewritten model is the program
    bound primitive by primitive, so a converter sees no whole call either. Where the per-op view is the
    program's, only primitives with an op that departs on its own inputs are tried."""
    from ...localize.localizer import _read, arg_values

    if ctx.base_vals is None or budget <= 0:
        return None
    args = arg_values(ctx.program, ctx.flat_args)
    present = list(dict.fromkeys(op.info.primitive for op in ctx.program.ops if op.info.primitive in FORMULATIONS))
    if ctx.localization is not None:  # the program's own per-op view: a primitive no op of which departs on its
        # own inputs is computed alike on both sides, and no other formulation of it is owed
        departing = {d.op.primitive for d in ctx.localization.local}
        present = [p for p in present if p in departing]
    for primitive in present:
        ops = [op for op in ctx.program.ops if op.info.primitive == primitive]
        lines = sorted({op.info.user_source or op.info.source or "?" for op in ops})
        for cand in (c for c in candidates(ops[0], None) if c.kind == "formulation"):
            why, special = None, cand.only_on is None
            for op in ops:
                try:
                    ins = [np.asarray(_read(ctx.program, ref, ctx.base_vals.values, args)) for ref in op.inputs]
                except Exception:  # noqa: BLE001 - a value not captured: judged by the re-run alone
                    special = True
                    continue
                why = judge_on_inputs(cand, op, ins, 0, None, None)
                if why is not None:
                    break
                special = special or (cand.only_on is not None and cand.only_on[1](ins))
            if why is None and not special and cand.only_on is not None:
                why = (f"it differs from {primitive} only on {cand.only_on[0]}, and {ctx.baseline}'s inputs to its "
                       f"{len(ops)} ops hold none")
            description = f"{cand.code} (at {', '.join(lines)}: every {primitive}){_flattened(ctx)}"
            if why is not None:
                tried.append(Fix("model change", description, None, False, f"{primitive}: {cand.name}: {why}"))
                continue
            if budget <= 0:
                return None
            budget -= 1
            fix = rerun_candidate(ctx, cand, {op.info.index for op in ops}, f"{cand.name} at every {primitive} rewritten",
                         ", ".join(lines), None, {"ops": sorted(op.info.index for op in ops), "candidate": cand.name,
                                                  "trigger": None})
            fix = dataclasses.replace(fix, description=description)
            if fix.verified:
                return fix
            tried.append(fix)
    return None


def _flattened(ctx: Context) -> str:
    """What a rewrite bound primitive by primitive also changes for a converter that lowers calls whole: said,
    as the user must write those calls out too."""
    artifact = ctx.memo.get("artifact")
    whole = list(dict.fromkeys(name for name, _ in getattr(artifact, "converted", ()) or ()))
    if not whole:
        return ""
    converter = ctx.path.converter or "the converter"
    return (f"; with {', '.join(whole)} computed from JAX's own primitives too ({converter} lowers "
            f"{'it' if len(whole) == 1 else 'them'} whole otherwise): write {'it' if len(whole) == 1 else 'them'} "
            "out in the model")


def _input_remaps(ctx: Context, tried: list[Fix]) -> Fix | None:
    """The program's input that the trigger reads, remapped (``remap``) where JAX's outputs stay the same bit
    for bit: the baseline re-run first, the path only for a remap that keeps them."""
    from ..measure import identical

    try:
        found = input_trigger(ctx.flat_args, ctx.path_out, ctx.base_out)
    except Exception:  # noqa: BLE001 - no trigger over the inputs: nothing to remap
        return None
    if found is None:
        return None
    trigger, i, test = found
    name = _arg_name(ctx, i)
    predicate = trigger.predicate.replace("the input", name)
    where = (f"{ctx.path} departs {'exactly' if trigger.exact else 'mostly'} where {predicate} ({trigger.hits} of the "
             f"{trigger.differing + trigger.agreeing} elements of {name})")
    sizes = sorted({d for a in ctx.flat_args for d in np.shape(a)} | {d for o in ctx.base_out for d in np.shape(o)})
    for what, code, f in remaps(np.asarray(ctx.flat_args[i]), test, sizes, name, predicate):
        label = f"{what} rewritten"
        fixed = _with_input(ctx, i, f)
        description = (f"{code.replace(f'<{predicate}>', predicate)}, first thing in the model: {where}, and with it "
                       f"{ctx.baseline}'s outputs are the same bit for bit")
        base = ctx.run(ctx.baseline, fixed, label)
        if isinstance(base, str) or not identical(base, ctx.base_out):
            why = base if isinstance(base, str) else f"it changes {ctx.baseline}'s outputs (not the same model)"
            tried.append(Fix("model change", description, None, False, f"{what}: {why}", ran=True))
            continue
        mine = ctx.run(ctx.path, fixed, label)
        if isinstance(mine, str):
            tried.append(Fix("model change", description, None, False, f"{what}: failed on {ctx.path}: {mine}",
                             ran=True))
            continue
        rerun = ctx.compare(mine, base)
        if rerun.outcome == "parity":
            return Fix("model change", description, f"{ctx.path} [{label}]", True,
                       f"re-ran {ctx.path} and {ctx.baseline} with {what}: they agree (were {rerun.before[0]} "
                       f"elements apart), and {ctx.baseline}'s outputs are the same bit for bit with it (the model "
                       f"means the same)", rerun=rerun)
        tried.append(Fix("model change", description, None, False,
                         f"{what}: {ctx.path} still differs in {rerun.after[0]} elements (were {rerun.before[0]})",
                         rerun=rerun))
    return None


def _arg_name(ctx: Context, i: int) -> str:
    """The name of the case's flat input ``i`` as the user wrote the function (its parameter), else its path."""
    import inspect

    import jax

    paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(ctx.args)[0]]
    try:
        params = list(inspect.signature(ctx.fn).parameters)
    except (TypeError, ValueError):
        params = []
    p = paths[i] if i < len(paths) else ()
    if len(p) == 1 and hasattr(p[0], "idx") and p[0].idx < len(params):
        return params[p[0].idx]
    return f"args{jax.tree_util.keystr(p)}" if p else f"input {i + 1}"


def _with_input(ctx: Context, i: int, f: Any) -> Any:
    """The case's function with its flat input ``i`` passed through ``f`` first (inside the model)."""
    import jax

    fn = ctx.fn

    def fixed(*args: Any) -> Any:
        leaves, tree = jax.tree_util.tree_flatten(args)
        leaves[i] = f(leaves[i])
        return fn(*jax.tree_util.tree_unflatten(tree, leaves))

    return fixed


Target = tuple[int, Any, "list[np.ndarray] | None", int, Any, Any, Any]


def _targets(ctx: Context) -> list[Target]:
    """The ops to change: those that carry the output difference, with the path's captured inputs and both
    sides' values of the differing output; where the per-op view is not the program's (observing the ops
    perturbs the runtime), the ops of the output's cone, last first, with the baseline's inputs."""
    from ...localize.localizer import _read, arg_values

    loc = ctx.localization
    found: list[Target] = []
    if ctx.path_vals is not None and ctx.base_vals is not None:
        for d in named(loc)[:_CARRIERS]:
            out = differing_output(ctx, d)
            if out is None:
                continue
            op = ctx.program.ops[d.op.index]
            try:
                ins: list[np.ndarray] | None = [np.asarray(x) for x in op_inputs(ctx, d)]
            except Exception:  # noqa: BLE001 - no captured inputs: the candidate is judged by its re-run alone
                ins = None
            position = [v for v in op.outputs if v is not None].index(out[0])
            found.append((d.op.index, op, ins, position, out[1], out[2],
                          d.elements.trigger if d.elements is not None else None))
    if found or loc is None or not loc.cone:
        return found
    args = arg_values(ctx.program, ctx.flat_args)
    for info in reversed(loc.cone):
        op = ctx.program.ops[info.index]
        base = ctx.base_vals.values if ctx.base_vals is not None else {}
        try:
            cone_ins: list[np.ndarray] | None = [np.asarray(_read(ctx.program, ref, base, args)) for ref in op.inputs]
        except Exception:  # noqa: BLE001
            cone_ins = None
        if cone_ins is not None and any(x is None or x.dtype == object for x in cone_ins):
            cone_ins = None
        found.append((info.index, op, cone_ins, 0, None, None, None))
    return found


def judge_on_inputs(cand: Candidate, op: Any, ins: list[np.ndarray], position: int, mine: np.ndarray | None,
                 theirs: np.ndarray | None) -> str | None:
    """Why the candidate cannot be the fix, judged on the op's own captured inputs; None where it may be."""
    import jax
    import jax.numpy as jnp

    from ...metrics import ulp_distance

    with jax.default_device(jax.devices("cpu")[0]):
        try:
            ref = np.asarray(bound(op, [jnp.asarray(x) for x in ins])[position])
            got = np.asarray(cand.instead(op, [jnp.asarray(x) for x in ins])[position])
        except Exception as e:  # noqa: BLE001 - a candidate that does not apply to this op
            return f"does not apply ({first_line(e)})"
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return f"gives {got.dtype}{list(got.shape)} where the op gives {ref.dtype}{list(ref.shape)}"
    exact = ref.dtype.kind in "iub"
    with np.errstate(invalid="ignore"):
        u = ulp_distance(got, ref)
    nan_same = np.isnan(got.astype(np.float64)) & np.isnan(ref.astype(np.float64)) if not exact else \
        np.zeros(ref.shape, bool)
    off = ((u != 0) if exact else ((u < 0) | (u > MATH_LIBRARY_ULP))) & ~nan_same
    if cand.kind == "guard":
        differ = (ulp_distance(np.asarray(mine), np.asarray(theirs)) != 0
                  if mine is not None and theirs is not None and np.shape(mine) == ref.shape else None)
        if differ is not None and (off & ~differ).any():
            return (f"changes the op's result on {int((off & ~differ).sum())} element(s) where the two sides "
                    "agree")
        return None
    if cand.kind == "wider":
        return None  # rounds less: the re-run says whether it is the fix
    if off.any():
        n = int(off.sum())
        return f"not the op's math on its captured inputs ({n} of {ref.size} elements differ from JAX's result)"
    return None


def _other_setting(ctx: Context, alternative: Any, words: str) -> Fix:
    """The unchanged model on another setting of the path's runtime (``Path.alternatives``)."""
    outs = ctx.run(alternative)
    if isinstance(outs, str):
        return Fix("runtime option", words, None, False, f"{alternative}: failed: {outs}", ran=True)
    rerun, _ = ctx.measured(outs)
    (n0, u0, _), (n1, u1, _) = rerun.before, rerun.after
    if rerun.outcome == "parity":
        return Fix("runtime option", words, str(alternative), True,
                   f"{alternative} agrees with {ctx.baseline} (were {n0} elements apart)", rerun=rerun)
    if as_accurate(ctx, rerun, outs, ctx.base_out):  # the same program: the triage judges it as it is
        p0, p1, _, b1 = rerun.ideal or (0.0, 0.0, 0.0, 0.0)
        return Fix("runtime option", words, str(alternative), True,
                   f"{alternative}: {n0} → {n1} elements differ, max {u0} → {u1} ULP, within the model's own "
                   f"rounding noise of {b1:.3g} ({ctx.baseline}'s error against the f64 ideal; {ctx.path}'s "
                   f"{p0:.3g} → {p1:.3g})", rerun=rerun)
    return Fix("runtime option", words, None, False,
               f"{alternative}: still differs from {ctx.baseline} in {n1} elements, max {u1} ULP (were {n0}, max "
               f"{u0} ULP)", rerun=rerun)
