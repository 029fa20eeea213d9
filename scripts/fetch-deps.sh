#!/usr/bin/env bash
# For machines that reach no package registry (the lent GPU machine): download
# orin's Debian build dependencies here into .deps/ (git-ignored), carry that
# folder over, and unpack it there into a prefix that CMake is pointed at:
#
#   here:   bash scripts/fetch-deps.sh
#   there:  bash scripts/fetch-deps.sh --unpack /tmp/orin-deps
#           cmake -S . -B build -DCMAKE_PREFIX_PATH=/tmp/orin-deps/usr ...
#
# Unpacking uses dpkg -x into the prefix, never into /.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libinih1 libinih-dev libcjson1 libcjson-dev
      libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libpcre2-dev
      libutf8proc2 libutf8proc-dev
      libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev libgfortran5
      libjpeg62-turbo libjpeg62-turbo-dev libjpeg-dev libpng16-16 libpng-dev
      libdeflate0 libdeflate-dev)

if [ "${1:-}" = "--unpack" ]; then
  prefix=${2:?usage: fetch-deps.sh --unpack PREFIX}
  mkdir -p "$prefix"
  for deb in .deps/*.deb; do dpkg -x "$deb" "$prefix"; done
  echo "unpacked $(ls .deps/*.deb | wc -l) packages into $prefix"
  exit 0
fi

mkdir -p .deps
cd .deps
apt-get update -q >/dev/null
apt-get download "${pkgs[@]}"
ls -1 *.deb
