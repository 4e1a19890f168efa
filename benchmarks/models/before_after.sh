#!/usr/bin/env bash
# Cold explain of one real model on all 8 paths, at commit REV (a worktree of its own) and then at this checkout,
# one after the other, a fresh cache each: MODEL BEFORE_SECONDS / AFTER_SECONDS.
#   bash benchmarks/models/before_after.sh REV MODEL     (MODEL: a file of benchmarks/models without .py)
set -uo pipefail
cd "$(dirname "$0")/../.."
rev=$1 m=$2
here=$(pwd) before=$(mktemp -d)
git worktree add -q --detach "$before/tree" "$rev" || exit 2
trap 'git worktree remove --force "$before/tree"; rm -rf "$before"' EXIT
export KERAS_BACKEND=jax EQX_ON_ERROR=nan
for side in "$before/tree" "$here"; do
  export JAXPARITY_CACHE=$(mktemp -d)
  t0=$(date +%s.%N)
  (cd "$side" && PYTHONPATH="$side/src" jaxparity explain "benchmarks/models/$m.py" \
     --paths eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree > "$JAXPARITY_CACHE.log" 2>&1)
  printf '%s %s %.1f s\n' "$m" "$([ "$side" = "$here" ] && echo after || echo "before ($rev)")" \
    "$(echo "$(date +%s.%N) - $t0" | bc)"
  rm -rf "$JAXPARITY_CACHE"
done
