"""Blame at scale: its time against localization alone, and the length of `explain`'s default output.

For each model, one fresh process localizes jit against eager as `jaxparity explain` does (the flat
program, both paths' per-op values, the local replay, loops opened) and then measures blame on that
localization; both are timed in the same process, side by side, and the ops blame replayed are
counted. Localization is timed whole (both sides' per-op captures, then the local replay and the
loops) and its replay part alone; the ratios are (localization + blame) / localization for each.
Target: localization + blame <= 1.5x localization alone.

Then `jaxparity explain MODEL --paths jit` runs in a fresh process per example and the lines of its
explanation (from "why" to the closing line) are counted, at 80 columns: the default short view.

Usage: python benchmarks/bench_blame.py [--models resnet,scanned] [--no-lines]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from fresh import run_fresh

MODELS = {"resnet": ("resnet_bf16", "make"), "scanned": ("transformer_bf16", "make_scanned")}

BLAME = """
import sys, time, json
sys.path.insert(0, 'examples')
import importlib
import jax
from jaxparity.localize.program import flatten
from jaxparity.localize.values import op_values
from jaxparity.localize.localizer import localize
from jaxparity.localize.loops.descend import open_loops
from jaxparity.localize import blame as b
module, factory = sys.argv[1], sys.argv[2]
fn, args = getattr(importlib.import_module(module), factory)()
flat = jax.tree_util.tree_leaves(args)
program = flatten(fn, args)
t = time.perf_counter()
base = op_values(program, "eager", flat)
path = op_values(program, "jit", flat)
capture_s = time.perf_counter() - t
plain = [x for x in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
t = time.perf_counter()
loc = localize(program, path, base, flat, "eager")
loc = open_loops(program, loc, path, base, case=program, flat_args=flat, plain_outputs=plain)
localize_s = time.perf_counter() - t
calls = []
original = b._Replay._run_raw
def counting(self, op, ins):
    calls.append(1)
    return original(self, op, ins)
b._Replay._run_raw = counting
t = time.perf_counter()
loc = b.blame_localization(program, loc, path, base, flat, plain, base.outputs)
blame_s = time.perf_counter() - t
bl = loc.blame
print(json.dumps({"ops": len(program.ops), "local": len(loc.local), "capture_s": capture_s, "localize_s": localize_s,
                  "blame_s": blame_s, "replayed_ops": len(calls), "carriers": len(bl.carriers) if bl else None,
                  "screened": bl.screened if bl else None, "together": bl.together if bl else None}))
"""


def explain_lines(example: str) -> int:
    env = dict(os.environ, COLUMNS="80")
    out = subprocess.run([sys.executable, "-m", "jaxparity", "explain", f"examples/{example}", "--paths", "jit"],
                         capture_output=True, text=True, env=env).stdout
    why = out[out.index("why "):] if "why " in out else ""
    return len([ln for ln in why.splitlines() if ln.strip()])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--no-lines", action="store_true")
    a = ap.parse_args()
    print("model     ops  local  captures  replay  blame  ratio (whole)  ratio (replay)  replayed ops  screened  "
          "carriers  together")
    for name in a.models.split(","):
        module, factory = MODELS[name]
        r = run_fresh(BLAME, module, factory)
        whole = r["capture_s"] + r["localize_s"]
        print(f"{name:8} {r['ops']:5} {r['local']:6} {r['capture_s']:8.2f}s {r['localize_s']:6.2f}s {r['blame_s']:5.2f}s "
              f"{(whole + r['blame_s']) / whole:12.2f}x {(r['localize_s'] + r['blame_s']) / r['localize_s']:14.2f}x "
              f"{r['replayed_ops']:13} {r['screened']!s:>9} {r['carriers']!s:>9} {r['together']!s:>9}")
    if not a.no_lines:
        print("\nexplain's default output (jit against eager, 80 columns): lines from 'why' to the end")
        for example in ("conv_bf16.py", "mlp_bf16.py", "cnn_bf16.py", "transformer_bf16.py", "resnet_bf16.py"):
            print(f"{example:22} {explain_lines(example)}")


if __name__ == "__main__":
    main()
