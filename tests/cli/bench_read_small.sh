#!/usr/bin/env bash
# engram-bench read on a 1 MiB file: one short point runs and reports reads;
# a duration that is not a positive, finite number of seconds is refused with
# a message (NaN used to hang the run; a negative one measured nothing and
# exited 0).
set -euo pipefail
build=$1
bench=$build/engram-bench
if [ ! -x "$bench" ]; then
  echo "engram-bench not built (ENGRAM_BUILD_BENCH=OFF): skipping"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

read_args=(read --file "$tmp/f.bin" --backends pread --threads 1 --cache warm --json)
"$bench" "${read_args[@]}" --create-mib 1 --seconds 0.2 > "$tmp/out.json" 2> /dev/null || fail "a short read run"
grep -q '"reads": [1-9]' "$tmp/out.json" || fail "no reads measured: $(cat "$tmp/out.json")"

# expect_fail ARGS...: non-zero exit (not a signal, not a hang) and a message
# naming --seconds.
expect_fail() {
  set +e
  timeout 30 "$bench" "${read_args[@]}" "$@" > /dev/null 2> "$tmp/bad.txt"
  local rc=$?
  set -e
  [ "$rc" -ne 124 ] || fail "hung: $*"
  [ "$rc" -ne 0 ] || fail "accepted: $*"
  [ "$rc" -lt 128 ] || fail "killed by a signal (rc $rc): $*"
  grep -q -- "--seconds" "$tmp/bad.txt" || fail "message does not name --seconds for $*: $(cat "$tmp/bad.txt")"
}
expect_fail --seconds nan
expect_fail --seconds -1
expect_fail --seconds 0
expect_fail --seconds inf
# A report that cannot be written is a failure, not exit 0.
if "$bench" "${read_args[@]}" --seconds 0.1 > /dev/full 2> "$tmp/bad.txt"; then
  fail "a report written to a full disk exited 0"
fi
grep -q "write to stdout failed" "$tmp/bad.txt" || fail "full-disk message: $(cat "$tmp/bad.txt")"
# Reads that fail make the run fail: the file is truncated under a running
# benchmark, so pread reaches end-of-file (report still printed, exit 1).
"$bench" read --file "$tmp/g.bin" --create-mib 4 --seconds 0.1 --backends pread --threads 1 --cache warm \
  > /dev/null 2>&1 || fail "creating g.bin"
"$bench" read --file "$tmp/g.bin" --backends pread --threads 1 --cache warm --json --seconds 4 \
  > "$tmp/trunc.json" 2> "$tmp/trunc.txt" &
pid=$!
sleep 1.5
truncate -s 0 "$tmp/g.bin"
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "failed reads exited 0: $(cat "$tmp/trunc.txt")"
[ "$rc" -lt 128 ] || fail "failed reads: killed by a signal (rc $rc)"
grep -q "reads failed" "$tmp/trunc.txt" || fail "failed reads: no message: $(cat "$tmp/trunc.txt")"
grep -q '"errors": [1-9]' "$tmp/trunc.json" || fail "failed reads: the report does not show them"
echo "bench read OK"
