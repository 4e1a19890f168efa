#!/usr/bin/env bash
# Cold explain of one real model on all 8 paths, at commit REV (a worktree of its own) and then at this checkout,
# one after the other, a fresh cache each: wall time, and the CPU time of the command with its workers.
#   bash benchmarks/models/before_after.sh REV MODEL     (MODEL: a file of benchmarks/models without .py)
set -uo pipefail
cd "$(dirname "$0")/../.."
rev=$1 m=$2
here=$(pwd) before=$(mktemp -d)
git worktree add -q --detach "$before/tree" "$rev" || exit 2
trap 'git worktree remove --force "$before/tree"; rm -rf "$before"' EXIT
export KERAS_BACKEND=jax EQX_ON_ERROR=nan
TIMEFORMAT='%R %U %S'  # bash's time: wall, then the CPU of the command and the workers it waited for
for side in "$before/tree" "$here"; do
  export JAXPARITY_CACHE=$(mktemp -d)
  pkill -f "tf_savedmodel.py --serve"  # no serving process of the side before
  read -r wall user sys < <( { time (cd "$side" && PYTHONPATH="$side/src" jaxparity explain "benchmarks/models/$m.py" \
     --paths eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree > "$JAXPARITY_CACHE.log" 2>&1) ; } 2>&1 )
  printf '%s %s %.1f s (CPU %.1f s)\n' "$m" "$([ "$side" = "$here" ] && echo after || echo "before ($rev)")" \
    "$wall" "$(echo "$user + $sys" | bc)"
  rm -rf "$JAXPARITY_CACHE"
done
