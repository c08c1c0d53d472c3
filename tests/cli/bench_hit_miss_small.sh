#!/usr/bin/env bash
# engram-bench hit and miss on a small generated table: the report lines have
# their shape and the ratios are positive numbers (their values are claims for
# bench/RESULTS.md, not for a timed test), and bad input -- a missing,
# non-table or too-small file, a filesystem that refuses O_DIRECT, a depth or
# gather size of 0 -- is exit 2 with a message, no hang and no result line.
set -euo pipefail
build=$1
bench=$build/engram-bench
gen=$build/engram-gen
if [ ! -x "$bench" ] || [ ! -x "$gen" ]; then
  echo "engram-bench or engram-gen not built: skipping"
  exit 0
fi
# Under the work tree's filesystem (O_DIRECT works there), not tmpfs, which
# refuses O_DIRECT on older kernels.
tmp=$(mktemp -d "$build/bench-hit-miss.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
number='[0-9]+(\.[0-9]+)?'

"$gen" --rows 4000 --seed 7 "$tmp/t.engram" > /dev/null

# hit: one line per gather size, each ending in a positive hit_ratio.
"$bench" hit --file "$tmp/t.engram" --rows-per-gather 24,256 --resident-rows 1000 --seconds 0.2 --rounds 1 \
  --cache-mib 16 > "$tmp/hit.txt" 2> "$tmp/hit.err" || { cat "$tmp/hit.err" >&2; fail "hit run"; }
[ "$(wc -l < "$tmp/hit.txt")" -eq 2 ] || fail "hit: expected 2 lines: $(cat "$tmp/hit.txt")"
for n in 24 256; do
  line=$(grep "^hit rows_per_gather=$n " "$tmp/hit.txt") || fail "hit: no line for $n rows: $(cat "$tmp/hit.txt")"
  for key in store_rows_per_s memcpy_rows_per_s store_ns_per_row memcpy_ns_per_row store_cpu_ns_per_row \
    memcpy_cpu_ns_per_row; do
    grep -Eq " $key=$number( |$)" <<<"$line" || fail "hit: no $key number: $line"
  done
  grep -Eq " hit_ratio=$number$" <<<"$line" || fail "hit: line does not end in hit_ratio=X: $line"
  ratio=${line##*hit_ratio=}
  awk -v r="$ratio" 'BEGIN { exit !(r > 0) }' || fail "hit: ratio not positive: $line"
done

# miss: one line per gather size ending in miss_ratio_raw, miss_ratio_fio and
# fio in the shape of one gather at a time (batches of the depth, each after
# the last finished: only for one gather in flight whose rows fit the queue
# depth), the fio figures n/a with a note when fio is not installed; the raw
# engine in that shape too (raw_batch_rows_per_s), with or without fio; and
# the latency line.
# $1: the store's gathers in flight (the raw engine and fio run at
# min(rows x that, queue depth)).
check_miss_output() {
  local in_flight=$1
  [ "$(wc -l < "$tmp/miss.txt")" -eq 3 ] || fail "miss: expected 3 lines: $(cat "$tmp/miss.txt")"
  have_fio=1
  command -v fio > /dev/null || have_fio=0
  for n in 24 64; do
    depth=$((n * in_flight < 32 ? n * in_flight : 32))
    line=$(grep "^miss rows_per_gather=$n depth=$depth " "$tmp/miss.txt") ||
      fail "miss: no line for $n rows at depth $depth: $(cat "$tmp/miss.txt")"
    for key in store_rows_per_s raw_iops store_ns_per_row store_cpu_ns_per_row raw_cpu_ns_per_read fresh_stores; do
      grep -Eq " $key=$number( |$)" <<<"$line" || fail "miss: no $key number: $line"
    done
    grep -Eq " miss_ratio_raw=$number miss_ratio_fio=($number|n/a) fio_batch_iops=($number|n/a) miss_ratio_fio_batch=($number|n/a)$" <<<"$line" ||
      fail "miss: line does not end in miss_ratio_raw=X miss_ratio_fio=Y fio_batch_iops=Z miss_ratio_fio_batch=W: $line"
    grep -q " gathers_in_flight=$in_flight " <<<"$line" || fail "miss: not gathers_in_flight=$in_flight: $line"
    # The raw engine in the same batch shape: measured with or without fio.
    raw_batch_rate=$(sed -E 's/.* raw_batch_rows_per_s=([^ ]*) .*/\1/' <<<"$line")
    raw_batch_ratio=$(sed -E 's/.* miss_ratio_raw_batch=([^ ]*) .*/\1/' <<<"$line")
    if [ "$in_flight" = 1 ] && [ "$n" -le 32 ]; then
      awk -v r="$raw_batch_rate" -v q="$raw_batch_ratio" 'BEGIN { exit !(r > 0 && q > 0) }' ||
        fail "miss: no positive raw batch rate and ratio for one gather of $n rows at depth 32: $line"
    else
      [ "$raw_batch_rate" = n/a ] && [ "$raw_batch_ratio" = n/a ] ||
        fail "miss: a raw batch figure where the gathers are not one batch: $line"
    fi
    raw=$(sed -E 's/.* miss_ratio_raw=([^ ]*) .*/\1/' <<<"$line")
    awk -v r="$raw" 'BEGIN { exit !(r > 0) }' || fail "miss: raw ratio not positive: $line"
    fio_ratio=$(sed -E 's/.* miss_ratio_fio=([^ ]*) .*/\1/' <<<"$line")
    fio_cpu=$(sed -E 's/.* fio_cpu_ns_per_read=([^ ]*) .*/\1/' <<<"$line")
    batch_ratio=${line##*miss_ratio_fio_batch=}
    if [ "$have_fio" = 1 ]; then
      awk -v r="$fio_ratio" 'BEGIN { exit !(r > 0) }' || fail "miss: fio ratio not positive: $line"
      # fio's CPU per read, beside the store's per row: from its process's rusage.
      awk -v c="$fio_cpu" 'BEGIN { exit !(c > 0) }' || fail "miss: fio CPU per read not positive: $line"
      if [ "$in_flight" = 1 ] && [ "$n" -le 32 ]; then
        awk -v r="$batch_ratio" 'BEGIN { exit !(r > 0) }' || fail "miss: fio batch ratio not positive: $line"
      else
        [ "$batch_ratio" = n/a ] || fail "miss: a fio batch ratio where the gathers are not one batch: $line"
      fi
    else
      [ "$fio_cpu" = n/a ] || fail "miss: a fio CPU figure without fio: $line"
      [ "$fio_ratio" = n/a ] || fail "miss: a fio ratio without fio: $line"
      [ "$batch_ratio" = n/a ] || fail "miss: a fio batch ratio without fio: $line"
      grep -q "fio not found" "$tmp/miss.err" || fail "miss: no note that fio is missing: $(cat "$tmp/miss.err")"
    fi
  done
  line=$(grep "^miss_latency rows_per_gather=24 " "$tmp/miss.txt") || fail "no latency line: $(cat "$tmp/miss.txt")"
  for key in gathers gather_p50_us gather_p99_us raw_read_p50_us raw_read_p99_us; do
    grep -Eq " $key=$number( |$)" <<<"$line" || fail "miss_latency: no $key number: $line"
  done
}
# The store's miss path is compared with the raw io_uring engine: where rings
# cannot be set up (seccomp, kernel.io_uring_disabled) that is skipped.
if "$bench" miss --file "$tmp/t.engram" --rows-per-gather 24,64 --queue-depth 32 --seconds 0.2 --cache-mib 8 \
  > "$tmp/miss.txt" 2> "$tmp/miss.err"; then
  check_miss_output 1
  # Three gathers in flight, from three threads of one store: every gather
  # still all misses (the benchmark checks each), the depth scales with them.
  "$bench" miss --file "$tmp/t.engram" --rows-per-gather 24,64 --queue-depth 32 --seconds 0.2 --cache-mib 8 \
    --gathers-in-flight 3 > "$tmp/miss.txt" 2> "$tmp/miss.err" || { cat "$tmp/miss.err" >&2; fail "miss run, 3 in flight"; }
  check_miss_output 3
elif grep -Eq "io_uring_setup|ENGRAM_DISABLE_IO_URING" "$tmp/miss.err"; then
  echo "bench_hit_miss_small: miss skipped, io_uring unavailable here: $(tail -n 1 "$tmp/miss.err")"
else
  cat "$tmp/miss.err" >&2
  fail "miss run"
fi

# --json: one object per line with the same figures.
"$bench" hit --file "$tmp/t.engram" --rows-per-gather 24 --resident-rows 200 --seconds 0.05 --rounds 1 --json \
  > "$tmp/hit.json" 2> /dev/null || fail "hit --json"
grep -Eq '"hit_ratio":[0-9]' "$tmp/hit.json" || fail "hit --json: $(cat "$tmp/hit.json")"

# Bad input: exit 2, a message, no result line, within 30 s.
"$gen" --rows 10 "$tmp/tiny.engram" > /dev/null
head -c 65536 /dev/urandom > "$tmp/noise.bin"
expect_bad() {
  local what=$1
  shift
  set +e
  timeout 30 "$bench" "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"
  local rc=$?
  set -e
  [ "$rc" -ne 124 ] || fail "hung: $what"
  [ "$rc" -eq 2 ] || fail "$what: exit $rc, want 2 ($(cat "$tmp/bad.err"))"
  [ -s "$tmp/bad.err" ] || fail "$what: no message"
  ! grep -q "_ratio" "$tmp/bad.out" || fail "$what: printed a result: $(cat "$tmp/bad.out")"
}
for cmd in hit miss; do
  expect_bad "$cmd, missing file" "$cmd" --file "$tmp/missing.engram" --seconds 0.1
  expect_bad "$cmd, not a table" "$cmd" --file "$tmp/noise.bin" --seconds 0.1
  expect_bad "$cmd, too small" "$cmd" --file "$tmp/tiny.engram" --rows-per-gather 24 --seconds 0.1
  expect_bad "$cmd, 0 rows per gather" "$cmd" --file "$tmp/t.engram" --rows-per-gather 0 --seconds 0.1
  expect_bad "$cmd, seconds nan" "$cmd" --file "$tmp/t.engram" --seconds nan
done
expect_bad "miss, depth 0" miss --file "$tmp/t.engram" --queue-depth 0 --seconds 0.1
expect_bad "miss, mmap backend" miss --file "$tmp/t.engram" --io-backend mmap --seconds 0.1
grep -q "no such file\|No such file" <(
  "$bench" miss --file "$tmp/missing.engram" 2>&1 || true) || fail "missing file: message does not say so"

# A filesystem that refuses O_DIRECT (ramfs), in a private mount namespace
# when this machine allows one; the misses would be page-cache copies.
if command -v unshare > /dev/null && unshare -m --propagation private true 2> /dev/null; then
  mkdir "$tmp/ramfs"
  set +e
  unshare -m --propagation private bash -c '
    mount -t ramfs ramfs "$1" || exit 99
    cp "$2" "$1/t.engram"
    timeout 30 "$3" miss --file "$1/t.engram" --seconds 0.1 > "$4/ramfs.out" 2> "$4/ramfs.err"
  ' _ "$tmp/ramfs" "$tmp/t.engram" "$bench" "$tmp"
  rc=$?
  set -e
  if [ "$rc" -eq 99 ]; then
    echo "note: cannot mount ramfs here: the no-O_DIRECT case is not checked"
  else
    [ "$rc" -eq 2 ] || fail "no O_DIRECT: exit $rc, want 2 ($(cat "$tmp/ramfs.err"))"
    grep -q "O_DIRECT" "$tmp/ramfs.err" || fail "no O_DIRECT: message: $(cat "$tmp/ramfs.err")"
    ! grep -q "_ratio" "$tmp/ramfs.out" || fail "no O_DIRECT: printed a result"
  fi
else
  echo "note: no private mount namespace here: the no-O_DIRECT case is not checked"
fi
echo "bench hit/miss OK"
