"""Peak memory of `explain` on a 1-billion-parameter bf16 transformer (examples/transformer_1b.py: 20
pre-LN blocks, width 2048, bf16 parameters, one 8-token sequence), jit against eager, in a fresh process:
what it holds to localize the first diverging op (both paths' per-op values, the op replays, the
interpreter's candidate semantics). Target: within 24 GB. The parameters alone are 2 GB in bf16 (8 GB
in float64, which the interpreter never holds at once: values are converted on first use and freed
after their last).

Usage: python benchmarks/bench_memory.py
"""

from __future__ import annotations

from fresh import run_fresh

CODE = """
import json, resource, sys, time
sys.path.insert(0, 'examples')
import jax
import transformer_1b as m
from jaxparity.explain.pipeline import explain_path
from jaxparity.paths import make_path

t = time.perf_counter()
fn, args = m.make()
n = m.parameters(args[0])
built = time.perf_counter() - t
leaves = lambda o: list(jax.tree_util.tree_leaves(o))
t = time.perf_counter()
base = leaves(make_path('eager').run(fn, args))
path = leaves(make_path('jit').run(fn, args))
ran = time.perf_counter() - t
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
t = time.perf_counter()
e = explain_path(fn, args, 'jit', 'eager', path, base)
first = e.localization.first if e.localization is not None else None
print(json.dumps({"parameters": n, "build_s": built, "run_s": ran, "explain_s": time.perf_counter() - t,
                  "peak_before_explain_gb": before,
                  "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "ops": e.localization.ops if e.localization is not None else None,
                  "first": first.where() if first is not None else None,
                  "line": first.op.user_source if first is not None else None,
                  "cause": next((c.title for c in e.causes if c.status in ("confirmed", "partly", "noise")), None)}))
"""


def main() -> None:
    r = run_fresh(CODE)
    print(f"{r['parameters'] / 1e9:.2f}B parameters (bf16); built in {r['build_s']:.1f} s; eager + jit ran in "
          f"{r['run_s']:.1f} s")
    print(f"explain jit against eager: {r['explain_s']:.1f} s over {r['ops']} ops; peak memory of the process "
          f"{r['peak_gb']:.1f} GB ({r['peak_before_explain_gb']:.1f} GB before explaining)")
    print(f"first op that diverges on its own: {r['first']} ({r['line']}); cause: {r['cause']}")


if __name__ == "__main__":
    main()
