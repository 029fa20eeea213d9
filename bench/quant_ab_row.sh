#!/usr/bin/env bash
# One row of an A/B of the quantized GEMVs, for bench/ab_variants.sh: the
# products alone (matmul_bench, graph replay, the norm in front where a
# product has one) and the Qwen3-8B-shaped AWQ and int8 models' decode step at
# 512 positions, all on the plugin folder given.
#
#   bash bench/ab_variants.sh build-gpu "off=-DQMMA_PAIR_TILES=0" -- \
#     bash bench/quant_ab_row.sh build-gpu {PLUGINS}
#
# Environment: PRODUCTS (gate_up; "none": no matmul_bench line), FORMATS (awq
# int8), SHAPE (qwen3-8b), SHAPED (/tmp/orin-shaped: the folders of
# bench/make_shaped_model.py, SHAPE and SHAPE-awq). Prints the products (at
# Qwen3-8B's widths, matmul_bench's) on one line, then a line a model
# (bench/env_ab.sh's rows, which run it).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: quant_ab_row.sh BUILD_DIR PLUGINS}
plugins=${2:?usage: quant_ab_row.sh BUILD_DIR PLUGINS}
shaped=${SHAPED:-/tmp/orin-shaped}
formats=${FORMATS:-awq int8}
shape=${SHAPE:-qwen3-8b}
for f in $formats; do
  [ "$f" = awq ] || [ "$f" = int8 ] ||
    { echo "quant_ab_row.sh: format $f: awq or int8" >&2; exit 1; }
done
[ "${PRODUCTS:-}" = none ] || "$build/matmul_bench" --norm --formats "$(echo $formats | tr ' ' ,)" --dtypes f16 \
  --products "${PRODUCTS:-gate_up}" --plugins "$plugins" 2>/dev/null |
  grep -E "^(qkv|o|gate_up|down) " |
  sed -E 's/^(\S+) +(\S+).*graph +([0-9.]+) us.* ([0-9.]+) %(.*)/\1 \2 \3 us \4 %\5/' | tr '\n' ';'
[ "${PRODUCTS:-}" = none ] || echo
FORMATS=$formats SHAPE=$shape SHAPED=$shaped PLUGINS=$plugins VARIANTS=- ROUNDS=1 \
  exec bash bench/env_ab.sh "$build"
