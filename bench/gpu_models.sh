#!/usr/bin/env bash
# Whole-model speed on the lent GPU, orin beside Hugging Face transformers, one
# run: the CUDA backend issue's baseline and the decode issue's table.
#
#   bash bench/gpu_models.sh BUILD_DIR [WORK_DIR]
#
# Writes Qwen3-8B- and Qwen2.5-7B-shaped folders (random weights, real shapes:
# bench/make_shaped_model.py --fast) into WORK_DIR (default /tmp/orin-shaped),
# then for every shape x dtype x attention x graph x context: orin-run --bench
# (a prompt of CONTEXT tokens, GEN decoded; decode as a fraction of its floor:
# the weights + KV bytes a step reads over the device-to-device copy bandwidth
# measured in the same process; load time); and transformers' generate on the
# same folders (512-token prompt, 64 decoded; bench/torch_gpu_generate.py).
# Environment (space-separated lists): SHAPES ("qwen3-8b qwen2.5-7b"), DTYPES
# ("f16 bf16"), ATTENTIONS ("fa2 mha"), GRAPHS ("true false"), CONTEXTS ("512
# 8192"), GEN (128), REPEATS (1, after an untimed warm-up), HF (1; 0 skips it),
# QUANTS ("none"; "int8": model.quant = int8 on the float folder; "awq": an
# AWQ int4 folder of the shape, group 128, make_shaped_model.py --awq 128),
# PDLS ("1"; "1 0" also runs with ORIN_PDL=0: no programmatic dependent launch),
# PREFILL_CHUNKS ("512": runtime.prefill_chunk; a quantized matmul dequantizes
# its weights once per chunk), ORIN_ARGS (more orin-run arguments, e.g.
# "--set plugins.dir=DIR" for a plugin built with other -D tunables).
# Prints one JSON line per row as it goes and the table last.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: gpu_models.sh BUILD_DIR [WORK_DIR]}
work=${2:-/tmp/orin-shaped}
gen=${GEN:-128}
mkdir -p "$work"
rows=()
# make_folder DIR SHAPE [ARGS...]: the shaped folder, unless it is there.
make_folder() {
  local dir=$1 shape=$2
  shift 2
  [ -f "$dir/config.json" ] && return 0
  SECONDS=0
  python3 bench/make_shaped_model.py "$shape" "$dir" "$@" >/dev/null 2>&1 ||
    { echo "make $dir failed" >&2; return 1; }
  echo "made $dir in ${SECONDS} s" >&2
}
for shape in ${SHAPES:-qwen3-8b qwen2.5-7b}; do
  dir="$work/$shape"
  make_folder "$dir" "$shape" --fast || continue
  for dt in ${DTYPES:-f16 bf16}; do
    for quant in ${QUANTS:-none}; do
      qdir=$dir qset=()
      [ "$quant" = int8 ] && qset=(--set model.quant=int8)
      if [ "$quant" = awq ]; then
        qdir="$work/$shape-awq"
        make_folder "$qdir" "$shape" --awq 128 || continue
      fi
      for att in ${ATTENTIONS:-fa2 mha}; do
        for graph in ${GRAPHS:-true false}; do
          for pdl in ${PDLS:-1}; do
           for chunk in ${PREFILL_CHUNKS:-512}; do
            for ctx in ${CONTEXTS:-512 8192}; do
              line=$(ORIN_PDL=$pdl "$build/orin-run" --set model.path="$qdir" --bench --json \
                --set runtime.device=cuda --set model.dtype="$dt" --set attention.backend="$att" \
                --set runtime.cuda_graph="$graph" --set runtime.max_context=$((ctx + gen + 8)) \
                --set bench.prompt_tokens="$ctx" --set bench.gen_tokens="$gen" \
                --set bench.repeats="${REPEATS:-1}" --set runtime.prefill_chunk="$chunk" \
                "${qset[@]}" ${ORIN_ARGS:-} 2>&1 | tail -1)
              echo "orin $shape graph=$graph pdl=$pdl chunk=$chunk $line"
              rows+=("orin|$shape|$graph|$pdl|$chunk|$line")
            done
           done
          done
        done
      done
    done
    if [ "${HF:-1}" = 1 ]; then
      line=$(python3 bench/torch_gpu_generate.py "$dir" --dtypes "$dt" --repeats 1 2>/dev/null | tail -1)
      echo "hf $shape $line"
      rows+=("hf|$shape|-|-|-|$line")
    fi
  done
done
echo
python3 - "${rows[@]}" <<'PY'
import json, sys
print(f"{'engine':13s} {'shape':11s} {'dtype':5s} {'wts':5s} {'attn':4s} {'graph':5s} {'pdl':3s} {'chunk':>5s} {'ctx':>5s} "
      f"{'prefill tok/s':>13s} {'decode tok/s':>12s} {'ms/token':>9s} {'floor ms':>9s} "
      f"{'of floor':>8s} {'load s':>7s}")
for row in sys.argv[1:]:
    engine, shape, graph, pdl, chunk, text = row.split("|", 5)
    try:
        r = json.loads(text)
    except ValueError:
        print(f"{engine:13s} {shape:11s} failed: {text[:110]}")
        continue
    nan = float("nan")
    frac, floor = r.get("decode_roofline_fraction"), r.get("decode_floor_ms")
    name = engine if engine == "orin" else r.get("engine", "hf")[:13]
    print(f"{name:13s} {shape:11s} {r['dtype']:5s} {r.get('weights', '-')[:5]:5s} "
          f"{r.get('attention', 'sdpa')[:4]:4s} "
          f"{graph:5s} {pdl:3s} {chunk:>5s} {r['prompt_tokens']:5d} {r['prefill_tok_s']:13.1f} "
          f"{r['decode_tok_s']:12.2f} {r['decode_step_ms']:9.3f} "
          f"{floor if floor is not None else nan:9.3f} "
          f"{100 * frac if frac is not None else nan:7.1f}% {r.get('load_s', nan):7.2f}")
PY
