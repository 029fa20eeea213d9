#!/usr/bin/env bash
# orin-run in every mode, and on its error exits, under the sanitizer build:
# each run must end with the expected exit code and no report from
# AddressSanitizer, LeakSanitizer or UndefinedBehaviorSanitizer on stderr.
# Registered only in the ORIN_SANITIZE tree (label "sanitize").
#   test_lsan_modes.sh ORIN_RUN MODELS_DIR   (tests/data/models)
set -u
run=$1 models=$2
# No EXIT trap: a trap is still set in the children bash forks before they
# exec, and one of them caught in interrupt()'s signalling would run it.
tmp=$(mktemp -d /tmp/orin-lsan.XXXXXX)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
case ":$ASAN_OPTIONS:" in
    *:detect_leaks=0:*) echo "LeakSanitizer is off in ASAN_OPTIONS" >&2; exit 1 ;;
esac
passed=0 failed=0
printf 'The quick brown fox jumps over the lazy dog.\n' >"$tmp/text.txt"
mkdir "$tmp/wordpiece"
cp -r "$models/qwen3-tiny/." "$tmp/wordpiece/"
sed -i 's/"type": *"BPE"/"type": "WordPiece"/' "$tmp/wordpiece/tokenizer.json"

# expect NAME RC [STDIN_TEXT] -- ARGS
expect() {
    local name=$1 want=$2 input=""; shift 2
    if [ "$1" != "--" ]; then input=$1; shift; fi
    shift
    printf '%b' "$input" | "$run" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if grep -qE 'Sanitizer|runtime error:' "$tmp/err"; then
        echo "FAIL: $name: sanitizer report (exit $rc):" >&2
        cat "$tmp/err" >&2
        failed=$((failed + 1))
    elif [ "$rc" -ne "$want" ]; then
        echo "FAIL: $name: exit $rc, want $want:" >&2
        tail -5 "$tmp/err" >&2
        failed=$((failed + 1))
    else
        echo "ok: $name (exit $rc)"
        passed=$((passed + 1))
    fi
}

# interrupt NAME -- ARGS: starts orin-run with a stdin that stays open, sends
# SIGINT once it has written output (or after 30 s), and wants exit 0 or 130
# with no sanitizer report: Ctrl-C exits release everything too.
interrupt() {
    local name=$1; shift 2
    rm -f "$tmp/in" "$tmp/tick"
    mkfifo "$tmp/in" "$tmp/tick"
    exec 3<>"$tmp/in" # a writer that never writes: stdin stays open, empty
    exec 4<>"$tmp/tick" # read -t on it sleeps without forking
    "$run" "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
    local pid=$! i=0
    while [ ! -s "$tmp/out" ] && [ "$i" -lt 600 ]; do read -r -t 0.05 -u 4; i=$((i + 1)); done
    kill -INT "$pid" 2>/dev/null
    wait "$pid"
    local rc=$?
    exec 3>&- 4>&-
    if grep -qE 'Sanitizer|runtime error:' "$tmp/err"; then
        echo "FAIL: $name: sanitizer report (exit $rc):" >&2
        cat "$tmp/err" >&2
        failed=$((failed + 1))
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ]; then
        echo "FAIL: $name: exit $rc, want 0 or 130:" >&2
        tail -5 "$tmp/err" >&2
        failed=$((failed + 1))
    else
        echo "ok: $name (exit $rc)"
        passed=$((passed + 1))
    fi
}

for m in qwen2-tiny qwen3-tiny; do
    base=(--set "model.path=$models/$m" --set generate.max_tokens=6 --set runtime.max_context=128)
    expect "$m generate greedy" 0 -- "${base[@]}" --set generate.temperature=0 -p "Hello"
    expect "$m generate sampled" 0 -- "${base[@]}" --set generate.seed=7 -p "Hello" --json \
        --verbose-prompt
    expect "$m generate no chat" 0 -- "${base[@]}" --set generate.chat=false -p "Once upon"
    expect "$m interactive" 0 'how are you?\nand then?\n' -- "${base[@]}" -i -p "hi"
    expect "$m score prefill" 0 -- "${base[@]}" --score "$tmp/text.txt"
    expect "$m score decode" 0 -- "${base[@]}" --set score.path=decode --score "$tmp/text.txt"
    expect "$m tokenize" 0 -- "${base[@]}" --tokenize "$tmp/text.txt"
    expect "$m bench" 0 -- "${base[@]}" --bench --set bench.prompt_tokens=8 \
        --set bench.gen_tokens=4 --set bench.repeats=1
    expect "$m bench json" 0 -- "${base[@]}" --bench --json --set bench.prompt_tokens=5 \
        --set bench.gen_tokens=3 --set bench.repeats=2 --set attention.backend=mha
done
q3=(--set "model.path=$models/qwen3-tiny")
interrupt "Ctrl-C while generating" -- "${q3[@]}" --set generate.max_tokens=100000 \
    --set runtime.max_context=2048 --set generate.temperature=0 -p Hello
interrupt "Ctrl-C at the chat prompt" -- "${q3[@]}" --set generate.max_tokens=3 -i -p hi
expect "list plugins" 0 -- --list-plugins
expect "list plugins json" 0 -- --list-plugins --json
expect "help" 0 -- --help
expect "version" 0 -- --version

# Error exits release what they had taken too.
expect "unknown option" 1 -- --lsit-plugins
expect "bad key" 1 -- --set generate.max_tokenz=3
expect "bad value" 1 -- --set generate.top_p=2
expect "missing config" 1 -- --config "$tmp/absent.ini"
expect "missing model" 2 -- --set "model.path=$tmp/absent" -p hi
expect "missing score file" 3 -- "${q3[@]}" --score "$tmp/absent.txt"
expect "missing tokenize file" 3 -- "${q3[@]}" --tokenize "$tmp/absent.txt"
expect "wordpiece tokenizer" 2 -- --set "model.path=$tmp/wordpiece" -p hi
expect "unknown backend" 1 -- "${q3[@]}" --set attention.backend=fa9 -p hi
expect "prompt over context" 3 -- "${q3[@]}" --set runtime.max_context=4 \
    -p "a prompt much longer than four tokens of context"

rm -rf "$tmp"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
