#!/usr/bin/env bash
# engram-replay and engram-hash end to end on a small slice of the deepspeed
# trace: JSON shape, counter invariants, export, sweep CSV, and clean failures.
set -euo pipefail
build=$1
src=$2
replay=$build/engram-replay
hash=$build/engram-hash
layout=$src/tests/fixtures/engram-hash/layout-v41.json
traces=$src/tests/fixtures/traces/deepspeed
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Two small requests: 2,000 tokens of A, then the same 2,000 again.
head -c 8000 "$traces/req1.u32" > "$tmp/a.u32"
policies=(--policy legacy --policy two-choice --policy lru --policy full-lru --policy belady --policy default)
"$replay" --layout "$layout" --request "$tmp/a.u32@x4" --request "$tmp/a.u32@1000" --capacity-rows 60000 \
  "${policies[@]}" --json --export-rows "$tmp/rows.txt" > "$tmp/out.jsonl"

[ "$(wc -l < "$tmp/out.jsonl")" -eq 12 ] || fail "expected 6 policies x 2 requests JSON lines"
# Field value of a JSON line: field NAME LINE
field() { sed -E "s/.*\"$1\":(\"[^\"]*\"|[^,}]*).*/\1/" <<<"$2" | tr -d '"'; }
total_lookups=0
while read -r line; do
  lookups=$(field lookups "$line"); hits=$(field hits "$line"); misses=$(field misses "$line")
  inserts=$(field inserts "$line"); refusals=$(field refusals "$line")
  [ $((hits + misses)) -eq "$lookups" ] || fail "hits + misses != lookups: $line"
  [ $((inserts + refusals)) -eq "$misses" ] || fail "inserts + refusals != misses: $line"
  if [ "$(field policy "$line")" = belady ]; then total_lookups=$((total_lookups + lookups)); fi
  if [ "$(field request "$line")" = 1 ]; then [ "$(field gathers "$line")" -eq 4 ] || fail "x4 split: $line"; fi
  if [ "$(field request "$line")" = 2 ]; then [ "$(field gathers "$line")" -eq 2 ] || fail "@1000 split: $line"; fi
done < "$tmp/out.jsonl"
[ "$(wc -l < "$tmp/rows.txt")" -eq "$total_lookups" ] || fail "--export-rows line count != lookups"

# The second request re-reads the first: with room for everything, the bounds
# miss nothing on it.
belady2=$(grep '"policy":"belady"' "$tmp/out.jsonl" | grep '"request":2')
[ "$(field misses "$belady2")" -eq 0 ] || fail "belady missed on a full re-read: $belady2"

# The exported rows replay as a plain row trace, one gather per line.
"$replay" --rows "$tmp/rows.txt" --capacity-rows 5000 --policy full-lru --policy belady > "$tmp/table.txt"
grep -q "^belady" "$tmp/table.txt" || fail "table has no belady row"
grep -q "hit rate % per request" "$tmp/table.txt" || fail "table header missing"

# Sweep: CSV with a header and one line per capacity.
"$replay" --rows "$tmp/rows.txt" --capacity-rows 5000 --policy legacy --policy belady \
  --sweep 0.5,1,2 --csv "$tmp/sweep.csv" > /dev/null
[ "$(head -n 1 "$tmp/sweep.csv")" = "capacity_rows,legacy,belady" ] || fail "sweep CSV header"
[ "$(wc -l < "$tmp/sweep.csv")" -eq 4 ] || fail "sweep CSV lines"

# engram-hash: 24 uint64 row IDs per token.
"$hash" --layout "$layout" "$tmp/a.u32" "$tmp/a.rows"
[ "$(stat -c %s "$tmp/a.rows")" -eq $((2000 * 24 * 8)) ] || fail "engram-hash output size"

# No output replaces a file the tool read: engram-hash's OUT is not its
# layout (also through a hard link), the sweep CSV not the replay's.
cp "$layout" "$tmp/layout.json"
ln "$tmp/layout.json" "$tmp/layout-link.json"
for out in "$tmp/layout.json" "$tmp/layout-link.json"; do
  if "$hash" --layout "$tmp/layout.json" "$tmp/a.u32" "$out" 2> "$tmp/err.txt"; then fail "engram-hash wrote over its layout"; fi
  grep -q "is the same file as $tmp/layout.json (a hash layout file" "$tmp/err.txt" || fail "engram-hash: $(cat "$tmp/err.txt")"
done
if "$replay" --layout "$tmp/layout.json" --request "$tmp/a.u32" --capacity-rows 5000 --policy lru --sweep 1 \
  --csv "$tmp/layout.json" > /dev/null 2> "$tmp/err.txt"; then fail "engram-replay wrote its CSV over its layout"; fi
grep -q "is the same file as $tmp/layout.json" "$tmp/err.txt" || fail "engram-replay: $(cat "$tmp/err.txt")"
cmp -s "$tmp/layout.json" "$layout" || fail "the layout was changed"

# engram-hash writes 192 bytes per token: it streams them, so a token file
# whose row IDs do not fit in memory is hashed, not an uncaught bad_alloc.
# 3M tokens (576 MB of row IDs) under a 400 MB address-space limit; skipped
# where the limit stops even --help (sanitizer runtimes reserve far more).
if (ulimit -v 400000 && "$hash" --help > /dev/null 2>&1); then
  head -c 12000000 /dev/urandom > "$tmp/big.u32"
  (ulimit -v 400000 && "$hash" --layout "$layout" "$tmp/big.u32" "$tmp/big.rows") 2> "$tmp/err" ||
    fail "engram-hash of 3M tokens under a 400 MB limit: $(cat "$tmp/err")"
  [ "$(stat -c %s "$tmp/big.rows")" -eq $((3000000 * 192)) ] || fail "engram-hash streamed output size"
  # Rows depend on a token and its 3 predecessors: hashing a slice on its own
  # gives the same rows after its first 3 tokens, wherever the slice starts.
  for start in 65533 131069 2999000; do
    dd if="$tmp/big.u32" of="$tmp/slice.u32" bs=4 skip=$start count=1000 status=none
    "$hash" --layout "$layout" "$tmp/slice.u32" "$tmp/slice.rows"
    cmp -n $((997 * 192)) "$tmp/big.rows" "$tmp/slice.rows" $(((start + 3) * 192)) $((3 * 192)) ||
      fail "engram-hash rows of tokens $start.. differ"
  done
  rm -f "$tmp/big.u32" "$tmp/big.rows"
fi

# Clean failures: non-zero exit and a message naming the problem.
if "$replay" --layout "$layout" --request "$tmp/missing.u32" --capacity-rows 10 2> "$tmp/err"; then
  fail "missing request file accepted"
fi
grep -q "missing.u32" "$tmp/err" || fail "error does not name the file: $(cat "$tmp/err")"
if "$replay" --layout "$layout" --request "$tmp/a.u32@x0" --capacity-rows 10 2> "$tmp/err"; then
  fail "split x0 accepted"
fi
if "$replay" --rows "$tmp/rows.txt" --capacity-rows 10 --policy bogus 2> "$tmp/err"; then fail "bogus policy accepted"; fi
grep -q "bogus" "$tmp/err" || fail "error does not name the policy"
printf '\xff\xff\xff\x00' > "$tmp/outside.u32"
if "$hash" --layout "$layout" --token-map "$src/tests/fixtures/engram-hash/token-map.u32" "$tmp/outside.u32" "$tmp/x" 2> "$tmp/err"; then
  fail "token outside the map accepted"
fi
grep -q "outside the token map" "$tmp/err" || fail "token-map error message"
# A report that cannot be written (full disk, closed pipe) is a failure, as in
# engram-gen and engram-inspect, not exit 0.
if "$replay" --rows "$tmp/rows.txt" --capacity-rows 5000 --policy lru > /dev/full 2> "$tmp/err"; then
  fail "a report written to a full disk exited 0"
fi
grep -q "write to stdout failed" "$tmp/err" || fail "full-disk message: $(cat "$tmp/err")"
echo OK
