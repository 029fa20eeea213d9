#!/usr/bin/env bash
# stream_probe's plumbing, not its figures: two sizes give a row for each of
# the three variants, each with a positive time; --side gives the L2 row and a
# row a spin with its six times (none nan at 1 MB), at greatest priority too;
# --x-latency with --x-prefetch and --x-flags a row for each of its six
# ways, with no nan and positive spans, and --x-flags alone or a prefetch
# size that is not a number of bytes is refused; a prefetch chunk that is
# not a multiple of 16 is refused. Exit 77 without a GPU or on one before
# sm_90 (stream_probe's own).
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
for extra in "" --prefetch-priority; do
  side=$("$probe" --sizes 1 --side 0,2 $extra 2>&1) || { echo "stream_probe --side $extra: $side"; exit 1; }
  hot=$(printf '%s\n' "$side" | grep -c '^read, L2 hot .* us .* GB/s$')
  spins=$(printf '%s\n' "$side" | awk '$1 == "spin" && /link/ && /side prefetch/ && /in line/ && !/nan/' | wc -l)
  [ "$hot" -eq 1 ] && [ "$spins" -eq 2 ] ||
    { echo "stream_probe --side $extra: $hot L2 rows of 1, $spins spin rows of 2: $side"; exit 1; }
done
xl=$("$probe" --sizes 1 --x-latency --x-prefetch 16384 --x-flags 2>&1) ||
  { echo "stream_probe --x-latency: $xl"; exit 1; }
xrows=$(printf '%s\n' "$xl" |
  awk '/^x after the wait/ && !/nan/ && $12 + 0 > 0 && $19 + 0 > 0 && $26 + 0 > 0' | wc -l)
[ "$xrows" -eq 6 ] || { echo "stream_probe --x-latency: $xrows rows of 6: $xl"; exit 1; }
odd=$("$probe" --x-latency --x-prefetch 8k 2>&1)
[ $? -eq 2 ] && printf '%s' "$odd" | grep -q "x-prefetch 8k" ||
  { echo "--x-prefetch 8k was not refused: $odd"; exit 1; }
lone=$("$probe" --x-flags 2>&1)
[ $? -eq 2 ] && printf '%s' "$lone" | grep -q "x-latency" ||
  { echo "--x-flags without --x-latency was not refused: $lone"; exit 1; }
bad=$("$probe" --side 1 --prefetch-chunk 17 2>&1)
[ $? -eq 2 ] && printf '%s' "$bad" | grep -q "prefetch-chunk" ||
  { echo "a chunk of 17 bytes was not refused: $bad"; exit 1; }
printf '%s\n' "${out%%$'\n'*}" # the first line (head -1 could end printf by SIGPIPE under pipefail)
