#!/usr/bin/env bash
# CPU decode and prefill of one model in each compute dtype (f32, bf16, f16):
# the figures of the f16/bf16 CPU matmul. One JSON line per dtype from
# `orin-run --bench --json`, which carries the memory-bandwidth floor of a decode
# step and the fraction of it reached.
#   bash bench/cpu_dtypes.sh MODEL_DIR [BUILD_DIR] [THREADS]
# MODEL_DIR: e.g. `python3 bench/make_shaped_model.py qwen3-0.6b /tmp/qwen3-0.6b`.
# THREADS: runtime.threads (0 = every core, the default).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/cpu_dtypes.sh MODEL_DIR [BUILD_DIR] [THREADS]}
build=${2:-build}
threads=${3:-0}
for dtype in f32 bf16 f16; do
  "$build/orin-run" --config etc/orin.ini --bench --json \
    --set model.path="$model" --set runtime.device=cpu --set runtime.threads="$threads" \
    --set model.dtype=$dtype --set bench.prompt_tokens=128 --set bench.gen_tokens=32 \
    --set bench.repeats=3
done
