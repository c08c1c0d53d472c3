#!/usr/bin/env bash
# engram-demo on small tables: a run that could not deliver its output fails
# (non-zero exit, a message): a CSV or chart that cannot be written, or a
# stdout that cannot be written. A missing gnuplot only costs the picture:
# a warning, exit 0, the CSV still written.
# Usage: demo_failures.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
demo=$build/engram-demo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$tmp/work
run() { "$demo" --work-dir "$work" --rows-per-table 100000 --metrics-listen '' "$@"; }
# expect_fail WHAT NEEDLE [run args...]: exit status 1-127 and NEEDLE on stderr
# (stdout goes to $stdout, default a file).
expect_fail() {
  local what=$1 needle=$2
  shift 2
  set +e
  run "$@" > "${stdout:-$tmp/out.txt}" 2> "$tmp/err.txt"
  local rc=$?
  set -e
  [[ $rc -ne 0 ]] || fail "$what: exit 0"
  [[ $rc -lt 128 ]] || fail "$what: killed by a signal (rc $rc)"
  grep -q -- "$needle" "$tmp/err.txt" || fail "$what: stderr lacks '$needle': $(tail -3 "$tmp/err.txt")"
}

# The tables are generated once and reused by the runs below.
run > /dev/null 2> "$tmp/err.txt" || fail "a plain run: $(tail -3 "$tmp/err.txt")"

rm -f "$work/hit-rates.csv" "$work/hit-rates.png"
mkdir "$work/hit-rates.csv"
expect_fail "CSV cannot be written" "hit-rates.csv"
rmdir "$work/hit-rates.csv"

stdout=/dev/full expect_fail "stdout on a full disk" "write to stdout failed"

# Without gnuplot on PATH: a warning, exit 0, the CSV is there.
rm -f "$work/hit-rates.csv"
PATH=/nonexistent run > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "no gnuplot: exit non-zero: $(tail -3 "$tmp/err.txt")"
grep -q "warning: gnuplot is not installed" "$tmp/err.txt" || fail "no gnuplot: no warning: $(cat "$tmp/err.txt")"
[[ -s $work/hit-rates.csv ]] || fail "no gnuplot: no CSV"

if command -v gnuplot > /dev/null; then
  rm -f "$work/hit-rates.png"
  mkdir "$work/hit-rates.png"
  expect_fail "chart cannot be written" "hit-rates.png"
fi
echo "demo failures OK"
