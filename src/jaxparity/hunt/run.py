"""``hunt_case``: load a case, state its domain, search it (on this machine, or as islands on the sweep's
executors), and report the worst input of each kind."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..metrics import Tolerance
from .result import Finding, HuntResult
from .search import Inputs

__all__ = ["Hunt", "hunt_case"]

HuntProgress = Callable[[str, Any], None]  # ("search", SearchState) | ("explain", Finding) | ("ready", info)


@dataclasses.dataclass(frozen=True)
class Hunt(HuntResult):
    """A ``HuntResult`` as ``hunt_case`` returns it, with its renderings: ``print`` gives the terminal report, a
    notebook the HTML one (the data itself renders nothing)."""

    def __str__(self) -> str:
        from .report import render_text

        return render_text(self)

    def _repr_html_(self) -> str:
        from .report import render_html

        return render_html(self)


def hunt_case(
    case: str,
    *,
    paths: Sequence[str] | str,
    baseline: str | None = None,
    budget: int = 256,
    seconds: float | None = None,
    domain: Sequence[str] = (),
    seed: int = 0,
    tolerance: Tolerance | None = None,
    timeout: float | None = None,
    out_dir: str | None = None,
    explain: int = 2,
    batch: int = 24,
    jobs: int = 1,
    executor: str = "local",
    address: str | None = None,
    progress: HuntProgress | None = None,
) -> Hunt:
    """Search the domain of ``case`` (``FILE.py[:FACTORY]``) for the inputs on which ``paths`` (BASELINE,PATH)
    disagree most, within ``budget`` evaluations (each input run on both paths) or ``seconds``.

    ``domain``: ``--domain`` items (``hunt.domain``); none: derived from the example. The worst input of
    each kind of divergence is written to ``out_dir`` as an ``--inputs`` file and, for the ``explain``
    worst, explained as ``jaxparity explain --inputs`` would. ``jobs`` > 1 or ``executor="ray"``: the budget
    is split over that many islands, each a search of its own seed ((seed, island)), run by the sweep's
    executors (a local process pool, or a Ray cluster at ``address``) and merged. Raises ``CaseError`` where
    the case cannot load or its function fails on its own inputs, ``DomainError`` for a domain that cannot
    be used, ``PathOptionError``/``ValueError`` for paths that cannot be hunted with.
    """
    from ..comparison import plan_paths
    from ..paths import spec_env

    specs = _two_paths(paths, baseline)
    plan_paths(specs, specs[0])  # unknown paths and options: a usage error before anything runs
    if any(spec_env(s) for s in specs):
        raise ValueError("hunt runs both paths in this environment (no NAME@ENV paths)")
    tolerance = tolerance or Tolerance()
    start = time.perf_counter()
    if jobs > 1 or executor != "local":
        from .islands import run_islands

        result, inputs = run_islands(case, specs, budget, seconds, domain, seed, tolerance, timeout, batch,
                                     jobs, executor, address, progress)
    else:
        from .search import search_case

        result, inputs = search_case(case, specs, budget, seconds, domain, seed, tolerance, timeout, batch, progress)
    findings = list(result.findings)
    if out_dir is not None and findings:
        findings = _save(findings, inputs, out_dir)
        findings = _explain(findings, case, specs, tolerance, timeout, explain, progress)
    done = dataclasses.replace(result, findings=tuple(findings), seconds=time.perf_counter() - start)
    return Hunt(**{f.name: getattr(done, f.name) for f in dataclasses.fields(done)})


def _two_paths(paths: Sequence[str] | str, baseline: str | None) -> list[str]:
    from ..comparison import _split_paths

    specs = _split_paths(paths) if isinstance(paths, str) else list(paths)
    if baseline is not None and baseline not in specs:
        specs = [baseline, *specs]
    elif baseline is not None:
        specs = [baseline] + [s for s in specs if s != baseline]
    if len(specs) != 2:
        raise ValueError(f"hunt compares two paths, BASELINE,PATH (got {', '.join(specs) or 'none'}): for example "
                         "--paths eager,jit or --paths eager,tflite")
    return specs


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _save(findings: list[Finding], inputs: Inputs, out_dir: str) -> list[Finding]:
    """Each finding's input as an ``--inputs`` file (the varied leaves; the rest are the case's own)."""
    from ..arrayio import save_arrays

    os.makedirs(out_dir, exist_ok=True)
    out = []
    for i, f in enumerate(findings, 1):
        path = os.path.join(out_dir, f"{i}-{_slug(f.kind)}-{_slug(f.output) or 'outputs'}.safetensors")
        save_arrays(path, inputs[(f.island, f.evaluation)])
        out.append(dataclasses.replace(f, inputs_file=path))
    return out


def _explain(findings: list[Finding], case: str, specs: list[str], tolerance: Tolerance, timeout: float | None,
             count: int, progress: HuntProgress | None) -> list[Finding]:
    """The ``count`` worst findings explained as ``jaxparity explain --inputs FILE`` would."""
    from ..comparison import compare_case

    out = []
    for i, f in enumerate(findings):
        if i >= count or f.kind in ("none", "fails on one side") or f.inputs_file is None:
            out.append(f)
            continue
        if progress:
            progress("explain", f)
        try:
            r = compare_case(case, inputs=f.inputs_file, paths=specs, baseline=specs[0], tolerance=tolerance,
                             timeout=timeout, explain=True)
        except Exception as e:  # noqa: BLE001 - the finding stands without its explanation
            out.append(dataclasses.replace(f, explanation=f"could not be explained: {type(e).__name__}: {e}"))
            continue
        if not r.explanations:
            out.append(dataclasses.replace(f, explanation="explain found nothing to explain on this input (the "
                                           "paths agree within the tolerance when run apart)"))
            continue
        out.append(dataclasses.replace(f, **_said(r.explanations[0], r)))
    return out


def _said(e: Any, result: Any) -> dict[str, Any]:
    """A finding's explanation in the explain command's own words (``report.brief``): where (the divergence
    that carries the difference, or why no op can be named), the cause (its title and status; the whole
    sentence where none is confirmed: which experiment could not run), the fix its re-run verified."""
    from ..report.brief import brief
    from ..report.format import explaining_cause

    lines: dict[str, str] = {}
    for label, text in brief(e, result.path(e.path)):
        lines.setdefault(label, text)
    where = lines.get("where")
    cause = lines.get("cause")
    loc = e.localization
    unseen = loc is not None and loc.perturbed and bool(loc.local)  # as brief: no op of a perturbed capture
    lead = loc.lead if loc is not None and not unseen else None
    main = explaining_cause(e.causes, lead)
    if main is not None and main.cause != "unknown" and cause is not None:
        cause = cause.split(": ", 1)[0]  # the title and status; the evidence is in the explanation
        at = re.search(r"#\d+ \w+ \([^)]*\)", f"{main.experiment} {main.evidence}")
        if lead is not None and at is not None and f"#{lead.op.index} {lead.op.primitive} " not in at[0] + " ":
            cause += f", shown at {at[0]}"  # not at the op that carries the most: said where
    fix = next((x for x in e.fixes if x.verified), None)
    return {"explanation": e.summary, "lead": where, "cause": cause,
            "fix": None if fix is None else f"{fix.kind} {fix.spec or fix.description}"}

