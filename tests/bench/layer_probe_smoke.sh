#!/usr/bin/env bash
# layer_probe's plumbing and its kernels' arithmetic, not its figures: the
# check line (each product against a plain dequantize-and-multiply) passes for
# 8 and 16 warps, in the flat kernel and the cluster kernel (both k-tile codes
# there); a short run prints one timed row a configuration, with and without
# the attention's stand-in and the barriers, and a trace; --reduce prints its
# three rows with their adds right; a ring that does not fit is refused. Exit
# 77 without a GPU or on one before sm_90 (layer_probe's own).
#
#   layer_probe_smoke.sh LAYER_PROBE
set -uo pipefail
probe=${1:?usage: layer_probe_smoke.sh LAYER_PROBE}
out=$("$probe" --warps 8,16 --math 0,1 --late-sums 0,1 --stages 3 --attention-us 0,1 --layers 2 2>&1)
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "layer_probe: exit $rc: $out"; exit 1; }
checks=$(printf '%s\n' "$out" | grep -c '^check, .* warps, math [01], late sums [01]: worst error [0-9.e+-]* of the largest output$')
[ "$checks" -eq 8 ] || { echo "layer_probe: $checks passing checks of 8: $out"; exit 1; }
rows=$(printf '%s\n' "$out" | awk '$1 == "flat" && /warps/ && /us a layer/ && $0 !~ /nan|inf/' | wc -l)
[ "$rows" -eq 16 ] || { echo "layer_probe: $rows timed rows of 16: $out"; exit 1; }
# the cluster kernel: its checks, a row and a trace a path (at the deepest
# ring that fits 16 warps)
out=$("$probe" --cluster --warps 8,16 --math 0,1 --late-sums 0,1 --stages 10 --attention-us 1 --layers 3 --trace 2>&1) ||
  { echo "layer_probe --cluster: $out"; exit 1; }
checks=$(printf '%s\n' "$out" | grep -c '^check, .* warps, math [01], late sums [01]: worst error [0-9.e+-]* of the largest output$')
rows=$(printf '%s\n' "$out" | awk '$1 == "cluster" && /us a layer/ && $0 !~ /nan|inf/' | wc -l)
traces=$(printf '%s\n' "$out" | grep -c '^gate/up ')
[ "$checks" -eq 8 ] && [ "$rows" -eq 8 ] && [ "$traces" -eq 8 ] ||
  { echo "layer_probe --cluster: $checks checks of 8, $rows rows of 8, $traces traces of 8: $out"; exit 1; }
free=$("$probe" --stages 4 --layers 2 --no-barriers 2>&1) &&
  [ "$(printf '%s\n' "$free" | grep -c 'barriers 0: .* us a layer')" -eq 1 ] ||
  { echo "layer_probe --no-barriers: $free"; exit 1; }
red=$("$probe" --reduce 2>&1) &&
  [ "$(printf '%s\n' "$red" | grep -c '^reduce .* blocks: red .* us, red.v4 .* us, stores .* us$')" -eq 3 ] ||
  { echo "layer_probe --reduce: $red"; exit 1; }
"$probe" --stages 16 --layers 1 >/dev/null 2>&1 && { echo "a 16-slot ring was not refused"; exit 1; }
"$probe" --warps 12 >/dev/null 2>&1 && { echo "12 warps were not refused"; exit 1; }
printf '%s\n' "${out%%$'\n'*}" # the first line (head -1 would end printf by SIGPIPE under pipefail)
