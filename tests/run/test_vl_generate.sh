#!/usr/bin/env bash
# Images in orin-run (issue 18): greedy generation with the tiny Qwen3-VL and
# image1.png gives ref_vl_generate.json's tokens; a text prompt to the VL
# folder runs; the stats carry the image times; a chat turn with /image.
#   usage: test_vl_generate.sh ORIN_RUN TEST_DATA
set -u
orin_run=$1
data=$2
model=$data/models/qwen3vl-tiny
ref=$model/ref_vl_generate.json
tmp=$(mktemp -d /tmp/orin-vl-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() { # check NAME CONDITION-EXIT-CODE
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1" >&2; fi
}
run() { "$orin_run" --set model.path="$model" --set runtime.device=cpu \
          --set generate.temperature=0 "$@"; }
field() { python3 -c "import json,sys;print(json.load(open('$ref'))['$1'])"; }

# The reference's prompt: the user turn's text after its image.
prompt=$(python3 -c "import json;m=json.load(open('$ref'))['messages'][0]['content'];print([p['text'] for p in m if p['type']=='text'][0])")
n_gen=$(python3 -c "import json;print(len(json.load(open('$ref'))['generated_ids']))")
ids_json=$(python3 -c "import json;print(json.dumps(json.load(open('$ref'))['generated_ids']))")
# The expected text is the reference ids decoded by orin's tokenizer: orin-run
# prints text, and --tokenize of that text gives the ids back (checked below).
run -p "$prompt" --image "$data/vision/image1.png" --set generate.max_tokens="$n_gen" \
  --set generate.stream=false --json >"$tmp/out" 2>"$tmp/err"
check "greedy with an image runs" $?
head -c -1 "$tmp/out" >"$tmp/text" # the reply without its final newline
run --tokenize "$tmp/text" >"$tmp/ids" 2>/dev/null
python3 - "$tmp/ids" "$ids_json" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))
exp = json.loads(sys.argv[2])
sys.exit(0 if got == exp else print(f"tokens {got} != reference {exp}") or 1)
PY
check "greedy tokens equal ref_vl_generate.json" $?
python3 - "$tmp/err" "$(field prompt_ids | python3 -c 'import sys,ast;print(len(ast.literal_eval(sys.stdin.read())))')" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
ok = (s["images"] == 1 and s["prompt_tokens"] == int(sys.argv[2]) and
      s["image_preprocess_ms"] > 0 and s["vision_ms"] > 0 and
      s["vision_prefill_ms"] > s["vision_ms"] and s["generated_tokens"] >= 1)
sys.exit(0 if ok else print(s) or 1)
PY
check "json stats: images, prompt tokens with the pads, image times" $?

# generate.image in an INI, relative to its folder; the plain stats line.
mkdir -p "$tmp/ini" && cp "$data/vision/image1.png" "$tmp/ini/cat.png"
printf '[generate]\nimage = cat.png\n' >"$tmp/ini/vl.ini"
"$orin_run" --config "$tmp/ini/vl.ini" --set model.path="$model" --set runtime.device=cpu \
  --set generate.temperature=0 -p "$prompt" --set generate.max_tokens="$n_gen" \
  --set generate.stream=false >"$tmp/out2" 2>"$tmp/err"
cmp -s "$tmp/out" "$tmp/out2"; check "generate.image gives the --image reply" $?
grep -q "1 image: preprocess [0-9.]* ms, vision encoder [0-9.]* ms" "$tmp/err"
check "stats line: image times" $?

# --profile: the vision encoder's table after the decode steps' (one run an
# encoder call), the same reply as without it.
run -p "$prompt" --image "$data/vision/image1.png" --set generate.max_tokens="$n_gen" \
  --set generate.stream=false --profile >"$tmp/out3" 2>"$tmp/err"
cmp -s "$tmp/out2" "$tmp/out3" && grep -q "^vision encoder (a run is one call of it):" "$tmp/err" &&
  grep -q "^profile: 1 runs on cpu" "$tmp/err" && grep -q "^attention (attention.full, " "$tmp/err" &&
  grep -q "^fc1 (matmul, " "$tmp/err"
check "--profile with an image: the vision encoder's ops, the same reply" $?

# --max-pixels shrinks the image: fewer pad tokens in the prompt.
run -p "$prompt" --image "$data/vision/image1.png" --max-pixels 3136 \
  --set generate.max_tokens=1 --json >/dev/null 2>"$tmp/err"
small=$(python3 -c "import json;print(json.loads(open('$tmp/err').read().strip().splitlines()[-1])['prompt_tokens'])")
[ "$small" -lt "$(field prompt_ids | python3 -c 'import sys,ast;print(len(ast.literal_eval(sys.stdin.read())))')" ]
check "--max-pixels lowers the image's tokens" $?

# Two images in one turn.
run -p "Compare." --image "$data/vision/image1.png" --image "$data/vision/image2.png" \
  --set generate.max_tokens=2 --json >/dev/null 2>"$tmp/err"
grep -q '"images": 2' "$tmp/err"; check "two --image" $?

# A text prompt to the VL folder, in chat: text turns, then /image, then text.
printf 'Hello\n/image %s\nDescribe this image.\nAnd now?\n' "$data/vision/image1.png" |
  run -i --set generate.max_tokens=3 --json >"$tmp/out" 2>"$tmp/err"
check "chat with /image exits 0" $?
python3 - "$tmp/err" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ok = (len(lines) == 3 and [l["images"] for l in lines] == [0, 1, 0]
      # the image turn reuses the first turn's cache, the next one the image turn's
      and lines[1]["prefilled_tokens"] < lines[1]["prompt_tokens"]
      and lines[2]["prefilled_tokens"] < lines[2]["prompt_tokens"])
sys.exit(0 if ok else print(lines) or 1)
PY
check "chat: /image joins the next turn; the cache is reused around it" $?
grep -q "\[image 1 for the next turn" "$tmp/err"; check "/image says it was added" $?
printf '/image /nonexistent.png\nHello\n' | run -i --set generate.max_tokens=2 >/dev/null 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "/nonexistent.png" "$tmp/err"; check "/image with a bad file: one line, the chat goes on" $?

# --bench with images: the prompt is the images (start, pads, end) and the
# prompt tokens; the JSON carries the image times; a text-only model exits 1.
run --bench --json --set bench.prompt_tokens=8 --set bench.gen_tokens=3 \
  --set bench.repeats=2 --image "$data/vision/image1.png" --image "$data/vision/image2.png" \
  >"$tmp/out" 2>"$tmp/err"
check "--bench with two images exits 0" $?
python3 - "$tmp/out" "$data/vision/pixel_values.json" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
images = json.load(open(sys.argv[2]))["images"]
# image1 and image2's grids, merged 2 x 2: their pad counts
pads = sum(g[0] * g[1] * g[2] // 4
           for g in (images["image1"]["image_grid_thw"], images["image2"]["image_grid_thw"]))
ok = (s["images"] == 2 and s["prompt_tokens"] == 8 + 2 * 2 + pads and s["vision_ms"] > 0 and
      s["image_preprocess_ms"] > 0 and s["ttft_ms"] > s["vision_ms"] and s["decode_tok_s"] > 0)
sys.exit(0 if ok else print(s, pads) or 1)
PY
check "--bench with images: prompt = 8 + starts/ends + pads, image times" $?
"$orin_run" --set model.path="$data/models/qwen3-tiny" --set runtime.device=cpu --bench \
  --image "$data/vision/image1.png" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "not a vision-language model" "$tmp/err"
check "--bench --image with a text model: exit 1" $?

# A folder without preprocessor_config.json: exit 2, naming the file.
cp -r "$model" "$tmp/noproc" && rm "$tmp/noproc/preprocessor_config.json"
"$orin_run" --set model.path="$tmp/noproc" --set runtime.device=cpu -p hi \
  --image "$data/vision/image1.png" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "preprocessor_config.json" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ]
check "no preprocessor_config.json: exit 2, one line" $?

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
