#!/usr/bin/env bash
# Where a kernel family's fixed cost goes: its kernels built with one piece of
# their work skipped at a time (a bit mask the source reads, timing only: a
# knocked-out kernel's results are wrong), timed against the kernels as they
# are, alternating (bench/ab_variants.sh).
#
#   bash bench/knockouts.sh quant BUILD_DIR
#     the quantized GEMV (QMMA_KNOCKOUT, plugins/ops_common/cuda_qmma_gemv.cuh): the
#     PDL wait, the staging of x, the k-tiles, the warps' reduction; then all
#     four; matmul_bench's four decode products, AWQ and int8, us each
#     (bench/notes/quant.md, "knock-outs"), and with MODEL set that model's
#     decode step.
#   bash bench/knockouts.sh attention BUILD_DIR
#     fa2's decode (FA2D_KNOCKOUT, plugins/attention_fa2/
#     cuda_decode_common.cuh): the PDL wait, the K/V steps, the p and q reads
#     after the wait, the cluster kernel's merges; then all four;
#     attention_bench's decode at LENS ("512,1024,4096"), us each (graph
#     replay), and with MODEL set (a model folder, e.g.
#     /tmp/orin-shaped/qwen3-8b-awq) that model's decode step.
#   bash bench/knockouts.sh xbytes BUILD_DIR
#     x's loads after the wait cut to 1/4 and 1/32 of the row (GEMV_KO_X_DIV,
#     plugins/ops_common/cuda_gemv.cuh; the round trip and the norm stay):
#     what x's bytes cost matmul_bench's four AWQ products and, with MODEL
#     set, that model's decode step (bench/notes/quant.md, sixth session of
#     2026-11-27).
#
# Environment: REPEATS (2), WORK (/tmp/orin-ab-FAMILY), as ab_variants.sh;
# SETS (quant, attention): the masks to build instead of one bit at a time
# and then all, e.g. SETS="4 6 12 14" with MODEL set for the quantized
# GEMV's split in the step (bench/notes/quant.md, nineteenth session: every
# mask with the k-tiles' bit keeps the step finite).
# Prints a row a variant and repeat.
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: knockouts.sh quant|attention|xbytes BUILD_DIR"
family=${1:?$usage}
build=${2:?$usage}
work=${WORK:-/tmp/orin-ab-$family}
# with_model: cmd followed by MODEL's decode step at 512 on the same plugins
# (MODEL unset: cmd alone); model_row LOG: that step's figure.
with_model() {
  [ -n "${MODEL:-}" ] || return 0
  cmd=(bash -c "\"\$@\"; $build/orin-run --set model.path=$MODEL --bench --json \
    --set runtime.device=cuda --set model.dtype=f16 --set attention.backend=fa2 \
    --set runtime.max_context=648 --set bench.prompt_tokens=512 \
    --set bench.gen_tokens=128 --set plugins.dir={PLUGINS} 2>&1 | tail -1" _ "${cmd[@]}")
}
model_row() {
  [ -z "${MODEL:-}" ] ||
    grep -o '"decode_step_ms": *[0-9.]*' "$1" | sed 's/.*: */model /; s/$/ ms/' | grep . ||
    echo "model: no step figure (orin-run's last line: $(tail -1 "$1"))"
}
products_row() {
  grep -E '^(qkv|o|gate_up|down) ' "$1" | awk '{printf "%s %s %s  ", $1, $2, $11}'
  model_row "$1"
}
variants=() all=all
case $family in
  quant)
    target=ops_common flag=QMMA_KNOCKOUT names="wait stage compute epilogue"
    cmd=("$build/matmul_bench" --formats awq,int8 --dtypes f16 --products qkv,o,gate_up,down
         --plugins {PLUGINS})
    row() { products_row "$1"; } ;;
  attention)
    target=attention_fa2 flag=FA2D_KNOCKOUT names="wait steps inputs merge"
    cmd=("$build/attention_bench" --mode decode --providers fa2 --dtypes f16
         --decode-lens "${LENS:-512,1024,4096}" --plugins {PLUGINS})
    row() {
      grep -E '^decode +fa2 ' "$1" |
        awk '{for (i = 1; i <= NF; i++) if ($i == "graph") printf "%s:%s us  ", $5, $(i + 1)}'
      model_row "$1"
    } ;;
  xbytes)
    target=ops_common flag="" names="x4 x32" all=""
    variants=("x4=-DGEMV_KO_X_DIV=4" "x32=-DGEMV_KO_X_DIV=32")
    cmd=("$build/matmul_bench" --formats awq --dtypes f16 --products qkv,o,gate_up,down
         --plugins {PLUGINS})
    row() { products_row "$1"; } ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
with_model
if [ -n "$flag" ] && [ -n "${SETS:-}" ]; then # the masks asked for
  names="" all=""
  for m in $SETS; do
    variants+=("ko$m=-D$flag=$m")
    names+=" ko$m"
  done
elif [ -n "$flag" ]; then # one bit a variant, then all of them
  bit=1
  for name in $names; do
    variants+=("$name=-D$flag=$bit")
    bit=$((bit * 2))
  done
  variants+=("all=-D$flag=$((bit - 1))")
fi
mkdir -p "$work"
TARGET=$target WORK=$work bash bench/ab_variants.sh "$build" "${variants[@]}" -- "${cmd[@]}" \
  >"$work/knockouts.log" 2>&1 ||
  { echo "knockouts.sh: ab_variants failed ($work/knockouts.log)" >&2; exit 1; }
printf '%-9s %-3s %s\n' variant rep "figures"
for rep in $(seq 1 "${REPEATS:-2}"); do
  for name in base $names $all; do
    log="$work/$name-$rep.log"
    [ -f "$log" ] && printf '%-9s %-3s %s\n' "$name" "$rep" "$(row "$log" | paste -sd' ')"
  done
done
