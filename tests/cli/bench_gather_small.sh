#!/usr/bin/env bash
# engram-bench gather end to end on a small generated table: per-request JSON
# with consistent counters, /metrics served from the running store while it
# lingers, and clean failures on bad arguments.
set -euo pipefail
build=$1
src=$2
bench=$build/engram-bench
if [ ! -x "$bench" ]; then
  echo "engram-bench not built (ENGRAM_BUILD_BENCH=OFF): skipping"
  exit 0
fi
traces=$src/tests/fixtures/traces/deepspeed
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A: 3,000 tokens in 3 gathers, then A again in one gather.
head -c 12000 "$traces/req1.u32" > "$tmp/a.u32"
"$bench" gather --work-dir "$tmp/work" --rows-per-table 100000 --tables 2 \
  --request "$tmp/a.u32@x3" --request "$tmp/a.u32" --policy legacy --policy default --budget-mib 64 \
  --io-backend pread --json --metrics-listen 127.0.0.1:0 --linger 30 > "$tmp/out.jsonl" 2> "$tmp/err.txt" &
pid=$!
# Wait for the JSON (the run is over, the endpoint lingers), then scrape.
for _ in $(seq 600); do
  [ "$(wc -l < "$tmp/out.jsonl")" -ge 4 ] && grep -q "serving" "$tmp/err.txt" && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/err.txt" >&2; fail "engram-bench gather exited early"; }
  sleep 0.2
done
url=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$tmp/err.txt" | head -1)
[ -n "$url" ] || { cat "$tmp/err.txt" >&2; fail "no metrics URL printed"; }
port=${url#http://127.0.0.1:}; port=${port%/metrics}
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3
scrape=$(cat <&3)
exec 3<&-
grep -q '^HTTP/1.1 200' <<<"$scrape" || fail "scrape status: $(head -1 <<<"$scrape")"
grep -q '^engram_gathers_total{table="layer1"} [1-9]' <<<"$scrape" || fail "no gathers counted for layer1: $scrape"
grep -q '^engram_row_cache_refusals_total{table="layer14",reason=' <<<"$scrape" || fail "no refusal counters"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=

[ "$(wc -l < "$tmp/out.jsonl")" -eq 4 ] || fail "expected 2 policies x 2 requests JSON lines"
field() { sed -E "s/.*\"$1\":(\"[^\"]*\"|[^,}]*).*/\1/" <<<"$2" | tr -d '"'; }
while read -r line; do
  lookups=$(field lookups "$line"); hits=$(field hits "$line"); misses=$(field misses "$line")
  inserts=$(field inserts "$line"); refusals=$(field refusals "$line")
  [ $((hits + misses)) -eq "$lookups" ] || fail "hits + misses != lookups: $line"
  [ $((inserts + refusals)) -eq "$misses" ] || fail "inserts + refusals != misses: $line"
  [ "$lookups" -gt 0 ] || fail "no lookups: $line"
  case "$(field request "$line")" in
    1) [ "$(field gathers "$line")" -eq 3 ] || fail "x3 split: $line" ;;
    2) if [ "$(field policy "$line")" = default ]; then
         [ "$misses" -eq 0 ] || fail "default: a re-read with room for everything missed: $line"
       fi
       [ "$hits" -gt "$misses" ] || fail "a re-read missed most rows: $line" ;;
  esac
done < "$tmp/out.jsonl"

# The tables are reused on a second run (no regeneration), and the table
# format shows the per-request figures.
"$bench" gather --work-dir "$tmp/work" --rows-per-table 100000 --tables 2 --request "$tmp/a.u32" \
  --capacity-rows 5000 --warm > "$tmp/table.txt" 2> "$tmp/err2.txt" || { cat "$tmp/err2.txt" >&2; fail "second run"; }
grep -q "reusing" "$tmp/err2.txt" || fail "tables were not reused: $(cat "$tmp/err2.txt")"
grep -q "wait disk" "$tmp/table.txt" || fail "no report table: $(cat "$tmp/table.txt")"

# Bad arguments: non-zero exit and a message, never a crash.
expect_fail() {
  if "$bench" gather --work-dir "$tmp/work" --rows-per-table 100000 --request "$tmp/a.u32" "$@" > /dev/null 2> "$tmp/bad.txt"; then
    fail "accepted: $*"
  fi
  [ -s "$tmp/bad.txt" ] || fail "no message for: $*"
}
expect_fail --policy ways=0
expect_fail --request "$tmp/missing.u32"
expect_fail --tables 0
expect_fail --budget-mib -1
# NaN passes CLI::Range; a budget that rounds to 0 bytes was silently replaced
# by the default one; one beyond 64 bits was an undefined conversion.
expect_fail --budget-mib nan
expect_fail --budget-mib 1e-9
expect_fail --budget-mib 1e300
expect_fail --pressure nan
expect_fail --linger nan --metrics-listen 127.0.0.1:0
expect_fail --metrics-listen nonsense
# Options that would be accepted and ignored: --traces with --request (the
# requests replace the five report requests), --linger without an endpoint to
# keep serving, --capacity-rows 0 (0 meant "not given": the default budget).
expect_fail --traces "$traces"
expect_fail --linger 5
expect_fail --capacity-rows 0
expect_fail --log-level loud
# A report that cannot be written is a failure, not exit 0.
if "$bench" gather --work-dir "$tmp/work" --rows-per-table 100000 --request "$tmp/a.u32" --budget-mib 16 \
  --warm > /dev/full 2> "$tmp/bad.txt"; then
  fail "a report written to a full disk exited 0"
fi
grep -q "write to stdout failed" "$tmp/bad.txt" || fail "full-disk message: $(cat "$tmp/bad.txt")"
echo "bench gather OK"
