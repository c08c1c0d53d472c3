#!/usr/bin/env bash
# Throughput of engram-gen and engram-convert next to cp and dd moving the same
# number of bytes on the same disk, in one run (figures are only meaningful as
# ratios within a run).
#
# Usage: bench/convert_throughput.sh BUILD_DIR [SIZE_MB=1536] [WORK_DIR=$TMPDIR or /tmp] [REPS=3]
#
# Fairness: every writer ends durable (engram-* fsync file + dir in Finish;
# dd uses conv=fsync; cp is followed by `sync FILE`). The input of convert, cp
# and dd is the same safetensors file, read from the page cache (pre-read once).
# Each measurement is repeated REPS times, interleaved; the median is printed.
set -euo pipefail
build=$1
size_mb=${2:-1536}
work=${3:-${TMPDIR:-/tmp}}/engram-convert-bench.$$
reps=${4:-3}
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

rows=$(( size_mb * 1000000 / 264 ))
wbytes=$(( rows * 256 ))
sbytes=$(( rows * 8 ))
payload=$(( wbytes + sbytes ))

le64() { local v=$1 i; for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (v >> (8 * i)) & 255 )))"; done; }
now() { date +%s.%N; }
mbps() { awk -v b="$1" -v t="$2" 'BEGIN { printf "%.0f", b / 1e6 / t }'; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, work dir $work ($(df -h --output=source,fstype "$work" | tail -1 | xargs))"
echo "# $rows rows x 264 B = $payload bytes of tensor data ($size_mb MB)"

# Input: a V4.1-shaped safetensors file (weight F8_E4M3 [rows,256], scale
# F8_E8M0 [rows,8]). The bytes come from a generated table: content does not
# matter to any of the copiers.
"$build/engram-gen" --rows $(( rows + 1000 )) --record-bytes 264 --seed 1 "$work/src.engram" 2>/dev/null
json="{\"engram.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[$rows,256],\"data_offsets\":[0,$wbytes]},\"engram.scale\":{\"dtype\":\"F8_E8M0\",\"shape\":[$rows,8],\"data_offsets\":[$wbytes,$payload]}}"
{ le64 ${#json}; printf '%s' "$json"; head -c "$payload" "$work/src.engram"; } >"$work/in.safetensors"
rm -f "$work/src.engram"
in_bytes=$(stat -c %s "$work/in.safetensors")
cat "$work/in.safetensors" >/dev/null  # into the page cache

run() {  # run NAME BYTES CMD...: prints seconds
  local t0 t1
  sync
  t0=$(now)
  "${@:3}" >/dev/null 2>&1
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}

declare -A secs
for ((i = 0; i < reps; i++)); do
  secs[dd_copy]+="$(run dd_copy "$in_bytes" dd if="$work/in.safetensors" of="$work/dd.out" bs=8M conv=fsync) "
  rm -f "$work/dd.out"
  secs[cp_sync]+="$(run cp_sync "$in_bytes" sh -c "cp '$work/in.safetensors' '$work/cp.out' && sync '$work/cp.out'") "
  rm -f "$work/cp.out"
  secs[convert]+="$(run convert "$payload" "$build/engram-convert" --safetensors "$work/in.safetensors" \
      --weight engram.weight --scale engram.scale "$work/conv.engram") "
  out_bytes=$(stat -c %s "$work/conv.engram")
  rm -f "$work/conv.engram"
  secs[gen]+="$(run gen "$payload" "$build/engram-gen" --rows "$rows" --record-bytes 264 --seed 2 "$work/gen.engram") "
  rm -f "$work/gen.engram"
  secs[dd_zero]+="$(run dd_zero "$out_bytes" dd if=/dev/zero of="$work/zero.out" bs=8M count=$(( (out_bytes + 8388607) / 8388608 )) conv=fsync) "
  rm -f "$work/zero.out"
done

printf "%-44s %10s %12s %8s\n" "what (all durable at exit)" "bytes" "median s" "MB/s"
report() {  # report NAME LABEL BYTES
  local m
  m=$(tr ' ' '\n' <<<"${secs[$1]}" | grep . | median)
  printf "%-44s %10s %12s %8s\n" "$2" "$3" "$m" "$(mbps "$3" "$m")"
}
report dd_copy "dd bs=8M conv=fsync (copy input file)" "$in_bytes"
report cp_sync "cp + sync (copy input file)" "$in_bytes"
report convert "engram-convert (safetensors -> table)" "$payload"
report dd_zero "dd if=/dev/zero conv=fsync (table-sized)" "$out_bytes"
report gen "engram-gen (synthesize table)" "$payload"
echo "# table file: $out_bytes bytes ($(( (out_bytes - payload) * 1000 / payload ))/1000 overhead: padding, trailers, header, metadata)"
