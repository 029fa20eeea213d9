#!/usr/bin/env bash
# CPU prefill and decode throughput of the bundled tiny models, for every
# attention backend (issue 4's speed figures). Run after building:
#   bash bench/cpu_models.sh [BUILD_DIR]
# Prints one JSON line per (model, backend) from `orin-run --bench --json`.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for model in qwen2-tiny qwen3-tiny; do
  for backend in mha fa1 fa2; do
    "$build/orin-run" --config etc/orin.ini --bench --json \
      --set model.path="$PWD/tests/data/models/$model" --set runtime.device=cpu \
      --set attention.backend=$backend --set bench.prompt_tokens=512 \
      --set bench.gen_tokens=128 --set bench.repeats=3
  done
done
