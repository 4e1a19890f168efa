"""A path of another environment than the baseline's, explained from both sides' per-op values: each
captured by its own environment's worker from its own JAX's trace, the ops aligned by provenance
(``localize.align``). The first op whose inputs agree bit for bit and whose output does not is where the
two versions compute otherwise; naming the mechanism, and testing a fix, needs a baseline in the path's
own environment (whose worker replays each op), which the explanation says how to ask for.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..localize.align import CapturedOp, first_departure
from ..paths import DEFAULT_BASELINE, spec_env, with_env
from .explanation import PathExplanation
from .verdicts import CauseVerdict

__all__ = ["explain_across"]


def explain_across(spec: str, baseline: str, path_ops: Sequence[CapturedOp] | str,
                   base_ops: Sequence[CapturedOp] | str, mine: str, theirs: str) -> PathExplanation:
    """``spec`` against ``baseline`` from each side's captured ops (or the reason capturing failed); ``mine``
    and ``theirs`` say where each ran ("environment old (jax 0.4.38)")."""
    env = spec_env(spec)
    own = with_env(DEFAULT_BASELINE, env) if env else DEFAULT_BASELINE
    mechanism = (f"to name the mechanism and test its fix, explain {spec} against a baseline of its own environment "
                 f"(--baseline {own}), whose worker replays each op")
    if isinstance(path_ops, str) or isinstance(base_ops, str):
        failed = path_ops if isinstance(path_ops, str) else base_ops
        return PathExplanation(spec, baseline, f"{spec} is not explained op by op: {failed}; its comparison above "
                               "stands", None, None, None, (), ())
    ran = f"{spec} ran in {mine}; {baseline} in {theirs}"
    d = first_departure(path_ops, base_ops)
    if d is None:
        return PathExplanation(spec, baseline, f"every aligned op of {spec} gives {baseline}'s values bit for bit; "
                               "the outputs differ where ops have no partner in the other trace", None, None, None,
                               (), (), (ran,))
    aligned = (f"ops aligned by primitive, source line and types across the two environments' own traces: "
               f"{d.aligned} of {d.path_ops} ({spec}) and {d.base_ops} ({baseline})")
    where = f"#{d.op.index} {d.op.primitive}" + (f" ({d.op.user_source})" if d.op.user_source else "")
    example = f"; e.g. element {d.example[0]}: {spec} {d.example[1]}, {baseline} {d.example[2]}" if d.example else ""
    if d.local:
        summary = (f"{where} is where the two environments part: its inputs agree bit for bit and its output differs "
                   f"in {d.n_differ} of {d.size} elements{example}")
        cause = CauseVerdict("other-lowering", "a different lowering or kernel in another runtime", "confirmed",
                             "aligned per-op values", f"{summary}: it computes otherwise in {mine} than in {theirs}",
                             fix=mechanism)
    else:
        summary = (f"{where} is the first aligned op whose output differs ({d.n_differ} of {d.size} elements"
                   f"{example}); an input of it already differs, through ops with no partner in the other trace")
        cause = CauseVerdict("unknown", "cause unknown", "not run", "aligned per-op values",
                             f"{summary}: the op where {mine} and {theirs} part has no partner in the other trace",
                             fix=mechanism)
    return PathExplanation(spec, baseline, summary, None, None, None, (cause,), (), (aligned, ran))
