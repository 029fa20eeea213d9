#!/usr/bin/env bash
# A/B of kernel variants that differ by -D tunables (or by a source file), in
# one process tree on one GPU, as bench/notes/*.md record them: each variant's
# plugin is built beside the default build, and the same benchmark runs over
# every variant in turn, REPEATS times alternating, so that drift between
# minutes shows up as spread, not as a difference.
#
#   bash bench/ab_variants.sh BUILD_DIR VARIANT... -- BENCH_COMMAND...
#
# VARIANT is NAME=CUDA_FLAGS ("awq16=-DQMMA_BATCH_TILES_AWQ=16"), or
# NAME=@FILE:PATH (this working tree, its untracked files too, with PATH
# replaced by FILE, e.g. the version at HEAD:
# "old=@/tmp/cuda_qmma_gemv.cuh:plugins/ops_common/cuda_qmma_gemv.cuh"; several
# FILE:PATH pairs separated by commas), or NAME=@@REV (the tree at git
# revision REV, e.g. "before=@@8d6ef86": a change against the code before
# it). "base" is
# always run first: BUILD_DIR's own plugins. BENCH_COMMAND runs once per
# variant and repeat with {PLUGINS} replaced by the variant's plugin folder:
#
#   bash bench/ab_variants.sh build-gpu "v1=-DQMMA_WIDE_MIN_BLOCKS=2" -- \
#     build-gpu/matmul_bench --formats awq --plugins {PLUGINS}
#   bash bench/ab_variants.sh build-gpu "r4=-DGEMV_ROWS_MAX=4" -- \
#     env QUANTS=none ORIN_ARGS="--set plugins.dir={PLUGINS}" bash bench/gpu_models.sh build-gpu
#
# A variant's results are checked the same way, the op suites reading its
# plugins (REPEATS=1; ORIN_TEST_QUICK=1 for a shorter run):
#
#   REPEATS=1 bash bench/ab_variants.sh build-gpu "v1=-DQMMA_PAIR_MAX_WAVES=2" -- \
#     env ORIN_TEST_PLUGIN_DIR={PLUGINS} build-gpu/test_ops_quant --device cuda
#
# Environment: TARGET (the plugin target rebuilt: ops_common), REPEATS (2),
# WORK (/tmp/orin-ab). Each run's output goes to WORK/NAME-REP.log, and its
# last 3 lines are printed under the variant's name.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: ab_variants.sh BUILD_DIR VARIANT... -- BENCH_COMMAND...}
shift
variants=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  variants+=("$1")
  shift
done
[ "${1:-}" = "--" ] && [ $# -gt 1 ] || { echo "ab_variants.sh: no -- BENCH_COMMAND" >&2; exit 1; }
shift
target=${TARGET:-ops_common}
work=${WORK:-/tmp/orin-ab}
mkdir -p "$work"
[ -d "$build/plugins" ] || { echo "ab_variants.sh: $build/plugins: not a build" >&2; exit 1; }
prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build/CMakeCache.txt")
archs=$(sed -n 's/^ORIN_CUDA_ARCHS:[A-Z]*=//p' "$build/CMakeCache.txt")

# plugin_dir NAME: the folder the variant's plugins are in.
plugin_dir() {
  [ "$1" = base ] && echo "$build/plugins" || echo "$work/$1/plugins"
}

# build_variant NAME SPEC: BUILD_DIR's plugins with TARGET rebuilt.
build_variant() {
  local name=$1 spec=$2 src=. flags=""
  if [ "${spec:0:2}" = "@@" ]; then
    src="$work/$name/src"
    mkdir -p "$src"
    git archive "${spec:2}" | tar -x -C "$src" || return 1
  elif [ "${spec:0:1}" = "@" ]; then
    local pair file path
    src="$work/$name/src"
    mkdir -p "$src"
    git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src"
    IFS=, read -ra pairs <<<"${spec#@}"
    for pair in "${pairs[@]}"; do
      path=${pair#*:}
      file=${pair%%:*}
      cp "$file" "$src/$path" || return 1
    done
  else
    flags=$spec
  fi
  cmake -S "$src" -B "$work/$name/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DORIN_CUDA_ARCHS="$archs" -DCMAKE_PREFIX_PATH="$prefix" "-DCMAKE_CUDA_FLAGS=$flags" \
    >"$work/$name/configure.log" 2>&1 &&
    cmake --build "$work/$name/build" --target "$target" >"$work/$name/build.log" 2>&1 || return 1
  mkdir -p "$work/$name/plugins"
  cp "$build"/plugins/*.so "$work/$name/plugins/"
  cp "$work/$name/build/plugins/$target.so" "$work/$name/plugins/"
}

# The variants build side by side (one nvcc each is mostly serial: five
# builds in a row took over five minutes of a ten-minute device call).
pids=()
for v in "${variants[@]}"; do
  name=${v%%=*}
  mkdir -p "$work/$name"
  build_variant "$name" "${v#*=}" &
  pids+=($!)
done
names=(base)
for i in "${!variants[@]}"; do
  name=${variants[$i]%%=*}
  if wait "${pids[$i]}"; then
    names+=("$name")
  else
    echo "variant $name: build failed ($work/$name/*.log)" >&2
  fi
done

for rep in $(seq 1 "${REPEATS:-2}"); do
  for name in "${names[@]}"; do
    dir=$(plugin_dir "$name")
    cmd=()
    for word in "$@"; do cmd+=("${word//\{PLUGINS\}/$dir}"); done
    "${cmd[@]}" >"$work/$name-$rep.log" 2>&1
    echo "== $name, repeat $rep (rc $?)"
    tail -3 "$work/$name-$rep.log"
  done
done
