#!/usr/bin/env bash
# Where a short decode attention's time goes (bench/notes/quant.md, "where the
# H100's step goes"): fa2's decode kernels built with one piece of their work
# skipped at a time (FA2D_KNOCKOUT in plugins/attention_fa2/cuda_decode.cu:
# the PDL wait, the K/V steps, the p and q reads after the wait, the cluster
# kernel's merges; then all four), timed by attention_bench's decode against
# the kernels as they are, alternating; with MODEL set, also the decode step of
# that model folder with each variant's plugins. Timing only: a knocked-out
# attention's results are wrong.
#
#   bash bench/attention_knockouts.sh BUILD_DIR
#
# Environment: LENS (cache lengths, "512,1024,4096"), MODEL (a model folder,
# e.g. /tmp/orin-shaped/qwen3-8b-awq; unset: no model rows), REPEATS (2),
# WORK (/tmp/orin-ab-attn), as bench/ab_variants.sh.
# Prints a row a variant and repeat: us a call at each length (graph replay),
# then the model's ms a token.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: attention_knockouts.sh BUILD_DIR}
work=${WORK:-/tmp/orin-ab-attn}
lens=${LENS:-512,1024,4096}
names="base wait steps inputs merge all"
mkdir -p "$work"
bench_cmd=("$build/attention_bench" --mode decode --providers fa2 --dtypes f16
           --decode-lens "$lens" --plugins {PLUGINS})
if [ -n "${MODEL:-}" ]; then
  bench_cmd=(bash -c "\"\$@\"; $build/orin-run --set model.path=$MODEL --bench --json \
    --set runtime.device=cuda --set model.dtype=f16 --set attention.backend=fa2 \
    --set runtime.max_context=648 --set bench.prompt_tokens=512 --set bench.gen_tokens=128 \
    --set plugins.dir={PLUGINS} 2>/dev/null | tail -1" _ "${bench_cmd[@]}")
fi
TARGET=attention_fa2 WORK=$work bash bench/ab_variants.sh "$build" \
  "wait=-DFA2D_KNOCKOUT=1" "steps=-DFA2D_KNOCKOUT=2" "inputs=-DFA2D_KNOCKOUT=4" \
  "merge=-DFA2D_KNOCKOUT=8" "all=-DFA2D_KNOCKOUT=15" -- "${bench_cmd[@]}" \
  >"$work/knockouts.log" 2>&1 ||
  { echo "attention_knockouts.sh: ab_variants failed ($work/knockouts.log)" >&2; exit 1; }
printf '%-8s %-3s %s\n' variant rep "length:us (graph replay) ... [model ms a token]"
for rep in $(seq 1 "${REPEATS:-2}"); do
  for name in $names; do
    log="$work/$name-$rep.log"
    [ -f "$log" ] || continue
    us=$(grep -E '^decode +fa2 ' "$log" |
      awk '{for (i = 1; i <= NF; i++) if ($i == "graph") printf "%s:%s ", $5, $(i + 1)}')
    ms=$(grep -o '"decode_step_ms": *[0-9.]*' "$log" | grep -o '[0-9.]*$')
    printf '%-8s %-3s %s %s\n' "$name" "$rep" "$us" "${ms:+[$ms ms]}"
  done
done
