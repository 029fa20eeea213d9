#!/usr/bin/env bash
# Whole-model speed on the lent GPU, orin beside Hugging Face transformers, one
# run (the CUDA backend issue's baseline; the decode issue's table).
#
#   bash bench/gpu_models.sh BUILD_DIR [WORK_DIR] [--no-hf]
#
# Writes Qwen3-8B- and Qwen2.5-7B-shaped folders (random weights, real shapes:
# bench/make_shaped_model.py --fast) into WORK_DIR (default /tmp/orin-shaped),
# then for each shape and for f16 and bf16: orin-run --bench (512-token prompt,
# 256 decoded; decode as a fraction of the floor = weights + KV bytes a step
# over the measured device-to-device copy bandwidth; load time), and
# transformers' generate on the same folder (512-token prompt, 64 decoded).
# Environment: ATTENTION (default fa2), CONTEXTS ("512"), GEN (256), CUDA_GRAPH.
# Prints one JSON line per row as it goes and a table last.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: gpu_models.sh BUILD_DIR [WORK_DIR] [--no-hf]}
work=${2:-/tmp/orin-shaped}
hf=1; [ "${3:-}" = "--no-hf" ] && hf=0
attention=${ATTENTION:-fa2}
gen=${GEN:-256}
mkdir -p "$work"
rows=()
for shape in qwen3-8b qwen2.5-7b; do
  dir="$work/$shape"
  if [ ! -f "$dir/config.json" ]; then
    SECONDS=0
    python3 bench/make_shaped_model.py "$shape" "$dir" --fast >/dev/null 2>&1 || { echo "make $shape failed"; continue; }
    echo "made $dir in ${SECONDS} s" >&2
  fi
  for dt in f16 bf16; do
    for prompt in ${CONTEXTS:-512}; do
      line=$("$build/orin-run" --set model.path="$dir" --bench --json \
        --set runtime.device=cuda --set model.dtype=$dt --set attention.backend="$attention" \
        --set runtime.max_context=$((prompt + gen + 8)) --set bench.prompt_tokens="$prompt" \
        --set bench.gen_tokens="$gen" --set bench.repeats=3 \
        ${CUDA_GRAPH:+--set runtime.cuda_graph=$CUDA_GRAPH} 2>&1 | tail -1)
      echo "orin $shape $line"
      rows+=("orin|$shape|$line")
    done
    if [ $hf = 1 ]; then
      line=$(python3 bench/torch_gpu_generate.py "$dir" --dtypes $dt 2>/dev/null | tail -1)
      echo "hf $shape $line"
      rows+=("hf|$shape|$line")
    fi
  done
done
echo
python3 - "${rows[@]}" <<'PY'
import json, sys
print(f"{'engine':12s} {'shape':11s} {'dtype':5s} {'prompt':>6s} {'prefill tok/s':>13s} "
      f"{'decode tok/s':>12s} {'ms/token':>9s} {'floor ms':>9s} {'of floor':>8s} {'load s':>7s}")
for row in sys.argv[1:]:
    engine, shape, text = row.split("|", 2)
    try:
        r = json.loads(text)
    except ValueError:
        print(f"{engine:12s} {shape:11s} failed: {text[:100]}")
        continue
    frac = r.get("decode_roofline_fraction")
    floor = r.get("decode_floor_ms")
    print(f"{engine:12s} {shape:11s} {r['dtype']:5s} {r['prompt_tokens']:6d} "
          f"{r['prefill_tok_s']:13.1f} {r['decode_tok_s']:12.2f} {r['decode_step_ms']:9.3f} "
          f"{floor if floor is not None else float('nan'):9.3f} "
          f"{100 * frac if frac is not None else float('nan'):7.1f}% {r.get('load_s', float('nan')):7.2f}")
PY
