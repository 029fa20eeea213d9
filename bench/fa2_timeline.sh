#!/usr/bin/env bash
# Where a short decode's time goes inside fa2's cluster kernel: the plugin
# built with -DFA2D_TIMELINE=1 (plugins/attention_fa2/cuda_decode_common.cuh
# and cuda_decode_cluster.cuh: thread 0 of each block of unit 0 stamps
# %globaltimer and clock64 at nine marks, and every 50th eager call prints
# them), run by attention_bench at LENS
# ("512") and, with MODEL set (e.g. /tmp/orin-shaped/qwen3-8b-awq), by the
# model's eager decode at 512 positions. Prints the last printed call of each:
# a row a block, ns since rank 0's start, then cycles since the block's own.
# Marks: start, past the PDL wait, p read and piece cut, warp 0's steps done,
# warps stored, block merged, cluster barrier 1, outputs stored, barrier 2
# (bench/notes/fa2-decode.md, "A timeline of the cluster kernel").
#
#   bash bench/fa2_timeline.sh BUILD_DIR
# Each printed row is followed by its phases in cycles, the marks' differences
# (`phases:` the wait; p and the piece; the steps; the warps' stores; the
# block merge; barrier 1; the cluster merge; barrier 2; with the early staging,
# the default, the cluster kernel marks the piece after its steps, so the
# second phase holds the steps and the third is ~40 cycles): %globaltimer
# moves in 32 ns steps that disagree with the cycles phase by phase, so the
# cycles are the figures to read.
# Environment: LENS, MODEL, WORK (/tmp/orin-timeline), FLAGS (more -D flags
# for the timing build, e.g. a variant's).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fa2_timeline.sh BUILD_DIR}
work=${WORK:-/tmp/orin-timeline}
TARGET=attention_fa2 WORK=$work REPEATS=1 bash bench/ab_variants.sh "$build" \
  "tl=-DFA2D_TIMELINE=1 ${FLAGS:-}" -- true >"$work.log" 2>&1 ||
  { echo "fa2_timeline.sh: the build failed ($work.log)" >&2; exit 1; }
plugins=$work/tl/plugins
[ -f "$plugins/attention_fa2.so" ] || { echo "fa2_timeline.sh: no plugin ($work.log)" >&2; exit 1; }
# last_call LOG: the last printed call's rows, each with its phases in cycles
# (the differences of its cycle stamps), or why there are none.
last_call() {
  grep "fa2d timeline" "$1" | tail -16 |
    awk '{ print; c = 0; for (i = 1; i <= NF; i++) if ($i == "cycles:") c = i
           if (c) { line = "    phases:"; for (i = c + 2; i <= NF; i++) line = line sprintf(" %6d", $i - $(i - 1)); print line } }' |
    grep . || echo "(no timeline: $(tail -1 "$1"))"
}
for len in ${LENS:-512}; do
  "$build/attention_bench" --mode decode --providers fa2 --dtypes f16 --decode-lens "$len" \
    --plugins "$plugins" >"$work/bench-$len.log" 2>&1
  echo "== attention_bench, $len positions"
  last_call "$work/bench-$len.log"
done
if [ -n "${MODEL:-}" ]; then
  "$build/orin-run" --set model.path="$MODEL" --bench --json --set runtime.device=cuda \
    --set model.dtype=f16 --set attention.backend=fa2 --set runtime.max_context=648 \
    --set bench.prompt_tokens=512 --set bench.gen_tokens=128 --set runtime.cuda_graph=false \
    --set plugins.dir="$plugins" >"$work/model.log" 2>&1
  echo "== $MODEL, eager decode at 512-640 positions"
  last_call "$work/model.log"
fi
