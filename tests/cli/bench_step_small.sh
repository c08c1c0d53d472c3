#!/usr/bin/env bash
# engram-bench step on two small generated layers: a line per case, step size
# and mode with positive figures and a hit rate that says which case it is,
# a word-latency line per case and step size, --json with the same, and a
# mode that does not exist is exit 2 with a message and no result line.
set -euo pipefail
build=$1
bench=$build/engram-bench
if [ ! -x "$bench" ]; then
  echo "engram-bench not built: skipping"
  exit 0
fi
tmp=$(mktemp -d "$build/bench-step.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
number='[0-9]+(\.[0-9]+)?'
modes="flat hash_gather stage stage_start gather_step gather_step_start ring c_stage c_stage_rows c_gather_step"

"$bench" step --dir "$tmp" --rows-per-table 10000 --tokens 1 8 --seconds 0.02 --rounds 1 --miss-rows 300 \
  --word-steps 20 --backend pread > "$tmp/step.txt" 2> "$tmp/step.err" || { cat "$tmp/step.err" >&2; fail "step run"; }
for case in hit miss; do
  for n in 1 8; do
    for mode in $modes; do
      line=$(grep -E "^step $case +tokens=$n +$mode +ns_per_row=" "$tmp/step.txt") ||
        fail "no line for $case $n $mode: $(cat "$tmp/step.txt")"
      for key in ns_per_row x_flat x_hash_gather hit_rate; do
        grep -Eq "$key= *$number( |$)" <<<"$line" || fail "no $key number: $line"
      done
      rate=${line##*hit_rate=}
      if [ "$case" = hit ]; then
        [ "$rate" = 1.000 ] || fail "a hit line that is not all hits: $line"
      else
        awk -v r="$rate" 'BEGIN { exit !(r < 0.5) }' || fail "a miss line that is mostly hits: $line"
      fi
    done
    line=$(grep -E "^step $case +tokens=$n +word_latency " "$tmp/step.txt") || fail "no word latency for $case $n"
    for key in samples p50_ns p90_ns p99_ns max_ns; do
      grep -Eq " $key=$number( |$)" <<<"$line" || fail "word latency: no $key number: $line"
    done
  done
done

"$bench" step --dir "$tmp" --rows-per-table 10000 --tokens 1 --cases hit --modes flat ring --seconds 0.02 \
  --rounds 1 --word-steps 5 --json > "$tmp/step.json" 2> /dev/null || fail "step --json"
grep -q '"mode":"ring"' "$tmp/step.json" || fail "step --json: no ring: $(cat "$tmp/step.json")"
grep -q '"mode":"word_latency"' "$tmp/step.json" || fail "step --json: no word latency: $(cat "$tmp/step.json")"

set +e
timeout 30 "$bench" step --dir "$tmp" --rows-per-table 10000 --modes bogus > "$tmp/bad.out" 2> "$tmp/bad.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "an unknown mode: exit $rc, want 2"
grep -q "no mode 'bogus'" "$tmp/bad.err" || fail "an unknown mode: message: $(cat "$tmp/bad.err")"
[ ! -s "$tmp/bad.out" ] || fail "an unknown mode printed a result: $(cat "$tmp/bad.out")"
echo "bench step OK"
