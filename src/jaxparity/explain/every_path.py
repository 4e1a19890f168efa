"""After the stages, across paths: a model change verified on one path and the baseline is re-run on every
other path of the comparison. It is kept where it holds there too (each path then agrees with the baseline's
run of the changed model, or differs by rounding only); where it moves a path that agreed before away from
the baseline, it is no fix, and said so. A path that differed for another reason and still does is only
named (its own explanation has its cause)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from .measure import distance
from .sentence import summarize

__all__ = ["WHOLE_MODEL_CHANGES", "on_every_path"]


def on_every_path(args: tuple, program: Any, flat_args: Sequence[Any], found: list[Any],
                  models: Sequence[dict[str, Any]], explained: Sequence[str], agreeing: Sequence[str],
                  baseline: str) -> list[Any]:
    """``found`` (one ``PathExplanation`` per ``explained`` path; ``models``: each one's model changes by label)
    with each verified model change of a search re-run on the other paths, its evidence saying where it holds."""
    from ..execution.inprocess import run_in_process
    from ..paths import make_path
    from .noise import within_rounding

    out = list(found)
    runs: dict[str, Any] = {}

    def run(spec: str, label: str, model: Any) -> list[np.ndarray] | str:
        key = f"{spec} [{label}]"
        if key not in runs:
            r = run_in_process(make_path(spec), model, args)
            runs[key] = [a for _, a in r.outputs] if r.status == "ok" and r.outputs else f"{r.status}: {r.message}"
        return runs[key]

    for j, e in enumerate(found):
        for k, fix in enumerate(e.fixes):
            label = _label(fix)
            if label is None or label in WHOLE_MODEL_CHANGES or not fix.verified or fix.kind != "model change":
                continue  # (a transform of the whole model, such as round_like_declared, is verified per path)
            model = models[j].get(label)
            if model is None:
                continue
            others = [s for s in explained if s != e.path] + [s for s in agreeing if s != e.path]
            if not others:
                continue
            base = run(baseline, label, model)
            if isinstance(base, str):
                continue
            holds, away, still, rounding = [], [], [], False
            for spec in others:
                got = run(spec, label, model)
                if isinstance(got, str):
                    still.append(f"{spec} (it failed: {got[:80]})")
                    continue
                n, _ = distance(got, base)
                if n == 0 or within_rounding(program, flat_args, got, base) is not None:
                    holds.append(spec)
                    rounding = rounding or n > 0
                elif spec in agreeing:
                    away.append(f"{spec} ({n} elements)")
                else:
                    still.append(spec)
            said = ""
            if holds:
                said += (f"; re-run on {', '.join(holds)} too: {'it agrees' if len(holds) == 1 else 'they agree'} with "
                         f"{baseline} there" + (" (or differ by rounding noise only)" if rounding else ""))
            if still:
                said += f"; {', '.join(still)} still differ{'s' if len(still) == 1 else ''} (their own explanation says why)"
            if away:
                said += (f"; but it moves {', '.join(away)} away from {baseline}, which agreed before: not a fix for "
                         "the whole comparison")
            fixed = dataclasses.replace(fix, evidence=fix.evidence + said, verified=fix.verified and not away,
                                        holds_on=tuple(holds) if not away else ())
            out[j] = summarize(dataclasses.replace(out[j], fixes=tuple(fixed if i == k else f
                                                                       for i, f in enumerate(out[j].fixes))))
    return out


# Transforms of the whole model (round_like_declared, the conditioning rewrite): verified per path, not here.
WHOLE_MODEL_CHANGES = ("fixed model", "well-conditioned model", "well-conditioned model, every site")


def _label(fix: Any) -> str | None:
    """The model change's label in its spec ("onnx [log1p from log alone rewritten]")."""
    spec = fix.spec or ""
    return spec.split(" [", 1)[1].removesuffix("]") if " [" in spec and spec.endswith("]") else None
