"""Every math function of one input (``localize.elements.UNARY_MATH``), its inputs pushed across its domain
(normal draws at three scales, magnitudes from 1e-6 to 80 of both signs, the domain's own edges), explained on
eager, jit and every converted runtime: what each diverging path's verdict says (issue 56, item 1).

Counted per differing path: its verdict (divergence or rounding noise), the mechanism's title, whether it is a
catch-all ("another lowering or kernel", "cause unknown", "mechanism not established"), whether the trigger is
the kernel's profile, and the interval. Each program runs in a fresh ``jaxparity explain`` process; the reports
go to --out. These are what the text says: read the profile lines before quoting them.

Usage: python benchmarks/kernel_profiles.py [--paths eager,jit,onnx,tflite,iree] [--only exp,log] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from jaxparity.localize.elements import UNARY_MATH  # noqa: E402

# The domain of each function where it is not the whole line: inputs are mapped into it.
_DOMAIN = {"log": "positive", "rsqrt": "positive", "sqrt": "positive", "lgamma": "positive", "digamma": "positive",
           "log1p": "above -1", "acosh": "above 1", "asin": "unit", "acos": "unit", "atanh": "unit",
           "erf_inv": "unit"}
_MAP = {"positive": "np.abs(x) + np.float32(1e-30)", "above -1": "np.abs(x) - np.float32(0.999)",
        "above 1": "np.abs(x) + np.float32(1)", "unit": "np.tanh(x / 4)", None: "x"}
_CATCH_ALL = ("another lowering or kernel", "cause unknown", "mechanism not established", "unknown")

_CASE = '''import numpy as np
from jax import lax


def f(x):
    return lax.{name}(x) + 0.0


def make():
    r = np.random.default_rng(0)
    mags = np.geomspace(1e-6, 80, 64)
    x = np.concatenate([r.normal(0, 1, 64), r.normal(0, 30, 64), mags, -mags]).astype(np.float32)
    return f, ({domain}.astype(np.float32),)
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", default="eager,jit,onnx,tflite,iree")
    parser.add_argument("--only", default=None, help="comma-separated functions (default: every one)")
    parser.add_argument("--out", default=None, help="where the cases, reports and JSON go (default: a temp dir)")
    args = parser.parse_args()
    names = sorted(UNARY_MATH) if args.only is None else args.only.split(",")
    out = Path(args.out or tempfile.mkdtemp(prefix="kernel-profiles-"))
    out.mkdir(parents=True, exist_ok=True)
    rows, start = [], time.time()
    for name in names:
        case = out / f"{name}.py"
        case.write_text(_CASE.format(name=name, domain=_MAP[_DOMAIN.get(name)]))
        report = out / f"{name}.json"
        env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(ROOT / "src"))
        done = subprocess.run([sys.executable, "-m", "jaxparity", "explain", str(case), "--paths", args.paths,
                               "--json", str(report)], capture_output=True, text=True, env=env, timeout=900)
        (out / f"{name}.txt").write_text(done.stdout + done.stderr)
        if not report.exists():
            rows.append((name, "-", "error", done.stderr.strip().splitlines()[-1:] or ["?"], "", ""))
            continue
        for v in json.loads(report.read_text())["verdicts"]:
            if v["kind"] not in ("divergence", "noise"):
                continue
            title = v.get("title") or ("rounding noise" if v["kind"] == "noise" else "mechanism not established")
            trigger = v.get("trigger") or ""
            profiled = "its profile over the domain" in trigger
            rows.append((name, ",".join(v["paths"]), v["kind"], title, "profile" if profiled else
                         ("elements" if trigger else ""), trigger.split(" where ", 1)[-1].split(" (its profile")[0]
                         if profiled else ""))
    print("| function | paths | verdict | mechanism | trigger | where the kernel is beyond 4 ULP |")
    print("|---|---|---|---|---|---|")
    for name, paths, kind, title, trig, where in rows:
        print(f"| {name} | {paths} | {kind} | {title} | {trig} | {where} |")
    diverging = [r for r in rows if r[2] == "divergence"]
    catch = [r for r in diverging if any(c in str(r[3]) for c in _CATCH_ALL)]
    print(f"\n{len(names)} functions, {len(rows)} differing path groups: {len(diverging)} divergences "
          f"({sum(r[4] == 'profile' for r in diverging)} with the kernel's profile as the trigger, {len(catch)} "
          f"with a catch-all mechanism), {sum(r[2] == 'noise' for r in rows)} rounding noise; "
          f"{time.time() - start:.0f} s; reports in {out}")


if __name__ == "__main__":
    main()
