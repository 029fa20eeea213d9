#!/usr/bin/env bash
# orin-run on broken model folders: each must exit 2 (a load failure) with
# exactly one line on stderr that names the broken file and the reason, in
# generate, --score and --tokenize modes alike; bad configuration exits 1
# with one line naming the key.
#   test_fault_cli.sh ORIN_RUN MODEL_DIR   (MODEL_DIR: qwen3-tiny)
set -u
run=$1 model=$2
tmp=$(mktemp -d /tmp/orin-fault-cli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
text=$tmp/text.txt
printf 'Hello there, how are you?\n' >"$text"

fail() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }

# check NAME WANT_RC NEEDLE... -- ARGS: runs orin-run ARGS, wants exit WANT_RC
# and one stderr line holding every NEEDLE.
check() {
    local name=$1 want=$2; shift 2
    local needles=()
    while [ "$1" != "--" ]; do needles+=("$1"); shift; done
    shift
    "$run" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
    local rc=$? lines
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -ne "$want" ]; then
        fail "$name: exit $rc, want $want; stderr: $(cat "$tmp/err")"; return
    fi
    if [ "$lines" -ne 1 ]; then
        fail "$name: $lines lines on stderr, want 1:"; cat "$tmp/err" >&2; return
    fi
    for n in "${needles[@]}"; do
        if ! grep -qF -- "$n" "$tmp/err"; then
            fail "$name: stderr lacks '$n': $(cat "$tmp/err")"; return
        fi
    done
    echo "ok: $name: $(cat "$tmp/err")"
    passed=$((passed + 1))
}

# broken NAME: a fresh copy of the model in $tmp/NAME.
broken() { rm -rf "${tmp:?}/$1"; cp -r "$model" "$tmp/$1"; echo "$tmp/$1"; }

# load_fails NAME NEEDLE...: the folder $tmp/NAME fails in every mode that loads it.
load_fails() {
    local name=$1; shift
    local dir=$tmp/$name
    local common=(--set "model.path=$dir" --set generate.max_tokens=2 --set generate.temperature=0)
    check "$name (generate)" 2 "$@" -- "${common[@]}" -p hi
    check "$name (score)" 2 "$@" -- "${common[@]}" --score "$text"
}

# A shard cut at 4 KiB (data) and inside its header.
d=$(broken truncated-data)
truncate -s 4096 "$d/model-00002-of-00004.safetensors"
load_fails truncated-data model-00002-of-00004.safetensors
d=$(broken truncated-header)
truncate -s 100 "$d/model-00003-of-00004.safetensors"
load_fails truncated-header model-00003-of-00004.safetensors

# A shard missing.
d=$(broken missing-shard)
rm "$d/model-00004-of-00004.safetensors"
load_fails missing-shard model-00004-of-00004.safetensors

# The index is not JSON; the index sends a tensor outside the folder.
d=$(broken bad-index)
printf '{"weight_map": {' >"$d/model.safetensors.index.json"
load_fails bad-index model.safetensors.index.json
d=$(broken escaping-index)
sed -i 's#"model-00001-of-00004.safetensors"#"../../etc/passwd"#' "$d/model.safetensors.index.json"
load_fails escaping-index model.safetensors.index.json

# config.json: not JSON; an unsupported architecture; shapes that disagree
# with the weights (the tensor and both shapes named).
d=$(broken bad-config)
printf '{"architectures": ["Qwen3ForCausalLM"], ' >"$d/config.json"
load_fails bad-config config.json
d=$(broken arch)
sed -i 's/Qwen3ForCausalLM/LlamaForCausalLM/' "$d/config.json"
load_fails arch config.json LlamaForCausalLM
d=$(broken shapes)
sed -i 's/"intermediate_size": 192/"intermediate_size": 200/' "$d/config.json"
load_fails shapes mlp.gate_proj.weight "[200, 64]"
d=$(broken fewer-layers)
sed -i 's/"num_hidden_layers": 3/"num_hidden_layers": 2/' "$d/config.json"
load_fails fewer-layers model.layers.2. num_hidden_layers
d=$(broken more-layers)
sed -i 's/"num_hidden_layers": 3/"num_hidden_layers": 5/' "$d/config.json"
load_fails more-layers "missing tensor 'model.layers.3."

# tokenizer.json: a WordPiece model; cut short; missing.
d=$(broken wordpiece)
python3 - "$d/tokenizer.json" <<'PY'
import json, sys
p = sys.argv[1]
t = json.load(open(p))
t["model"]["type"] = "WordPiece"
json.dump(t, open(p, "w"))
PY
load_fails wordpiece tokenizer.json WordPiece
check "wordpiece (tokenize)" 2 tokenizer.json WordPiece -- --set "model.path=$d" --tokenize "$text"
d=$(broken cut-tokenizer)
truncate -s 5000 "$d/tokenizer.json"
load_fails cut-tokenizer tokenizer.json
d=$(broken no-tokenizer)
rm "$d/tokenizer.json"
load_fails no-tokenizer tokenizer.json
check "no-tokenizer (tokenize)" 2 tokenizer.json -- --set "model.path=$d" --tokenize "$text"

# No model folder at all.
check "a file, not a folder" 2 "not a folder" -- --set "model.path=$text" -p hi
check "missing folder" 2 "model.path = '$tmp/absent': No such file" -- --set "model.path=$tmp/absent" -p hi

# Configuration errors: exit 1, one line naming the key or the file.
check "bad key" 1 generate.max_tokenz max_tokens -- --set generate.max_tokenz=3
check "bad value" 1 generate.top_p -- --set generate.top_p=7
printf '[model]\npath = x\n[modle]\ndtype = f32\n' >"$tmp/bad.ini"
check "bad section" 1 "$tmp/bad.ini:4" modle -- --config "$tmp/bad.ini"
check "missing ini" 1 "$tmp/absent.ini" -- --config "$tmp/absent.ini"
# A backend no loaded plugin provides is a typo, not a silent fallback; the
# line lists the providers there are.
check "unknown backend" 1 attention.backend fa9 fa2 mha -- --set "model.path=$model" \
    --set attention.backend=fa9 -p hi
check "backend not loaded" 1 attention.backend "providers: mha" -- --set "model.path=$model" \
    --set plugins.load=ops_common,attention_mha --set attention.backend=fa2 -p hi

# Output that cannot be written (a full disk) is an error in every mode, never
# a 0 exit over a partial result.
full() {
    local name=$1; shift
    "$run" --set "model.path=$model" --set runtime.threads=1 "$@" </dev/null >/dev/full \
        2>"$tmp/err"
    local rc=$?
    if [ "$rc" -ne 3 ] || ! grep -q "orin-run: stdout: write failed" "$tmp/err"; then
        fail "$name to /dev/full: exit $rc; stderr: $(cat "$tmp/err")"; return
    fi
    echo "ok: $name to /dev/full: $(grep 'write failed' "$tmp/err")"
    passed=$((passed + 1))
}
full generate -p hi --set generate.max_tokens=3
full score --score "$text"
full tokenize --tokenize "$text"
full list-plugins --list-plugins
full bench --bench --json --set bench.prompt_tokens=8 --set bench.gen_tokens=2 \
    --set bench.repeats=1

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
