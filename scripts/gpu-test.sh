#!/usr/bin/env bash
# On the lent GPU machine (no package registry): unpack the carried .deps/
# (scripts/fetch-deps.sh), build with CUDA and run the whole test suite, GPU
# tests included. Logs go to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/orin-gpu-test}
mkdir -p "$out"
prefix=/tmp/orin-deps
bash scripts/fetch-deps.sh --unpack "$prefix" >/dev/null
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$prefix/usr" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -30; exit 1; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader | tee "$out/gpu.txt"
ctest --test-dir build-gpu --output-on-failure -j 8 2>&1 | tee "$out/ctest.log" | tail -25
