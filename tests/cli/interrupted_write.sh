#!/usr/bin/env bash
# A table tool interrupted by SIGINT (Ctrl-C) or SIGTERM while writing leaves
# no temporary file behind and reports the signal in its exit status
# (128 + signal), instead of leaving hundreds of MB under .<table>.tmp-XXXXXX.
# (SIGKILL cannot be intercepted: see the README's Tools section.)
# Usage: interrupted_write.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
gen=$build/engram-gen
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Job control: a background job of a non-interactive shell otherwise starts
# with SIGINT ignored, and a tool rightly leaves an ignored signal alone.
set -m

interrupt() {
  local sig=$1 num=$2
  local dir=$work/$sig
  mkdir "$dir"
  # ~1 GB: far more than can be written before the signal lands.
  "$gen" --rows 4000000 --record-bytes 264 "$dir/t.engram" 2>"$dir/err.txt" &
  local pid=$!
  # Wait until the temporary file exists and holds data, then signal.
  local waited=0
  until [[ -n $(find "$dir" -name '.t.engram.tmp-*' -size +1M 2>/dev/null) ]]; do
    kill -0 "$pid" 2>/dev/null || fail "$sig: engram-gen ended before it was signalled: $(cat "$dir/err.txt")"
    sleep 0.02
    waited=$((waited + 1))
    [[ $waited -lt 1500 ]] || { kill -KILL "$pid"; fail "$sig: no temporary file appeared"; }
  done
  kill -"$sig" "$pid"
  set +e
  wait "$pid"
  local rc=$?
  set -e
  [[ $rc -eq $((128 + num)) ]] || fail "$sig: exit status $rc, want $((128 + num))"
  local left
  left=$(ls -A "$dir" | grep -v '^err.txt$' || true)
  [[ -z $left ]] || fail "$sig: left behind: $left"
}
interrupt INT 2
interrupt TERM 15
echo "interrupted writes leave nothing OK"
