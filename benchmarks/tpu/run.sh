#!/bin/bash
# The TPU experiments of issues 38 and 55, in one command on the device machine (it has no network: packages come
# from its own index). Usage there: bash benchmarks/tpu/run.sh [STEP ...]  (default: every step; writes under $OUT)
export PYTHONUNBUFFERED=1 COLUMNS=100
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --only-binary=:all: \
  --index-url file:///opt/pypi/simple --target /tmp/site rich safetensors flatbuffers flax > "$OUT/pip.txt" 2>&1
export PYTHONPATH=$PYTHONPATH:/tmp/site:$PWD/src
python3 -c "import jax, jaxparity, flax; print(jax.__version__, flax.__version__, jax.devices())" 2>&1 | tail -1
t0=$(date +%s)
WANT="$*"
step() {
  local name=$1; shift
  if [ -n "$WANT" ] && [[ " $WANT " != *" $name "* ]]; then return; fi
  local s=$(date +%s); timeout "$@" > "$OUT/$name.txt" 2>&1; echo "$name rc=$? $(( $(date +%s) - s ))s"
}
step arith 120 python3 benchmarks/tpu/arith.py
step attention 150 python3 -m jaxparity explain benchmarks/tpu/cases.py:make_attention --json "$OUT/attention.json"
step tanh 90 python3 -m jaxparity explain benchmarks/tpu/cases.py:make_tanh --paths eager,jit,jit:device=cpu
step like 150 python3 -m jaxparity explain examples/conv_bf16.py --paths eager,jit,jit:device=cpu --json "$OUT/like.json"
step div 150 python3 -m jaxparity explain benchmarks/tpu/cases.py:make_div --paths eager,jit,jit:device=cpu --json "$OUT/div.json"
step flag 60 python3 -m jaxparity compare examples/conv_bf16.py --paths eager,jit:xla_allow_excess_precision=false
step seed 120 python3 -m jaxparity explain examples/conv_bf16.py
step mlp 90 python3 -m jaxparity explain benchmarks/tpu/cases.py:make_mlp
step reverse 120 python3 -m jaxparity explain benchmarks/tpu/cases.py:make_mlp --baseline jit:device=cpu --paths jit:device=cpu,jit,eager
step capture 120 bash -c "for c in attention mlp tanh; do python3 -m jaxparity capture benchmarks/tpu/cases.py:make_\$c --path jit -o $OUT/\$c-tpu.npz; done"
step tanhjson 90 python3 -m jaxparity explain benchmarks/tpu/cases.py:make_tanh --paths eager,jit,jit:device=cpu -v --json "$OUT/tanh.json"
step tputest 300 python3 -m pytest tests/test_tpu.py -q -rs -p no:cacheprovider
step mlpcpu 90 env JAX_PLATFORMS=cpu python3 -m jaxparity explain benchmarks/tpu/cases.py:make_mlp
# Issue 56: the order the TPU adds a float32 sum in, read off its kernel (and the host's, for comparison)
step sumorder 240 python3 benchmarks/sum_orders.py --paths eager,jit,jit:device=cpu --n 6,37,100,256
# Issue 55: TPU programs of our own (a scalar loss, a one-pass LayerNorm, a training step, a ratio's buckets), every
# default path; each verdict with its stage errors, summarised from the JSON.
for c in loss layernorm train_step div; do
  step p55_$c 150 python3 -m jaxparity explain benchmarks/tpu/cases.py:make_$c --json "$OUT/p55_$c.json"
done
if [ -z "$WANT" ] || [[ " $WANT " == *" p55_summary "* ]]; then
  python3 - "$OUT" > "$OUT/p55_summary.txt" 2>&1 <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("p55_*.json")):
    d = json.loads(f.read_text())
    for v in d["verdicts"]:
        print(f.stem, v["kind"], v["paths"], "vs", v["baseline"], "|", v.get("title") or v.get("judgement") or v.get("reason"),
              "| stage errors:", v["stage_errors"], "| carriers:", [(c["op"], c["line"]) for c in v["carriers"][:2]])
PY
fi
for c in conv flax_cnn mlp_large; do
  step $c 180 python3 -m jaxparity explain benchmarks/tpu/cases.py:make_$c --json "$OUT/$c.json"
  step ${c}cpu 180 env JAX_PLATFORMS=cpu python3 -m jaxparity explain benchmarks/tpu/cases.py:make_$c
done
echo "total $(( $(date +%s) - t0 ))s"
