#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan in
# build-fuzz/, then runs each for SECONDS (default 60) and prints, per target,
# the executions, the rate and the findings (0, or the files libFuzzer wrote).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   TARGET: config safetensors st_index model_config generation_config
#           tokenizer_json tokenizer_encode chat_template chat_render image_decode
#           image_config (default: all)
#   FUZZ_RUNS=N     stop a target after N executions instead (SECONDS still caps it)
#   FUZZ_BUILD_DIR  build folder (default: build-fuzz)
#   FUZZ_WORKERS=N  N processes per target on one shared corpus (default 1); with
#                   FUZZ_RUNS, each runs FUZZ_RUNS/N; executions are summed
#   FUZZ_ARGS       extra libFuzzer flags
#
# Each target starts from the committed seeds (tests/fuzz/corpus/TARGET) and a
# working corpus in the build folder that grows from run to run; crashes,
# leaks, timeouts and OOMs land in build-fuzz/findings/TARGET/. Exit status 1
# when anything was found.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
all=(config safetensors st_index model_config generation_config tokenizer_json tokenizer_encode
     chat_template chat_render image_decode image_config)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
build=${FUZZ_BUILD_DIR:-build-fuzz}

# clang and its libFuzzer runtime: only this script needs them.
if ! command -v clang >/dev/null ||
   [ ! -f "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] &&
   [ ! -f "$(clang -print-file-name=libclang_rt.fuzzer-aarch64.a 2>/dev/null)" ]; then
    SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    ver=$(apt-cache policy clang | sed -n 's/.*Candidate: 1:\([0-9]*\).*/\1/p')
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
        clang ${ver:+libclang-rt-$ver-dev}
fi
bash scripts/install-deps.sh

mkdir -p "$build"
if ! { CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DORIN_FUZZ=ON \
           -DORIN_WITH_CUDA=OFF &&
       cmake --build "$build" --target fuzzers -j "$(nproc)"; } >"$build/build.log" 2>&1; then
    tail -30 "$build/build.log" >&2
    echo "fuzz.sh: the build failed (whole log: $build/build.log)" >&2
    exit 2
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
dicts=(config:ini safetensors:json st_index:json model_config:json generation_config:json
       tokenizer_json:json chat_template:jinja chat_render:jinja)
found=0
printf '%-18s %8s %14s %10s  %s\n' target seconds executions exec/s findings
for t in "${targets[@]}"; do
    bin=$build/fuzz_$t
    [ -x "$bin" ] || { echo "fuzz.sh: no target '$t' (known: ${all[*]})" >&2; exit 2; }
    corpus=$build/corpus/$t findings=$build/findings/$t log=$build/logs/$t.log
    mkdir -p "$corpus" "$findings" "$(dirname "$log")"
    flags=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -print_final_stats=1
           -artifact_prefix="$findings/")
    workers=${FUZZ_WORKERS:-1}
    [ -n "${FUZZ_RUNS:-}" ] && flags+=(-runs=$(((FUZZ_RUNS + workers - 1) / workers)))
    for d in "${dicts[@]}"; do
        [ "${d%%:*}" = "$t" ] && flags+=(-dict="tests/fuzz/dict/${d#*:}.dict")
    done
    before=$(ls "$findings" | wc -l)
    start=$(date +%s)
    logs=()
    for w in $(seq 1 "$workers"); do
        wlog=$log
        [ "$workers" -gt 1 ] && wlog=${log%.log}.$w.log
        logs+=("$wlog")
        # shellcheck disable=SC2086 # FUZZ_ARGS holds several flags
        "$bin" "${flags[@]}" ${FUZZ_ARGS:-} "$corpus" "tests/fuzz/corpus/$t" >"$wlog" 2>&1 &
    done
    wait
    took=$(($(date +%s) - start))
    execs=$(cat "${logs[@]}" | sed -n 's/^stat::number_of_executed_units: *//p' |
            awk '{ n += $1 } END { if (NR) print n }')
    rate=$((${execs:-0} / (took > 0 ? took : 1)))
    new=$(ls -t "$findings" | head -n $(($(ls "$findings" | wc -l) - before)))
    if [ -n "$new" ]; then
        found=1
        result=$(for f in $new; do printf '%s ' "$findings/$f"; done) # libFuzzer names: hex
    elif grep -q 'ERROR: libFuzzer\|==ERROR\|runtime error' "${logs[@]}"; then
        found=1
        result="error without an artifact, see ${logs[*]}"
    else
        result=0
    fi
    printf '%-18s %8s %14s %10s  %s\n' "$t" "$took" "${execs:-?}" "${rate:-?}" "$result"
done
exit $found
