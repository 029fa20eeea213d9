#!/usr/bin/env bash
# The decode step of the Qwen3-8B-shaped models at 512 positions (fa2, graph
# replay) under each environment setting asked for, rounds alternating: the
# A/B of a runtime measuring aid (ORIN_PDL=0 against the default, say;
# bench/carveout.sh runs its rows through this).
#
#   VARIANTS="- ORIN_PDL=0" bash bench/env_ab.sh BUILD_DIR
# Environment: VARIANTS (space-separated; each "-" for none, or VAR=value, or
# several joined by "+": A=1+B=2), FORMATS (awq int8; f16 too), ROUNDS (2),
# SHAPE (qwen3-8b), SHAPED (/tmp/orin-shaped: the folders of
# bench/make_shaped_model.py --fast SHAPE and --awq 128 SHAPE, named SHAPE and
# SHAPE-awq), POSITIONS (512), PLUGINS (a plugin folder instead of the build's:
# bench/quant_ab_row.sh's rows under bench/ab_variants.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: env_ab.sh BUILD_DIR}
shaped=${SHAPED:-/tmp/orin-shaped}
pos=${POSITIONS:-512}
shape=${SHAPE:-qwen3-8b}
plugins=()
[ -z "${PLUGINS:-}" ] || plugins=(--set plugins.dir="$PLUGINS")
for f in ${FORMATS:-awq int8}; do
  case $f in
    awq | int8 | f16) ;;
    *) echo "env_ab.sh: format $f: awq, int8 or f16" >&2; exit 1 ;;
  esac
done
row() { # format variant
  local model=(--set model.path="$shaped/$shape")
  case $1 in
    awq) model=(--set model.path="$shaped/$shape-awq") ;;
    int8) model+=(--set model.quant=int8) ;;
  esac
  local env=()
  [ "$2" = - ] || IFS=+ read -r -a env <<< "$2"
  env "${env[@]}" "$build/orin-run" --bench --json --set runtime.device=cuda \
    --set model.dtype=f16 --set attention.backend=fa2 --set runtime.cuda_graph=true \
    --set runtime.max_context=$((pos + 136)) --set bench.prompt_tokens="$pos" \
    --set bench.gen_tokens=128 "${model[@]}" "${plugins[@]}" 2>/dev/null | tail -1 |
    python3 -c 'import json, sys
d = json.loads(sys.stdin.read())
print("%-5s %-10s %-24s %.4f ms (%.1f %% of %.4f)" % (sys.argv[1], sys.argv[3], sys.argv[2],
      d["decode_step_ms"], 100 * d["decode_roofline_fraction"], d["decode_floor_ms"]))' \
      "$1" "$2" "$shape" 2>/dev/null || echo "$1 $shape $2 failed"
}
for r in $(seq "${ROUNDS:-2}"); do
  for f in ${FORMATS:-awq int8}; do
    for v in ${VARIANTS:--}; do row "$f" "$v"; done
  done
done
