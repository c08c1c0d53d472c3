#!/usr/bin/env bash
# Charts are drawn without a shell, with paths passed to gnuplot as data: a
# work directory whose name holds a quote, $(...) and backquotes still gets
# its chart (engram-demo, engram-replay --plot), and nothing in the name is
# executed. Skipped where gnuplot is not installed.
# Usage: gnuplot_paths.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
if ! command -v gnuplot > /dev/null; then
  echo "gnuplot not installed: skipping"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$tmp"
# Two quotes, so a shell would parse the command and run what is between them.
dir="$tmp/quote's \$(touch PWNED) and\`touch PWNED2\`'s @x"
mkdir -p "$dir"
executed() { find "$tmp" -name 'PWNED*' | grep -q .; }

"$build/engram-demo" --work-dir "$dir/demo" --rows-per-table 100000 --metrics-listen '' \
  > "$tmp/demo.out" 2> "$tmp/demo.err" || fail "engram-demo: $(tail -5 "$tmp/demo.err")"
executed && fail "engram-demo executed part of its work directory's name"
[[ -s $dir/demo/hit-rates.png ]] || fail "engram-demo drew no chart: $(grep chart "$tmp/demo.out")"
grep -qF "chart: $dir/demo/hit-rates.png" "$tmp/demo.out" || fail "engram-demo did not report its chart"

layout=$src/tests/fixtures/engram-hash/layout-v41.json
head -c 8000 "$src/tests/fixtures/traces/deepspeed/req1.u32" > "$tmp/a.u32"
"$build/engram-replay" --layout "$layout" --request "$tmp/a.u32@x4" --capacity-rows 60000 \
  --policy legacy --policy belady --sweep 0.5,1 --plot "$dir/sweep.png" > /dev/null 2> "$tmp/replay.err" ||
  fail "engram-replay --plot: $(cat "$tmp/replay.err")"
executed && fail "engram-replay executed part of the plot path"
[[ -s $dir/sweep.png ]] || fail "engram-replay drew no chart"
echo "gnuplot paths OK"
