#!/usr/bin/env bash
# The far jumps a decode layer's kernels take after their PDL wait: ncu's
# per-SASS-line executed counts (SourceCounters) of one eager decode layer of
# the Qwen3-8B-shaped model at 512 positions, then bench/ncu_branches.py over
# them (bench/notes/quant.md, seventeenth session, has the AWQ table).
#
#   bash bench/ncu_branches.sh BUILD_DIR [awq|int8|f16]
# Environment: SHAPED (/tmp/orin-shaped: the folders of
# bench/make_shaped_model.py --fast qwen3-8b and --awq 128 qwen3-8b), SKIP
# (3000 launches: well into the decode steps), COUNT (8: a layer's kernels and
# two more), DIST (2048: the shortest jump listed, bytes), NCU_DIR (/tmp/orin-ncu:
# the report and its CSV).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: ncu_branches.sh BUILD_DIR [awq|int8|f16]}
format=${2:-awq}
shaped=${SHAPED:-/tmp/orin-shaped}
out=${NCU_DIR:-/tmp/orin-ncu}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mkdir -p "$out"
case $format in
  awq) model=(--set model.path="$shaped/qwen3-8b-awq") ;;
  int8) model=(--set model.path="$shaped/qwen3-8b" --set model.quant=int8) ;;
  f16) model=(--set model.path="$shaped/qwen3-8b") ;;
  *) echo "ncu_branches.sh: format $format: awq, int8 or f16" >&2; exit 1 ;;
esac
"$ncu" --launch-skip "${SKIP:-3000}" --launch-count "${COUNT:-8}" --section SourceCounters \
  -f -o "$out/$format" "$build/orin-run" --bench --set runtime.device=cuda \
  --set model.dtype=f16 --set attention.backend=fa2 --set runtime.cuda_graph=false \
  --set runtime.max_context=600 --set bench.prompt_tokens=512 --set bench.gen_tokens=40 \
  "${model[@]}" >"$out/$format-ncu.log" 2>&1 || { tail -5 "$out/$format-ncu.log"; exit 1; }
"$ncu" --import "$out/$format.ncu-rep" --page source --csv --print-source sass \
  >"$out/$format.csv" || exit 1
python3 bench/ncu_branches.py "$out/$format.csv" "${DIST:-2048}"
