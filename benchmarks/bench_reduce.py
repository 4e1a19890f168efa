"""`jaxparity reduce` on every example and planted case: lines of the script (data, comments and the
docstring excluded), ops and elements kept, and its time against `explain` of the same two paths,
each measured in its own fresh process, side by side in one run. Target for the seed case (the
conv of examples/conv_bf16.py, eager against the jax2tf SavedModel): <= 30 lines, <= 2x explain.

Usage: python benchmarks/bench_reduce.py [--only NAME]
"""

from __future__ import annotations

import argparse

from fresh import run_fresh

CASES = [
    # (case, baseline, path)
    ("examples/conv_bf16.py", "eager", "savedmodel"),
    ("examples/conv_bf16.py", "eager", "jit"),
    ("examples/mlp_bf16.py", "eager", "jit"),
    ("examples/cnn_bf16.py", "eager", "savedmodel"),
    ("examples/transformer_bf16.py", "eager", "jit"),
    ("tests/cases/planted.py:make_softmax_bf16", "eager", "jit"),
    ("tests/cases/planted.py:make_layernorm_bf16", "eager", "jit"),
    ("tests/cases/planted.py:make_fma", "eager", "jit"),
    ("tests/cases/planted.py:make_div_by_constant", "eager", "jit"),
    ("tests/cases/planted.py:make_identity_rewrite", "eager", "jit"),
    ("tests/cases/planted.py:make_nan_fold", "eager", "jit:xla_cpu_enable_fast_math=true"),
    ("tests/cases/runtimes.py:make_log_subnormal", "eager", "tflite"),
    ("tests/cases/runtimes.py:make_log_subnormal", "eager", "onnx"),
    ("tests/cases/runtimes.py:make_nan_to_int", "eager", "tflite"),
    ("tests/cases/runtimes.py:make_floor_tan", "eager", "iree"),
    ("tests/cases/runtimes.py:make_sort_ties", "eager", "iree"),
    ("tests/cases/runtimes.py:make_atan2_miscompile", "eager", "jit"),
    ("tests/cases/runtimes.py:make_max_nan", "eager", "savedmodel"),
    ("tests/cases/runtimes.py:make_round_half", "eager", "onnx"),
    ("tests/cases/loops.py:make_scan_fma", "eager", "jit"),
    ("tests/cases/loops.py:make_nn_scan_bf16", "eager", "jit"),
    ("tests/cases/loops.py:make_while_fma", "eager", "jit"),
]

EXPLAIN = """
import sys, time, json
sys.path.insert(0, 'tests')
from jaxparity.case import load_case
from jaxparity.paths import make_path
from jaxparity.explain.pipeline import explain_path
import jax
case = load_case(sys.argv[1])
base, path = sys.argv[2], sys.argv[3]
t = time.perf_counter()
leaves = lambda o: [x for x in jax.tree_util.tree_leaves(o)]
b = leaves(make_path(base).run(case.fn, case.args)); p = leaves(make_path(path).run(case.fn, case.args))
explain_path(case.fn, case.args, path, base, p, b)
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

REDUCE = """
import sys, time, json
sys.path.insert(0, 'tests')
from jaxparity.case import load_case
from jaxparity.reduce import reduce_case
case = load_case(sys.argv[1])
t = time.perf_counter()
try:
    r = reduce_case(case.fn, case.args, sys.argv[2], sys.argv[3], case_name=sys.argv[1])
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {str(e)[:160]}", "seconds": time.perf_counter() - t}))
else:
    print(json.dumps({"seconds": time.perf_counter() - t, "lines": r.script.code_lines, "ops": list(r.region),
                      "elements": list(r.elements), "reproduces": r.reproduces, "fixed": r.fixed_restores,
                      "where": r.where}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="run the cases whose name contains this")
    args = ap.parse_args()
    print("| case | paths | explain s | reduce s | ratio | lines | ops | elements kept | --fixed |")
    print("|---|---|---:|---:|---:|---:|---|---:|---|")
    for case, base, path in CASES:
        if args.only and args.only not in case:
            continue
        e = run_fresh(EXPLAIN, case, base, path)
        r = run_fresh(REDUCE, case, base, path)
        name = case.replace("tests/cases/", "").replace("examples/", "")
        if "error" in r:
            print(f"| {name} | {base} vs {path} | {e['seconds']:.1f} | {r['seconds']:.1f} | "
                  f"{r['seconds'] / e['seconds']:.2f}x | - | - | - | not reduced: {r['error']} |")
            continue
        fixed = {True: "exits 0", False: "no", None: "no fix to apply"}[r["fixed"]]
        print(f"| {name} | {base} vs {path} | {e['seconds']:.1f} | {r['seconds']:.1f} | "
              f"{r['seconds'] / e['seconds']:.2f}x | {r['lines']} | {', '.join(r['ops'])} | "
              f"{r['elements'][0]} of {r['elements'][1]} | {fixed} |", flush=True)


if __name__ == "__main__":
    main()
