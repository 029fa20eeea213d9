#!/usr/bin/env bash
# Qwen3-VL-8B on the lent GPU, orin beside Hugging Face transformers: the
# benchmark of the Qwen3-VL issue (18). One 1,024 x 768 image with a short
# prompt: time to first token with its parts (image preprocessing, vision
# encoder, prefill) and decode tok/s; decode with the image beside orin's
# text-only Qwen3-8B decode at the same context.
#
#   bash bench/gpu_vl.sh [BUILD_DIR [WORK_DIR]]
#
# BUILD_DIR (default build-gpu): orin's build with CUDA. orin-run and the
# plugins are (re)built there first: incrementally where the folder is
# configured, else configured as scripts/gpu-test.sh does (the carried .deps/
# unpacked into /tmp/orin-deps, CUDA for this GPU only). BUILD=0 skips that.
# WORK_DIR (default /tmp/orin-shaped, bench/gpu_models.sh's): the shaped
# folders, made unless there: qwen3-vl-8b (Qwen3-VL-8B-Instruct's shapes,
# random weights, `make_shaped_model.py --fast`, 17.5 GB) and qwen3-8b (the
# text model, 16.4 GB), and the test image (bench/vl_test_image.py).
#
# Per dtype:
#   orin, image   orin-run -i --json fed "/image IMG", the prompt, "/reset",
#                 REPEATS + 1 times (the first turn is the warm-up; every turn
#                 prefills the whole prompt again); greedy, GEN tokens (the
#                 folder's lm_head rows of the end tokens are 0, so no turn
#                 ends early). Its stats line gives image_preprocess_ms (PNG
#                 decode + preprocessing), vision_ms (the vision encoder),
#                 vision_prefill_ms (encoder + the language model's prefill),
#                 ttft_ms (from the prefill's start, encoder included, to the
#                 first token) and decode_tok_s (decode steps per second).
#   orin, text    orin-run --bench on qwen3-8b with as many prompt tokens as
#                 the image prompt has, GEN decoded: the text-only decode.
#   transformers  bench/torch_vl_generate.py: preprocess, vision, prefill,
#                 TTFT, decode on the same folder and image (sdpa).
# TTFT = preprocessing + the time to the first token, for both engines.
# Targets (issue 18): TTFT orin/torch <= 0.5; decode with the image / text-only
# decode >= 0.95.
#
# Environment: DTYPES ("f16 bf16"), REPEATS (3), GEN (64), ATTENTION (fa2),
# ORIN_VL_ARGS (more orin-run arguments for the image runs, e.g. -v: the
# vision encoder's phases in orin-vl-DT.log),
# PROMPT ("Describe this image."), HF (1; 0 skips transformers), BUILD (1),
# DEVICE (cuda; cpu runs the whole script on the host, to try it out, e.g.
# DEVICE=cpu VL_SHAPE=qwen3-vl-test TEXT_SHAPE=qwen3-0.6b DTYPES=f32 GEN=8
# REPEATS=1 bash bench/gpu_vl.sh build /tmp/vl-try), VL_SHAPE (qwen3-vl-8b), TEXT_SHAPE (qwen3-8b), MAX_CONTEXT
# (2048). Logs go to $OUT (else a new temporary folder); one line per run as
# it goes, the table last. About 5 minutes on an H100 with the folders to
# make, the build already there.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${1:-build-gpu}
work=${2:-/tmp/orin-shaped}
out=${OUT:-$(mktemp -d /tmp/orin-gpu-vl.XXXXXX)}
gen=${GEN:-64}
repeats=${REPEATS:-3}
att=${ATTENTION:-fa2}
prompt=${PROMPT:-Describe this image.}
device=${DEVICE:-cuda}
vl_shape=${VL_SHAPE:-qwen3-vl-8b}
text_shape=${TEXT_SHAPE:-qwen3-8b}
max_ctx=${MAX_CONTEXT:-2048}
torch_device=cuda:0
[ "$device" = cpu ] && torch_device=cpu
mkdir -p "$work" "$out"
echo "logs: $out" >&2
SECONDS=0

# ---- build -----------------------------------------------------------------
prefix=/tmp/orin-deps
if [ "${BUILD:-1}" = 1 ]; then
  if [ -d .deps ] && [ ! -d "$prefix/usr" ]; then
    bash scripts/fetch-deps.sh --unpack "$prefix" >/dev/null || { echo "unpacking .deps failed" >&2; exit 1; }
  fi
  if [ ! -f "$build/CMakeCache.txt" ]; then
    archs=${ORIN_CUDA_ARCHS:-}
    if [ -z "$archs" ] && command -v nvidia-smi >/dev/null; then
      cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
      archs=$([ "$cc" = 90 ] && echo 90a || echo "$cc")
    fi
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      ${archs:+-DORIN_CUDA_ARCHS="$archs"} -DCMAKE_PREFIX_PATH="$prefix/usr" \
      >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  fi
  cmake --build "$build" -j "$(nproc)" --target orin-run ops_common attention_mha attention_fa1 \
    attention_fa2 >"$out/build.log" 2>&1 ||
    { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
  echo "build ready after ${SECONDS} s" >&2
fi
if [ -d "$prefix/usr/lib/x86_64-linux-gnu" ]; then
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
fi
[ -x "$build/orin-run" ] || { echo "$build/orin-run: not built" >&2; exit 1; }

# ---- folders and the image -------------------------------------------------
# make_folder DIR SHAPE: the shaped folder (--fast), unless it is there.
make_folder() {
  local dir=$1 shape=$2 t0=$SECONDS
  [ -f "$dir/config.json" ] && return 0
  python3 bench/make_shaped_model.py --fast "$shape" "$dir" >"$out/make-$shape.log" 2>&1 ||
    { echo "make $dir failed (see $out/make-$shape.log)" >&2; return 1; }
  echo "made $dir in $((SECONDS - t0)) s" >&2
}
vl="$work/$vl_shape"
txt="$work/$text_shape"
make_folder "$vl" "$vl_shape" & p1=$!
make_folder "$txt" "$text_shape" & p2=$!
wait $p1 || exit 1
wait $p2 || txt=
img="$work/vl-test-1024x768.png"
python3 bench/vl_test_image.py "$img" || exit 1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >"$out/gpu.txt"

orin_common=(--set runtime.device="$device" --set attention.backend="$att"
             --set runtime.max_context="$max_ctx")
rows=()
for dt in ${DTYPES:-f16 bf16}; do
  # ---- orin, one image, REPEATS + 1 turns ----
  t0=$SECONDS
  for _ in $(seq 0 "$repeats"); do printf '/image %s\n%s\n/reset\n' "$img" "$prompt"; done |
    "$build/orin-run" --set model.path="$vl" "${orin_common[@]}" --set model.dtype="$dt" \
      --set generate.temperature=0 --set generate.max_tokens="$gen" -i --json ${ORIN_VL_ARGS:-} \
      >"$out/orin-vl-$dt.txt" 2>"$out/orin-vl-$dt.log"
  rc=$?
  grep '^{' "$out/orin-vl-$dt.log" >"$out/orin-vl-$dt.jsonl"
  echo "orin image $dt (rc $rc, $((SECONDS - t0)) s): $(tail -1 "$out/orin-vl-$dt.jsonl")"
  [ $rc = 0 ] || tail -5 "$out/orin-vl-$dt.log" >&2
  prompt_tokens=$(python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(rows[-1]["prompt_tokens"] if rows else 782)' "$out/orin-vl-$dt.jsonl" 2>/dev/null || echo 782)
  rows+=("orin-vl|$dt|$out/orin-vl-$dt.jsonl")

  # ---- orin, text only, the same context ----
  if [ -n "$txt" ]; then
    t0=$SECONDS
    "$build/orin-run" --set model.path="$txt" --bench --json "${orin_common[@]}" \
      --set model.dtype="$dt" --set bench.prompt_tokens="$prompt_tokens" \
      --set bench.gen_tokens="$gen" --set bench.repeats="$repeats" \
      >"$out/orin-text-$dt.txt" 2>"$out/orin-text-$dt.log"
    rc=$?
    echo "orin text $dt (rc $rc, $((SECONDS - t0)) s): $(tail -1 "$out/orin-text-$dt.txt")"
    [ $rc = 0 ] || tail -5 "$out/orin-text-$dt.log" >&2
    rows+=("orin-text|$dt|$out/orin-text-$dt.txt")
  fi

  # ---- transformers ----
  if [ "${HF:-1}" = 1 ]; then
    t0=$SECONDS
    python3 bench/torch_vl_generate.py "$vl" "$img" --dtype "$dt" --max-new-tokens "$gen" \
      --repeat "$repeats" --prompt "$prompt" --device "$torch_device" \
      >"$out/torch-vl-$dt.txt" 2>"$out/torch-vl-$dt.log"
    rc=$?
    echo "torch image $dt (rc $rc, $((SECONDS - t0)) s): $(tail -1 "$out/torch-vl-$dt.txt")"
    [ $rc = 0 ] || tail -5 "$out/torch-vl-$dt.log" >&2
    rows+=("torch-vl|$dt|$out/torch-vl-$dt.txt")
  fi
done
echo "total ${SECONDS} s" >&2
echo
python3 - "$vl_shape" "$text_shape" "$out" "${rows[@]}" <<'PY' | tee "$out/table.txt"
import json, statistics, sys

vl_shape, text_shape, out = sys.argv[1:4]
nan = float("nan")


def jsonl(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{")]
    except (OSError, ValueError):
        return []


def med(rows, key):
    v = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(v) if v else nan


res = {}
for row in sys.argv[4:]:
    kind, dt, path = row.split("|", 2)
    rows = jsonl(path)
    if kind == "orin-vl":
        rows = rows[1:] if len(rows) > 1 else rows  # the first turn is the warm-up
        if rows:
            res[(kind, dt)] = dict(
                prompt=rows[-1]["prompt_tokens"], generated=rows[-1]["generated_tokens"],
                turns=len(rows), pre=med(rows, "image_preprocess_ms"),
                vis=med(rows, "vision_ms"), vis_pre=med(rows, "vision_prefill_ms"),
                first=med(rows, "ttft_ms"), decode=med(rows, "decode_tok_s"))
    elif rows:
        res[(kind, dt)] = rows[-1]

dtypes = sorted({dt for _, dt in res}, key=lambda d: ("f16", "bf16", "f32").index(d)
                if d in ("f16", "bf16", "f32") else 9)


def f(x, w=9, p=1):
    return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) and x == x else f"{'-':>{w}s}"


print(f"{vl_shape}, one 1,024 x 768 image + a short prompt; times in ms (medians)")
print(f"{'engine':6s} {'dtype':5s} {'prompt':>6s} {'preproc':>9s} {'vision':>10s} "
      f"{'prefill':>10s} {'vis+pref':>9s} {'1st tok':>9s} {'TTFT':>9s} {'decode/s':>9s}")
summary = []
for dt in dtypes:
    o, t, x = res.get(("orin-vl", dt)), res.get(("torch-vl", dt)), res.get(("orin-text", dt))
    o_ttft = t_ttft = nan
    if o:
        o_ttft = o["pre"] + o["first"]
        print(f"{'orin':6s} {dt:5s} {o['prompt']:6d} {f(o['pre'])} {' ' + f(o['vis'])} "
              f"{' ' + f(o['vis_pre'] - o['vis'])} {f(o['vis_pre'])} {f(o['first'])} "
              f"{f(o_ttft)} {f(o['decode'], 9, 2)}")
    else:
        print(f"{'orin':6s} {dt:5s} failed")
    if t:
        t_ttft = t["ttft_ms"]
        print(f"{'torch':6s} {dt:5s} {t['prompt_tokens']:6d} {f(t['preprocess_ms'])} "
              f"{' ' + f(t['vision_ms'])} {' ' + f(t['prefill_ms'])} {f(t['forward_ms'])} "
              f"{f(t['first_token_ms'])} {f(t_ttft)} {f(t['decode_tok_s'], 9, 2)}")
    elif ("torch-vl", dt) not in res:
        print(f"{'torch':6s} {dt:5s} not run or failed")
    ttft_ratio = o_ttft / t_ttft if o and t else nan
    dec_ratio = o["decode"] / x["decode_tok_s"] if o and x and x.get("decode_tok_s") else nan
    summary.append((dt, o, t, x, ttft_ratio, dec_ratio))

print()
for dt, o, t, x, ttft_ratio, dec_ratio in summary:
    verdict = lambda ok: "" if ok != ok else ("  (met)" if ok else "  (NOT met)")
    print(f"{dt}: TTFT orin/torch {f(ttft_ratio, 5, 3).strip()} (target <= 0.5)"
          f"{verdict(ttft_ratio <= 0.5 if ttft_ratio == ttft_ratio else nan)}")
    if x:
        print(f"{dt}: decode with the image {f(o['decode'] if o else nan, 1, 2).strip()} tok/s, "
              f"{text_shape} text-only {x['decode_tok_s']:.2f} tok/s at {x['prompt_tokens']} "
              f"prompt + {x['gen_tokens']} tokens ({100 * x.get('decode_roofline_fraction', nan):.1f} % "
              f"of its floor, copy bandwidth {x.get('bandwidth_gbs', nan):.0f} GB/s): ratio "
              f"{f(dec_ratio, 5, 3).strip()} (target >= 0.95)"
              f"{verdict(dec_ratio >= 0.95 if dec_ratio == dec_ratio else nan)}")
    if o and t and o["prompt"] != t["prompt_tokens"]:
        print(f"{dt}: WARNING: prompt lengths differ (orin {o['prompt']}, "
              f"transformers {t['prompt_tokens']})")
    if t and t.get("warning"):
        print(f"{dt}: transformers: {t['warning']}")
print()
print("orin: preproc = PNG decode + preprocessing (image_preprocess_ms); vision = the "
      "encoder (vision_ms); prefill = the language model's (vision_prefill_ms - vision_ms); "
      "1st tok = prefill start (encoder included) to the first token (ttft_ms); TTFT = "
      "preproc + 1st tok; decode/s = decode steps per second (decode_tok_s).")
print("torch: preproc = image file + chat template + processor + to GPU; vision = "
      "get_image_features; vis+pref = one forward with the image; prefill = forward - vision; "
      "1st tok = generate(max_new_tokens=1); decode = (generate(N) - generate(1)) / (N - 1).")
print(f"logs: {out}")
PY
