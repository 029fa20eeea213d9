#!/usr/bin/env bash
# Where a replayed decode step's time goes, by leaving one kind of op out at a
# time (ORIN_BENCH_SKIP, core/src/plugin/graph.c: the outputs are then wrong,
# the time is what the step costs without that kind). Complements --profile,
# whose eager per-op times include each launch: here every figure is from the
# captured graph, PDL overlaps and kernel boundaries included.
#
#   bash bench/decode_breakdown.sh BUILD_DIR MODEL_DIR [CONTEXT]
# Environment: KINDS (the node labels without "layer N ", default below),
# DTYPE (f16), ATTENTION (fa2), GEN (128), ORIN_ARGS (more orin-run arguments).
# Prints, per kind: the step in ms without it, the difference to the full step
# (measured first and last), and that difference per layer in us.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: decode_breakdown.sh BUILD_DIR MODEL_DIR [CONTEXT]}
model=${2:?usage: decode_breakdown.sh BUILD_DIR MODEL_DIR [CONTEXT]}
ctx=${3:-512}
gen=${GEN:-128}
kinds=${KINDS:-"attention rope_kv_write input_layernorm post_attention_layernorm qkv_proj o_proj gate_up_swiglu down_proj attention,rope_kv_write,input_layernorm,post_attention_layernorm"}
layers=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]+"/config.json")).get("num_hidden_layers") or json.load(open(sys.argv[1]+"/config.json"))["text_config"]["num_hidden_layers"])' "$model")
step_ms() { # step_ms SKIP_LIST
  ORIN_BENCH_SKIP=$1 "$build/orin-run" --set model.path="$model" --bench --json \
    --set runtime.device=cuda --set model.dtype="${DTYPE:-f16}" \
    --set attention.backend="${ATTENTION:-fa2}" --set runtime.cuda_graph=true \
    --set runtime.max_context=$((ctx + gen + 8)) --set bench.prompt_tokens="$ctx" \
    --set bench.gen_tokens="$gen" --set bench.repeats=1 ${ORIN_ARGS:-} 2>&1 | tail -1 |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["decode_step_ms"])' 2>/dev/null ||
    echo nan
}
base0=$(step_ms "")
rows=()
for k in $kinds; do
  rows+=("$k $(step_ms "$k")")
  echo "${rows[-1]}" >&2
done
base1=$(step_ms "")
python3 - "$base0" "$base1" "$layers" "${rows[@]}" <<'PY'
import sys
b0, b1, layers = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
base = (b0 + b1) / 2
print(f"full step {b0:.3f} / {b1:.3f} ms (first / last), {layers} layers")
print(f"{'left out':60s} {'step ms':>8s} {'saves ms':>9s} {'us a layer':>10s}")
for row in sys.argv[4:]:
    kind, ms = row.rsplit(" ", 1)
    ms = float(ms)
    print(f"{kind[:60]:60s} {ms:8.3f} {base - ms:9.3f} {1000 * (base - ms) / layers:10.2f}")
PY
