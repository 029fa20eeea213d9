#!/usr/bin/env bash
# The sanitizer job: builds orin with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DORIN_SANITIZE=ON) in its own tree and runs the CPU test suite there with
# LeakSanitizer on and UBSan fatal. In that tree the suite also holds the tests
# labelled "sanitize" (tests/fault: orin-run in every mode must exit
# LeakSanitizer-clean), which exist only when ORIN_SANITIZE is on.
#   BUILD_DIR   build folder (default: build-sanitize)
#   CMAKE_ARGS  extra arguments for cmake's configure step
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-sanitize}
jobs=$(nproc)

# CUDA stays off: the job is the CPU suite, and ASan's shadow memory does not
# mix with the CUDA driver's mappings.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DORIN_SANITIZE=ON \
      -DORIN_WITH_CUDA=OFF ${CMAKE_ARGS:-}
start=$(date +%s)
cmake --build "$build" -j "$jobs"
built=$(date +%s)

export ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:strict_init_order=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}
export LSAN_OPTIONS=${LSAN_OPTIONS:-}
ctest --test-dir "$build" --output-on-failure -j "$jobs" -LE gpu
done_at=$(date +%s)
echo "test-sanitize: build $((built - start)) s, tests $((done_at - built)) s"
