#!/usr/bin/env bash
# stream_probe's plumbing, not its figures: two sizes give a row for each of
# the three variants, each with a positive time. Exit 77 without a GPU or on
# one before sm_90 (stream_probe's own).
#
#   stream_probe_smoke.sh STREAM_PROBE
set -uo pipefail
probe=${1:?usage: stream_probe_smoke.sh STREAM_PROBE}
out=$("$probe" --sizes 1,4 2>&1)
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "stream_probe: exit $rc: $out"; exit 1; }
rows=$(printf '%s\n' "$out" | awk '$1 ~ /^(full|registers|bulk)$/ && $2 + 0 > 0 && $3 == "MB" && $4 + 0 > 0 && $5 == "us"' | wc -l)
[ "$rows" -eq 6 ] || { echo "stream_probe: $rows rows with a time of 6: $out"; exit 1; }
printf '%s\n' "$out" | head -1
