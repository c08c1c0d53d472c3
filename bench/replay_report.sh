#!/usr/bin/env bash
# Regenerates the "Hasher and replay" tables of bench/RESULTS.md: the five
# deepspeed requests of tests/fixtures/traces/README (identity token map, V4.1
# layout layer 0) replayed at the matched capacity (1,398,612 rows), half and
# quarter capacity, plus a miss-ratio curve (CSV + PNG in bench/plots/).
#   bench/replay_report.sh [BUILD_DIR] [OUT_DIR]
# BUILD_DIR defaults to ./build (needs engram-replay built), OUT_DIR to bench/plots.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-$here/bench/plots}
mkdir -p "$out"
traces=$here/tests/fixtures/traces/deepspeed
replay=("$build/engram-replay" --layout "$here/tests/fixtures/engram-hash/layout-v41.json" --layer 0
  --request "$traces/req1.u32@x12" --request "$traces/req2.u32" --request "$traces/req3.u32@x16"
  --request "$traces/req4.u32" --request "$traces/req5.u32"
  --policy legacy --policy ways8 --policy ways16 --policy two-choice --policy lru
  --policy full-lru --policy belady --policy default --threads "${ENGRAM_REPLAY_THREADS:-2}")

# One sweep covers the three tables (1 = matched, 0.5 = half, 0.25 = quarter)
# and the curve; each capacity prints its own table.
"${replay[@]}" --capacity-rows 1398612 --sweep 0.125,0.25,0.5,0.75,1,1.5 \
  --csv "$out/replay_miss_ratio.csv" --plot "$out/replay_miss_ratio.png" | tee "$out/replay_report.txt"
echo "wrote $out/replay_report.txt, $out/replay_miss_ratio.csv, $out/replay_miss_ratio.png" >&2
