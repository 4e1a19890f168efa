"""Baselines: store what every path computed, then check later runs against it.

``snapshot`` writes a directory: ``inputs.npz`` (the inputs, bit-exact), one ``.npz`` per path with
its outputs, and ``manifest.json`` with the case, the paths, package versions, platform, CPU
features and a sha256 per file plus a content hash over all of them. ``check`` verifies the
directory first (a corrupt, truncated or mismatched baseline is a clear error, never a comparison
against garbage), re-runs every path on the stored inputs and reports each path that moved beyond
tolerance, with what changed in the environment since the snapshot. A snapshot never overwrites
an existing baseline unless told to (``overwrite=True``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .arrayio import ArrayFileError, load_arrays, save_arrays
from .comparison import IDEAL, as_declared, compare_case
from .metrics import Tolerance, diff_leaf
from .result import CheckResult, PathMove

__all__ = ["BaselineError", "CheckResult", "PathMove", "check", "snapshot"]

FORMAT = 1
_MANIFEST = "manifest.json"


class BaselineError(Exception):
    """The baseline directory cannot be written or trusted; the message says which file and why."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _content_hash(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()


def _safe(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", spec)[:120]


def snapshot(case: str, out: str | Path, *, paths: Sequence[str] | str | None = None, inputs: str | None = None,
             overwrite: bool = False, **compare: Any) -> dict:
    """Run ``case`` along ``paths`` and store inputs, outputs and environment in ``out``."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise BaselineError(f"{out} already holds a baseline; choose another directory or pass --force")
        shutil.rmtree(out)
    result = compare_case(case, inputs=inputs, paths=paths, keep_inputs=True, **compare)
    runs, arrays = result._source["runs"], result._source["inputs"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "outputs").mkdir()
    save_arrays(out / "inputs.npz", arrays)
    files = {"inputs.npz": _sha256(out / "inputs.npz")}
    stored = {}
    for p in result.paths:
        run = runs.get(p.spec)
        entry: dict[str, Any] = {"status": p.status, "verdict": p.verdict, "message": p.message}
        if run is not None and run.outputs:
            name = f"outputs/{_safe(p.spec)}.npz"
            save_arrays(out / name, dict(run.outputs))
            files[name] = _sha256(out / name)
            entry["file"] = name
        stored[p.spec] = entry
    manifest = {
        "format": FORMAT,
        "case": result.case,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "baseline": result.baseline,
        "inputs": [{"name": a.name, "dtype": a.dtype, "shape": list(a.shape)} for a in result.inputs],
        "paths": stored,
        "environment": result.environment,
        "files": files,
        "content_hash": _content_hash(files),
    }
    (out / _MANIFEST).write_text(json.dumps(manifest, indent=1, default=str))
    return manifest


def load_manifest(directory: str | Path) -> dict:
    """Read and verify a baseline: every file present, unmodified, and the content hash matching."""
    directory = Path(directory)
    path = directory / _MANIFEST
    if not path.is_file():
        raise BaselineError(f"{directory}: not a baseline (no {_MANIFEST}); create one with jaxparity snapshot")
    try:
        manifest = json.loads(path.read_text())
    except ValueError as e:
        raise BaselineError(f"{path}: corrupt ({e})") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or "files" not in manifest:
        raise BaselineError(f"{path}: not a jaxparity baseline of format {FORMAT}")
    for name, digest in manifest["files"].items():
        file = directory / name
        if not file.is_file():
            raise BaselineError(f"{directory}: {name} is missing")
        if _sha256(file) != digest:
            raise BaselineError(f"{directory}: {name} was modified or truncated since the snapshot (sha256 differs)")
    if _content_hash(manifest["files"]) != manifest.get("content_hash"):
        raise BaselineError(f"{path}: content hash does not match its files")
    return manifest


def _changes(then: dict, now: dict) -> list[str]:
    out = []
    for key in ("python", "platform", "machine"):
        if then.get(key) != now.get(key):
            out.append(f"{key}: {then.get(key)} -> {now.get(key)}")
    old, new = then.get("packages", {}), now.get("packages", {})
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            out.append(f"{name}: {old.get(name, 'absent')} -> {new.get(name, 'absent')}")
    if then.get("cpu_features") != now.get("cpu_features"):
        out.append(f"CPU features: {' '.join(then.get('cpu_features', []))} -> {' '.join(now.get('cpu_features', []))}")
    return out


def check(case: str, against: str | Path, *, tolerance: Tolerance | None = None, in_env: str | None = None,
          case_inputs: bool = False, **compare: Any) -> CheckResult:
    """Re-run the baseline's paths on its stored inputs and report every path that moved; say which of
    those inputs the case itself now gives other values (new weights, other data).

    ``in_env``: run them in that --env instead of here (e.g. the JAX version you upgrade to).
    ``case_inputs``: run them on the case's own inputs instead (a move then includes the inputs' change).
    """
    from .paths import make_path, with_env

    against = Path(against)
    manifest = load_manifest(against)
    tolerance = tolerance or Tolerance()
    rename = {spec: with_env(spec, in_env) if in_env else spec for spec in manifest["paths"]}
    try:
        result = compare_case(case, inputs=None if case_inputs else str(against / "inputs.npz"),
                              paths=list(rename.values()), baseline=rename[manifest["baseline"]], **compare)
    except Exception as e:
        if "inputs" in str(e) or "expects" in str(e):
            raise BaselineError(f"{against} does not match {case}: {e}") from e
        raise
    if result.case != manifest["case"]:
        raise BaselineError(f"{against} is a baseline of {manifest['case']}, not of {result.case}")
    runs = result._source["runs"]
    declared = _declared(against, manifest, runs.get(rename[manifest["baseline"]]))
    moves = []
    for spec, entry in manifest["paths"].items():
        run = runs.get(rename[spec])
        ok_now = run is not None and run.status == "ok"
        if "file" not in entry:
            moves.append(PathMove(spec, "now running" if ok_now else "still failing", message=entry.get("message")))
            continue
        if not ok_now:
            moves.append(PathMove(spec, "now failing", message=run.message if run else "not run"))
            continue
        try:
            stored = load_arrays(against / entry["file"])
        except ArrayFileError as e:
            raise BaselineError(str(e)) from e
        now = dict(run.outputs)
        if (make_path(spec).name == IDEAL and spec != manifest["baseline"] and declared is not None
                and sorted(stored) == sorted(now) == sorted(declared)):
            # As compare measures the ideal: correctly rounded to each output's declared dtype, both then and now.
            now, stored = (dict(as_declared(sorted(x.items()), sorted(declared.items()))) for x in (now, stored))
        if sorted(stored) != sorted(now):
            moves.append(PathMove(spec, "moved", message=f"outputs are now {sorted(now)}, were {sorted(stored)}"))
            continue
        reshaped = [f"{n} is {now[n].dtype}{list(now[n].shape)}, was {stored[n].dtype}{list(stored[n].shape)}"
                    for n in stored if now[n].shape != stored[n].shape or now[n].dtype != stored[n].dtype]
        if reshaped:
            moves.append(PathMove(spec, "moved", message="; ".join(reshaped)))
            continue
        diffs = tuple((name, diff_leaf(now[name], stored[name], tolerance)) for name in stored)
        if all(d.bitwise_equal for _, d in diffs):
            status = "same"
        elif all(d.within_tolerance for _, d in diffs):
            status = "within tolerance"
        else:
            status = "moved"
        moves.append(PathMove(spec, status, diffs))
    now = result.environment
    if in_env:  # the paths ran in another environment: compare with its package versions
        from .execution.envs import manifest as env_manifest

        env = next(e for e in compare.get("envs", ()) if e.name == in_env)
        now = now | {"packages": env_manifest(env).get("packages", {})}
    return CheckResult(result.case, str(against), manifest.get("created", "?"), tolerance, tuple(moves),
                       tuple(_changes(manifest.get("environment", {}), now)),
                       _input_notes(result, manifest, case_inputs))


def _declared(against: Path, manifest: dict, base_now: Any) -> dict[str, np.ndarray] | None:
    """The baseline's outputs, for their declared dtypes: as the snapshot stored them, else as it runs now."""
    entry = manifest["paths"].get(manifest["baseline"], {})
    if "file" in entry:
        try:
            return load_arrays(against / entry["file"])
        except ArrayFileError as e:
            raise BaselineError(str(e)) from e
    if base_now is not None and base_now.status == "ok" and base_now.outputs:
        return dict(base_now.outputs)
    return None


def _input_notes(result: Any, manifest: dict, case_inputs: bool) -> tuple[str, ...]:
    """What the check ran on: the snapshot's inputs, and which of them the case now gives other values."""
    if case_inputs:
        return ("ran on the case's own inputs (--case-inputs), not the snapshot's: a move includes any change of "
                "the inputs since the snapshot",)
    info = result._source.get("info")
    replaced = list(getattr(info, "replaced", ()))
    if not replaced:
        return ("ran on the snapshot's inputs, which are the case's own as it is now",)
    n = len(manifest.get("inputs", [])) or len(replaced)
    shown = ", ".join(replaced[:4]) + (f" and {len(replaced) - 4} more" if len(replaced) > 4 else "")
    return (f"the case's own inputs now differ from the snapshot's in {len(replaced)} of {n} ({shown}): these paths "
            "ran on the snapshot's stored inputs, so they show the environment's change, not the case's; re-run "
            "with --case-inputs to check the case as it is now, or take a new snapshot (--force)",)
