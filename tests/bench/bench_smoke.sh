#!/usr/bin/env bash
# The GPU benchmarks' own plumbing, not their figures: attention_bench --json
# prints one JSON object a line, its decode row (fa2, one short cache) has a
# graph time, and its prefill row a positive eager time over --runs calls (a
# bench_open that dropped the caller's json or runs broke both, unseen, in
# 3a36965). Exit 77 without a GPU (attention_bench's own).
#
#   bench_smoke.sh ATTENTION_BENCH
set -uo pipefail
bench=${1:?usage: bench_smoke.sh ATTENTION_BENCH}
out=$("$bench" --json --providers fa2 --dtypes f16 --lens 512 --decode-lens 64 --runs 20 2>&1)
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "attention_bench: exit $rc: $out"; exit 1; }
printf '%s\n' "$out" | python3 -c '
import json, sys
rows = []
for n, line in enumerate(sys.stdin, 1):
    try:
        rows.append(json.loads(line))
    except ValueError:
        sys.exit(f"line {n} is not JSON: {line.strip()[:120]}")
decode = [r for r in rows if r.get("op") == "decode" and r.get("kv_len") == 64]
prefill = [r for r in rows if r.get("op") == "prefill" and r.get("seq") == 512]
if not decode or decode[0].get("status") != "ok" or not decode[0].get("graph_us", 0) > 0:
    sys.exit(f"no decode row at kv_len 64 with a graph time: {decode}")
if not prefill or prefill[0].get("status") != "ok" or not prefill[0].get("ms", 0) > 0:
    sys.exit(f"no prefill row at 512 with a positive time: {prefill}")
d, p = decode[0], prefill[0]
print("%d JSON rows; decode 64: graph %s us; prefill 512: %s ms" % (len(rows), d["graph_us"], p["ms"]))
'
