"""The words around a reproducer: the script's docstring and a bug-report draft in Markdown."""

from __future__ import annotations

import importlib.metadata
import platform
import textwrap
from typing import Any

import numpy as np

from ..paths import make_path
from ..paths.base import parse_spec
from ..localize.region import Region

__all__ = ["docstring", "markdown", "versions", "cpu_features"]

_JAX = ("jax", "jaxlib")  # every reproducer imports them; each path names what else it runs (``Path.distributions``)
_FEATURES = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bf16", "avx512_fp16", "amx_bf16", "amx_tile", "sse4_2",
             "neon", "asimd", "sve")


def versions(*specs: str) -> str:
    """``jax 0.9.2, jaxlib 0.9.2, tensorflow-cpu 2.21.0``: the packages the two computations use."""
    dists = list(_JAX)
    for spec in specs:
        dists += make_path(spec).distributions
    found = []
    for d in dict.fromkeys(dists):
        try:
            found.append(f"{d} {importlib.metadata.version(d)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def cpu_features() -> str:
    """``x86_64 (avx2 fma avx512f)``: the machine and the CPU features that change float results."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    shown = [f for f in _FEATURES if f in flags]
    return f"{platform.machine()}" + (f" ({' '.join(shown)})" if shown else "")


def _value(x: Any) -> str:
    x = np.asarray(x)
    if x.dtype.kind in "fV" or x.dtype.name == "bfloat16":
        return repr(float(x.astype(np.float64)))
    return repr(x.item())


def _table(expected: list[np.ndarray], observed: list[np.ndarray], baseline: str, path: str,
           limit: int = 6) -> list[str]:
    rows = []
    for k, (e, o) in enumerate(zip(expected, observed)):
        e, o = np.asarray(e).reshape(-1), np.asarray(o).reshape(-1)
        same = (e.view(f"u{e.dtype.itemsize}") == o.view(f"u{o.dtype.itemsize}")) if e.dtype.kind in "fV" else e == o
        bad = np.flatnonzero(~same)
        for i in bad[:limit]:
            rows.append(f"output {k}[{i}]: {baseline} {_value(e[i])}, {path} {_value(o[i])}")
        if bad.size > limit:
            rows.append(f"... and {bad.size - limit} more elements of output {k}")
    return rows


def _cause(expl: Any, d: Any = None) -> tuple[str, str]:
    """The cause the explanation gives for the op the script isolates (``explaining_cause``: the one decided on
    that op's own values first), as explain says it: never another op's cause that comes first in the table."""
    from ..report.format import explaining_cause

    loc = expl.localization
    c = explaining_cause(expl.causes, d if d is not None else (loc.lead if loc is not None else None))
    if c is None:
        return "unknown", ""
    return f"{c.title} ({c.status})", c.evidence


def docstring(expl: Any, d: Any, region: Region, baseline: str, path: str, case: str, when: str, fix: str | None,
              expected: list[np.ndarray], observed: list[np.ndarray], name: str, version: str) -> str:
    line = d.op.user_source or d.op.source or "unknown line"
    ops = ", ".join(region.program.ops[i].info.primitive for i in region.ops)
    n_in = len(region.values)
    kept = (f"{len(region.elements)} of its {region.full_size} output elements (those that differ)"
            if region.elements else "all of its elements")
    cause, evidence = _cause(expl, d)
    out = [f"{d.op.primitive} differs between {baseline} and {path}",
           "",
           f"Reduced by jaxparity {version} on {when} from {case}: {d.where()} ({line}).",
           f"This script runs {len(region.ops)} op{'s' if len(region.ops) > 1 else ''} ({ops}) on {n_in} "
           f"captured input{'s' if n_in > 1 else ''}, {kept}.",
           f"In the case, cause: {cause}" + (f": {evidence}" if evidence else "") + "."]
    if d.elements is not None:
        variant = any(c.cause == "semantic-variant" and c.status == "confirmed" for c in expl.causes)
        out.append("In the case, element evidence: " + d.elements.describe(path, baseline, d.within_noise_bound,
                                                                            d.unrounded_by(path, baseline), variant) + ".")
    out += ["", "This script, when it was written (its own inputs and shapes):",
            *[f"  {r}" for r in _table(expected, observed, baseline, path)],
            f"  with {versions(baseline, path)}; CPU {cpu_features()}", "",
            f"    python {name}           # exit 1 while {path} differs from {baseline}, 0 once they agree"]
    out.append(f"    python {name} --fixed   # {fix}" if fix else
               f"    python {name} --fixed   # exit 2: no fix was verified for this divergence")
    wrapped = []
    for ln in out:
        if ln.startswith("  ") or len(ln) <= 100:
            wrapped.append(ln)
        else:
            wrapped += textwrap.wrap(ln, 100, break_long_words=False, break_on_hyphens=False)
    return "\n".join(wrapped)


def _whole_case(expl: Any, fixed: str) -> Any | None:
    """The explanation's fix (its re-run on the whole case) whose options ``--fixed`` applies."""
    for f in expl.fixes:
        if f.spec and "[" not in f.spec and f.kind != "model change":
            options = [f"{k}={v}" for k, v in parse_spec(f.spec)[1].items()]
            if options and any(o in fixed for o in options):
                return f
    return None


def markdown(red: Any, case: str, name: str) -> str:
    """A bug-report draft: title, what differs, the cause and its evidence, the pass, versions, the script."""
    expl = red.explanation
    cause, evidence = _cause(expl)
    kind = parse_spec(red.path)[0]
    wrong = next((c for c in expl.causes if c.cause == "wrong-code" and c.status == "confirmed"), None)
    first = expl.localization.lead if expl.localization is not None else None
    title = f"{red.region[-1]} gives different results on {kind} than on {parse_spec(red.baseline)[0]}"
    lines = [f"# {title}", "",
             f"A {len(red.region)}-op program ({', '.join(red.region)}) gives different results when run by "
             f"`{red.path}` and by `{red.baseline}` on the same inputs. The script below is standalone (numpy and "
             f"the runtimes' own packages) and exits 1 while the results differ.", "",
             "## What differs", "", *[f"- {r}" for r in _table(red.expected, red.observed, red.baseline, red.path)], "",
             "## Cause", "", f"**{cause}**" + (f": {evidence}" if evidence else "") + "."]
    if first is not None and first.elements is not None:
        variant = any(c.cause == "semantic-variant" and c.status == "confirmed" for c in expl.causes)
        lines += ["", first.elements.describe(red.path, red.baseline, first.within_noise_bound,
                                              first.unrounded_by(red.path, red.baseline), variant) + "."]
    if wrong is not None:
        lines += ["", f"The differing result is wrong code, not rounding: {wrong.evidence}."]
    if red.script.fixed and red.fix_said:  # a change the fix search found at the op
        lines += ["", f"`python {name} --fixed` computes {red.region[-1]} with the change the fix search found "
                  f"({red.script.fixed.removeprefix('model change: ')}) and exits 0: "
                  + (f"every element within {red.fix_ulp} ULP (two roundings of the same math)" if red.fix_ulp else
                     "parity") + f" on this reproducer, re-run in a fresh process; {red.fix_said}."]
    elif red.script.fixed:
        whole = _whole_case(expl, red.script.fixed)
        if whole is None or whole.verified:
            lines += ["", f"`python {name} --fixed` applies the fix ({red.script.fixed}) and exits 0."]
        else:  # it restores the reduced region, not the model: never recommended as the model's fix
            lines += ["", f"`python {name} --fixed` applies {red.script.fixed} and exits 0 on this reproducer; on "
                      f"the whole case the same change does not restore parity ({whole.spec}: "
                      f"{whole.evidence.rsplit('; ', 1)[-1]}), so it is not a fix for the model."]
    for said in red.fixes_left_out:  # written into --fixed and re-run: the reproducer still differs
        lines += ["", f"Not a fix on this reproducer: {said}; `--fixed` leaves it out."]
    lines += ["", "## Versions", "", f"{versions(red.baseline, red.path)}; CPU {cpu_features()}; Python "
              f"{platform.python_version()}", "", "## Reproducer", "",
              f"Found in `{case}` at {red.where}; reduced by jaxparity (`jaxparity reduce`).", "", "```python",
              red.script.text.rstrip(), "```"]
    if red.script.sidecar:
        lines += ["", f"The inputs are in `{name.rsplit('.', 1)[0]}.npz` beside the script (attach it too)."]
    return "\n".join(lines) + "\n"
