"""The fixes of a group of paths, each change said once in the user's terms with the paths its re-runs held on:
a compile option on jit and the same XLA option as a serving flag on savedmodel are one change; a model change
re-run on every path is one change with every path it holds on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...paths.base import parse_spec, parse_xla_flags
from ...verdict import Outcome, Remedy
from ..verdicts import TOWARD

__all__ = ["remedies"]

_ORDER: dict[str, int] = {"parity": 0, "noise": 1, "toward f64": 2, "narrows": 3, "no closer": 4, "no change": 5,
                          "failed": 6}
_WHOLE = {"fixed model": "jaxparity.fixes.round_like_declared(fn)"}  # said by the transform; others in their words


def remedies(found: Sequence[Any], paths: Sequence[str], baseline: str, loc: Any) -> tuple[Remedy, ...]:
    """Every change re-run for the explanations ``found`` of ``paths``, merged by what it changes: holding ones
    first. A change run on one path only says so."""
    from ...report.brief import rerun_words

    merged: dict[tuple, dict[str, Any]] = {}
    for e in _chains(found):
        fixes = list(e.fixes)
        for c in e.causes:  # a cause's own re-run where it is not among the fixes
            if c.proof is not None and all((f.kind, f.spec) != (c.proof.kind, c.proof.spec) for f in fixes):
                fixes.append(c.proof)
        for f in fixes:
            if not f.ran and not f.verified:
                continue  # ruled out before any run: the search's count says it
            on = _path_of(f, paths, e.path)
            key, change, how = _identity(f, on)
            entry = merged.setdefault(key, {"change": change, "kind": f.kind, "how": {}, "outcomes": {}, "fix": f,
                                            "path": on, "at": _line(f, loc), "cost": f.cost})
            entry["how"].setdefault(how, []).append(on)
            outcome = _outcome(f)
            for p in (on, *f.holds_on):
                if p not in entry["outcomes"] or _ORDER[outcome] < _ORDER[entry["outcomes"][p]]:
                    entry["outcomes"][p] = outcome
            if _ORDER[outcome] < _ORDER[_outcome(entry["fix"])]:
                entry.update(fix=f, path=on, cost=f.cost)
    out = []
    for entry in merged.values():
        outcomes: dict[str, Outcome] = entry["outcomes"]
        best = min(outcomes.values(), key=_ORDER.__getitem__)
        held = tuple(p for p in paths if outcomes.get(p) == best) + tuple(
            p for p in outcomes if outcomes[p] == best and p not in paths)
        elsewhere = tuple((p, o) for p, o in outcomes.items() if o != best)
        how = "; ".join(f"{h} ({', '.join(dict.fromkeys(ps))})" if len(entry["how"]) > 1 else h
                        for h, ps in entry["how"].items() if h)
        out.append(Remedy(change=entry["change"], kind=entry["kind"], outcome=best, on=held,
                          words=rerun_words(entry["fix"], entry["path"], baseline), at=entry["at"],
                          cost=entry["cost"], elsewhere=elsewhere, how=how))
    return tuple(sorted(out, key=lambda r: (_ORDER[r.outcome], -len(r.on))))


def _chains(found: Sequence[Any]) -> list[Any]:
    """Each explanation, then what remains after its closest partial fix, down the chain, where that fix ran on the
    path (its fixes then hold that change and the next together: the combination that restores parity)."""
    out = []
    for e in found:
        while e is not None:
            out.append(e)
            e = e.remainder if e.remainder is not None and e.remainder.baseline == e.baseline else None
    return out


def _outcome(f: Any) -> Outcome:
    if f.verified:
        evidence = f.evidence or ""
        return "toward f64" if TOWARD in evidence else "noise" if "rounding noise" in evidence else "parity"
    r = f.rerun
    if r is not None:
        return r.outcome
    return "failed" if f.ran and "failed" in (f.evidence or "") else "no closer"


def _path_of(f: Any, paths: Sequence[str], default: str) -> str:
    """The compared path a fix's re-run ran on: ``jit`` for "jit:xla_...=false" and "jit [fixed model]"."""
    spec = (f.spec or "").split(" [", 1)[0]
    if not spec:
        return default
    best = max((p for p in paths if spec == p or spec.startswith((p + ":", p + ","))), key=len, default=None)
    if best is not None:
        return best
    return spec if ":" not in spec else spec.split(":", 1)[0]


def _identity(f: Any, on: str) -> tuple[tuple, str, str]:
    """(what it changes, the change in words, how it is applied on that path)."""
    spec = f.spec or ""
    if f.kind in ("compile option", "serving flag") and spec:
        _, mine = parse_spec(spec)
        _, theirs = parse_spec(on) if ":" in on else ("", {})
        options = {k: v for k, v in mine.items() if theirs.get(k) != v}
        if "XLA_FLAGS" in options:
            options = {**{k: v for k, v in options.items() if k != "XLA_FLAGS"}, **parse_xla_flags(options["XLA_FLAGS"])}
        change = ", ".join(f"{k}={v}" for k, v in sorted(options.items()))
        if f.kind == "serving flag":
            how = "XLA_FLAGS=" + " ".join(f"--{k}={v}" for k, v in sorted(options.items())) + " where it is served"
        else:  # JAX's own settings are set around the call (a context where JAX has one); XLA's are compile options
            said = [f"with jax.default_matmul_precision({_py(v)}):" if k == "jax_default_matmul_precision" else
                    f"jax.config.update('{k}', {_py(v)})" for k, v in sorted(options.items()) if k.startswith("jax_")]
            xla = {k: v for k, v in sorted(options.items()) if not k.startswith("jax_")}
            if xla:
                said.append("jax.jit(fn, compiler_options={" + ", ".join(f"'{k}': {_py(v)}" for k, v in xla.items())
                            + "})")
            how = "; ".join(said)
        return ("xla", change), change, how
    if f.kind == "model change" and " [" in spec:
        label = spec.split(" [", 1)[1].removesuffix("]")
        change = _WHOLE.get(label, f.description)
        return ("model", label), change, ""
    return (f.kind, f.description), f.description, ""

def _py(v: str) -> str:
    """An option's value as Python writes it: True/False, a number, else a quoted string."""
    if v.lower() in ("true", "false"):
        return v.capitalize()
    try:
        float(v)
        return v
    except ValueError:
        return repr(v)


def _line(f: Any, loc: Any) -> str | None:
    """The user's line a searched change rewrites (its recipe's first op), where it rewrites one."""
    ops = (f.recipe or {}).get("ops") if isinstance(f.recipe, dict) else None
    if not ops or loc is None:
        return None
    op = next((o for o in loc.program if o.index == ops[0]), None)
    return None if op is None else op.user_source or op.source
