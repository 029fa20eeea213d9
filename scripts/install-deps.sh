#!/usr/bin/env bash
# Installs the Debian packages orin builds and tests with (needs root).
# Used by the README's commands and by .ci/run; safe to run again.
set -euo pipefail
pkgs=(build-essential cmake pkg-config xz-utils python3
      libinih-dev libcjson-dev libpcre2-dev libutf8proc-dev libopenblas-dev
      libjpeg62-turbo-dev libpng-dev libdeflate-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
