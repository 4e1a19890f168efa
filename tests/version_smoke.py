"""Run inside another environment (its own JAX, flax, numpy, Python) by ``test_versions.py``: the smoke
suite of issue 21 through jaxparity's public entry points, printed as one JSON object on the last line.

    python tests/version_smoke.py OUTDIR

Each step records what the tool said (exit status, cause ids, the op it named); the test asserts on it
in the project's own environment, beside the same steps run there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> int:
    return subprocess.run([sys.executable, "-m", "jaxparity", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=900).returncode


def explained(report: Path) -> dict:
    """Per path: the confirmed causes, whether a fix was verified, and the lead op (index, line)."""
    data = json.loads(report.read_text())
    out = {}
    for e in data["explanations"]:
        loc = e.get("localization") or {}
        lead = (loc.get("local") or [None])[0]
        out[e["path"]] = {
            "confirmed": [c["cause"] for c in e["causes"] if c["status"] == "confirmed"],
            "verified": any((c.get("proof") or {}).get("verified") for c in e["causes"]),
            "op": None if lead is None else [lead["op"]["index"], lead["op"]["primitive"], lead["op"]["user_source"]],
        }
    return out


def main(outdir: str) -> dict:
    import jax

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    got: dict = {"jax": jax.__version__, "python": sys.version.split()[0]}

    def step(name, fn):
        try:
            got[name] = fn()
        except Exception:
            got[name] = {"error": traceback.format_exc(limit=4)}

    def seed_compare():
        rc = cli("compare", "examples/conv_bf16.py", "--paths", "eager,jit,export,declared,f64",
                 "--json", str(out / "compare.json"))
        data = json.loads((out / "compare.json").read_text())
        return {"rc": rc, "paths": {p["spec"]: [p["status"], p["verdict"]] for p in data["paths"]}}

    def seed_explain():
        rc = cli("explain", "examples/conv_bf16.py", "--paths", "eager,jit,export", "--json", str(out / "explain.json"))
        return {"rc": rc, "paths": explained(out / "explain.json")}

    def scan_explain():
        rc = cli("explain", "tests/cases/loops.py:make_scan_fma", "--paths", "eager,jit",
                 "--json", str(out / "scan.json"))
        return {"rc": rc, "paths": explained(out / "scan.json")}

    def cond_explain():  # a branch inside a loop
        rc = cli("explain", "tests/cases/loops.py:make_cond_in_scan", "--paths", "eager,jit",
                 "--json", str(out / "cond.json"))
        return {"rc": rc, "paths": explained(out / "cond.json")}

    def sweep():
        spec = out / "sweep.toml"
        cases = json.dumps([str(ROOT / "examples" / "conv_bf16.py"), str(ROOT / "examples" / "mlp_bf16.py")])
        spec.write_text(f'name = "smoke"\ncases = {cases}\npaths = ["jit"]\nbaseline = "eager"\nsamples = 2\n'
                        'explain = true\n')
        rc = cli("sweep", str(spec), "--store", str(out / "smoke.sweep"), "--jobs", "1", "-q",
                 "--json", str(out / "sweep.json"))
        data = json.loads((out / "sweep.json").read_text())
        return {"rc": rc, "cells": data["cells"], "failed": data["failed"],
                "causes": {f"{r['case']} {r['path']}": r["causes"] for r in data["rows"]}}

    def reduce():
        rc = cli("reduce", "examples/conv_bf16.py", "--paths", "eager,jit", "-o", str(out / "repro.py"))
        repro = subprocess.run([sys.executable, str(out / "repro.py")], capture_output=True, text=True, timeout=600)
        return {"rc": rc, "repro_rc": repro.returncode}

    def snapshot_check():
        made = cli("snapshot", "examples/conv_bf16.py", "--paths", "eager,jit,declared", "--out", str(out / "base"))
        return {"snapshot_rc": made, "check_rc": cli("check", "examples/conv_bf16.py", "--against", str(out / "base"))}

    def conformance():
        import dataclasses

        from jaxparity.conformance import load_corpus, run_suite, stratified, totals
        from jaxparity.conformance.classify import TOOL

        try:
            corpus = load_corpus("cpu")
        except ImportError as e:  # a jax wheel without its own test harnesses: said, nothing to judge
            return {"unavailable": str(e)}
        outcomes = run_suite(stratified(corpus)[::40], jobs=1)  # ~22 of the ~870 (group, dtype) pairs
        return {**dataclasses.asdict(totals(outcomes)),
                "tool": [f"{o.fullname}: {o.detail}" for o in outcomes if o.declared == TOOL],
                "false_equal_in": [o.fullname for o in outcomes if o.false_equal]}

    def install():
        """What `pip install jaxparity` would install or change in this stack (pip's own dry-run report)."""
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report",
                               str(out / "install.json"), str(ROOT)], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            return {"error": proc.stderr[-2000:]}
        report = json.loads((out / "install.json").read_text())
        return sorted(f"{i['metadata']['name']}=={i['metadata']['version']}" for i in report["install"])

    for name, fn in [("install", install), ("seed_compare", seed_compare), ("seed_explain", seed_explain),
                     ("scan_explain", scan_explain), ("cond_explain", cond_explain), ("sweep", sweep),
                     ("reduce", reduce), ("snapshot_check", snapshot_check), ("conformance", conformance)]:
        step(name, fn)
    return got


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    print(json.dumps(main(sys.argv[1])))
