#!/usr/bin/env bash
# Regenerates the replay tables of bench/RESULTS.md and
# docs/lab-notes/2026-11-30-engram-replay-on-the-deepspeed-trace.md: the five
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

# ---- Default policy: the tables of the lab notes' "Default policy" rounds (docs/lab-notes/).
# Identity map, all policies at matched / half / quarter capacity; then legacy, default and
# belady on the compressed token map and on an unseen slice of the same corpus
# (tokens.u32: A = tokens 125,000..144,999, B = 150,000..209,999, A'/B'/A'' with their first
# 16 tokens replaced by seeded pseudo-random IDs, like the fixture requests), and two more slices
# with other offsets and proportions.
if [[ "${ENGRAM_REPLAY_ISSUE6:-1}" == 1 ]]; then
  slice=$(mktemp -d)
  trap 'rm -rf "$slice"' EXIT
  cut=("$here/bench/make_requests.py" "$traces/tokens.u32")
  "${cut[@]}" "$slice" 125000 145000 150000 210000         # the unseen slice
  "${cut[@]}" "$slice/s2" 0 30000 40000 90000              # two more, other proportions
  "${cut[@]}" "$slice/s3" 60000 75000 80000 150000
  base=("$build/engram-replay" --layout "$here/tests/fixtures/engram-hash/layout-v41.json" --layer 0
    --threads "${ENGRAM_REPLAY_THREADS:-2}")
  five() { echo --request "$1/req1.u32@x12" --request "$1/req2.u32" --request "$1/req3.u32@x16" \
    --request "$1/req4.u32" --request "$1/req5.u32"; }
  {
    echo "### identity map"
    "${base[@]}" $(five "$traces") --policy legacy --policy ways8 --policy ways16 --policy two-choice \
      --policy lru --policy default --policy full-lru --policy belady --capacity-rows 1398612 --sweep 0.25,0.5,1
    echo "### compressed token map"
    "${base[@]}" --token-map "$here/tests/fixtures/engram-hash/token-map.u32" $(five "$traces") \
      --policy legacy --policy default --policy belady --capacity-rows 1314429 --sweep 0.25,0.5,1
    echo "### unseen slice (1,092,455 distinct rows -> matched 1,400,583)"
    "${base[@]}" $(five "$slice") --policy legacy --policy default --policy belady \
      --capacity-rows 1400583 --sweep 0.25,0.5,1
    # Matched capacity = distinct rows x 1400583 / 1092455 (the report's fill).
    echo "### unseen slice 2 (A = tokens 0..29,999, B = 40,000..89,999; 1,083,334 distinct rows -> matched 1,388,889)"
    "${base[@]}" $(five "$slice/s2") --policy legacy --policy default --policy belady \
      --capacity-rows 1388889 --sweep 0.25,0.5,1
    echo "### unseen slice 3 (A = tokens 60,000..74,999, B = 80,000..149,999; 1,212,245 distinct rows -> matched 1,554,160)"
    "${base[@]}" $(five "$slice/s3") --policy legacy --policy default --policy belady \
      --capacity-rows 1554160 --sweep 0.25,0.5,1
  } | tee "$out/replay_issue6.txt"
  echo "wrote $out/replay_issue6.txt" >&2
fi
