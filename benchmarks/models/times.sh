#!/usr/bin/env bash
# Wall time of explain on the four real models, every path, cold (a fresh cache) then warm (the same command
# again: converted models and compiled programs from jaxparity's cache), and of reduce on the pair
# explain leads with. One line per command: MODEL COMMAND SECONDS.
#   bash benchmarks/models/times.sh [MODEL ...]   (default: all four)
set -uo pipefail
cd "$(dirname "$0")/../.."
export KERAS_BACKEND=jax EQX_ON_ERROR=nan
PATHS=eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree
declare -A REDUCE=([keras_mobilenetv3]=eager,jit [hf_gpt2]=eager,iree [haiku_char_lstm]=eager,jit
                   [diffrax_neural_ode]=eager,jit)
time_of() {  # seconds a command took; its output in $LOG
  local t0=$(date +%s.%N); "$@" > "$LOG" 2>&1; local rc=$?
  echo "$(echo "$(date +%s.%N) - $t0" | bc | xargs printf '%.1f') (exit $rc)"
}
for model in "${@:-keras_mobilenetv3 hf_gpt2 haiku_char_lstm diffrax_neural_ode}"; do
  for m in $model; do
    export JAXPARITY_CACHE=$(mktemp -d)
    LOG=$(mktemp)
    file=benchmarks/models/$m.py
    echo "$m explain-cold $(time_of jaxparity explain "$file" --paths $PATHS)"
    echo "$m explain-warm $(time_of jaxparity explain "$file" --paths $PATHS)"
    echo "$m reduce-warm(${REDUCE[$m]}) $(time_of jaxparity reduce "$file" --paths "${REDUCE[$m]}" -o "$(mktemp -d)/repro.py")"
    rm -rf "$JAXPARITY_CACHE"
  done
done
