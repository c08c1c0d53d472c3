#!/usr/bin/env bash
# engram-demo argument checks (the demo itself writes gigabytes and is not run
# here): a --pressure or --linger that is NaN is refused before anything runs
# (CLI::Range lets NaN through; it was then converted to a slot count or a
# sleep, both undefined).
set -euo pipefail
build=$1
demo=$build/engram-demo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$demo" --help > /dev/null || fail "engram-demo --help"
# --fixtures points nowhere: an accepted option would fail later, naming the
# missing fixtures instead of the option.
expect_fail() {
  local opt=$1
  shift
  set +e
  "$demo" --fixtures "$tmp/none" --work-dir "$tmp/work" --metrics-listen '' "$@" > /dev/null 2> "$tmp/err.txt"
  local rc=$?
  set -e
  [ "$rc" -ne 0 ] || fail "accepted: $*"
  [ "$rc" -lt 128 ] || fail "killed by a signal (rc $rc): $*"
  grep -q -- "$opt" "$tmp/err.txt" || fail "message does not name $opt for $*: $(cat "$tmp/err.txt")"
}
expect_fail --pressure --pressure nan
expect_fail --linger --linger nan
expect_fail --pressure --pressure 9
echo "demo args OK"
