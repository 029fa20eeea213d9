#!/usr/bin/env bash
# Where the quantized GEMV's fixed cost goes (bench/notes/quant.md, "knock-
# outs"): the GEMV built with each piece of its work after the weights' loads
# skipped (QMMA_KNOCKOUT in plugins/ops_common/cuda_quant.cu: the PDL wait, the
# staging of x, the k-tiles, the warps' reduction; then all four), timed by
# matmul_bench against the GEMV as it is, alternating. Timing only: a
# knocked-out GEMV's results are wrong.
#
#   bash bench/quant_knockouts.sh BUILD_DIR
#
# Environment: REPEATS (2), WORK (/tmp/orin-ab), as bench/ab_variants.sh.
# Prints a table of us a product, a row a variant and repeat.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: quant_knockouts.sh BUILD_DIR}
work=${WORK:-/tmp/orin-ab}
names="base wait stage compute epilogue all"
mkdir -p "$work"
WORK=$work bash bench/ab_variants.sh "$build" \
  "wait=-DQMMA_KNOCKOUT=1" "stage=-DQMMA_KNOCKOUT=2" "compute=-DQMMA_KNOCKOUT=4" \
  "epilogue=-DQMMA_KNOCKOUT=8" "all=-DQMMA_KNOCKOUT=15" -- \
  "$build/matmul_bench" --formats awq,int8 --dtypes f16 --products qkv,o,gate_up,down \
  --plugins {PLUGINS} >"$work/knockouts.log" 2>&1 ||
  { echo "quant_knockouts.sh: ab_variants failed ($work/knockouts.log)" >&2; exit 1; }
printf '%-9s %-3s %s\n' variant rep "us: product format ..."
for rep in $(seq 1 "${REPEATS:-2}"); do
  for name in $names; do
    log="$work/$name-$rep.log"
    [ -f "$log" ] || continue
    printf '%-9s %-3s %s\n' "$name" "$rep" \
      "$(grep -E '^(qkv|o|gate_up|down) ' "$log" | awk '{printf "%s %s %s  ", $1, $2, $11}')"
  done
done
