#!/usr/bin/env bash
# Installs what the build needs, builds everything and runs the test suite.
# This is the README's test command and what CI runs (.ci/run).
#   BUILD_DIR   build folder (default: build)
#   CMAKE_ARGS  extra arguments for cmake's configure step
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
