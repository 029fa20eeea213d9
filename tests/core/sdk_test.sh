#!/bin/sh
# The plugin SDK out of tree: install the core of a build into a fresh prefix,
# build tests/core/sdk_plugin with nothing but the compiler and
# `pkg-config --cflags --libs orin`, and load the result.
#
# usage: sdk_test.sh BUILD_DIR SOURCE_DIR LOADER CC [EXTRA_CFLAGS]
set -eu
build=$1 src=$2 loader=$3 cc=$4 extra=${5:-}

fail() { echo "sdk_test: $*" >&2; exit 1; }
command -v pkg-config >/dev/null || fail "pkg-config is not installed"

tmp=$(mktemp -d /tmp/orin-test-sdk-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

# The core folder of the build holds the SDK: library, headers, orin.pc.
cmake --install "$build/core" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }

# lib/ or lib/<multiarch>/, whichever GNUInstallDirs chose.
pc=$(find "$prefix" -name orin.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "no orin.pc under $prefix"
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs orin) || fail "pkg-config --cflags --libs orin failed"
echo "pkg-config: $flags"
# The flags must point into the prefix just installed, not where the build
# thought it would be installed.
case "$flags" in
*"$prefix"*) ;;
*) fail "pkg-config flags do not point into $prefix: $flags" ;;
esac

# Strict C11, warnings as errors: the SDK headers must compile clean on their own.
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic -shared -fPIC $extra \
    -o "$tmp/sdk_example.so" "$src/sdk_plugin/sdk_plugin.c" $flags ||
    fail "building the out-of-tree plugin failed"

"$loader" "$tmp/sdk_example.so"
