#!/usr/bin/env bash
# The decode step of the Qwen3-8B-shaped models at 512 positions (fa2, graph
# replay) under each shared-memory setting asked for, rounds alternating:
# ORIN_CU_CARVEOUT (every kernel launched through orin_cu_launch* asks for that
# carveout, 0..100 % of the largest shared memory) and ORIN_FA2_DECODE_CONFIG
# (e.g. "pad=64": the attention's launch 64 KB larger, nothing else changed;
# "cwarps=16"). What it measures: whether a kernel needing another L1/shared split
# than its neighbours costs the PDL overlap (bench/notes/fa2-decode.md).
#
#   bash bench/carveout.sh BUILD_DIR
#   NCU=1 bash bench/carveout.sh BUILD_DIR   # instead: the configuration each
#       kernel of one eager AWQ decode layer gets (ncu's launch statistics;
#       ncu runs kernels one at a time, so these are the driver's picks alone)
# Environment: CARVEOUTS ("- 100": "-" leaves the variable unset), FA2 ("-
# pad=64"), FORMATS (awq int8; f16 too), ROUNDS (2), SHAPED (/tmp/orin-shaped: the
# folders of bench/make_shaped_model.py --fast qwen3-8b and --awq 128 qwen3-8b).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: carveout.sh BUILD_DIR}
shaped=${SHAPED:-/tmp/orin-shaped}
# launch_configs CARVEOUT FA2: six kernels (a layer) of an eager decode step,
# each's dynamic shared memory a block and shared-memory configuration.
launch_configs() {
  local env=()
  [ "$1" = - ] || env+=(ORIN_CU_CARVEOUT="$1")
  [ "$2" = - ] || env+=(ORIN_FA2_DECODE_CONFIG="$2")
  echo "carveout $1 fa2 $2:"
  env "${env[@]}" "$(command -v ncu || echo /usr/local/cuda/bin/ncu)" --launch-skip 3000 \
    --launch-count 6 --metrics launch__shared_mem_per_block_dynamic,launch__shared_mem_config_size \
    "$build/orin-run" --bench --set runtime.device=cuda --set model.dtype=f16 \
    --set attention.backend=fa2 --set runtime.cuda_graph=false --set runtime.max_context=600 \
    --set bench.prompt_tokens=512 --set bench.gen_tokens=40 --set model.path="$shaped/qwen3-8b-awq" \
    2>&1 | grep -E "^  [a-z]|launch__" | sed -E 's/^  (void )?([A-Za-z0-9_]+(<[^>]*>)?).*/\2/'
}
if [ "${NCU:-0}" = 1 ]; then
  for c in ${CARVEOUTS:-- 100}; do
    for a in ${FA2:-- pad=64}; do launch_configs "$c" "$a"; done
  done
  exit 0
fi
# the rows: bench/env_ab.sh over each (carveout, fa2) pair's settings
variants=()
for c in ${CARVEOUTS:-- 100}; do
  for a in ${FA2:-- pad=64}; do
    v=()
    [ "$c" = - ] || v+=("ORIN_CU_CARVEOUT=$c")
    [ "$a" = - ] || v+=("ORIN_FA2_DECODE_CONFIG=$a")
    [ ${#v[@]} -gt 0 ] || v=(-)
    variants+=("$(IFS=+; echo "${v[*]}")")
  done
done
VARIANTS="${variants[*]}" exec bash bench/env_ab.sh "$build"
