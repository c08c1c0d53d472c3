#!/usr/bin/env bash
# engram-bench ranks on a small slice of the deepspeed trace: the shape of its
# JSON (one line per rank of every split), the invariants that hold whatever
# the cache does (the ranks' slots partition the layer, their lookups add up
# to the unsharded lookups, their caches to the unsharded cache), the table
# form, and exit 2 with a message on bad arguments. Timings are not checked.
set -euo pipefail
build=$1
src=$2
source "$src/tests/cli/lib/optional_tool.bash"
source "$src/tests/cli/lib/expect_error.bash"
bench=$build/engram-bench
optional_tool "$bench" "ENGRAM_BUILD_BENCH=OFF"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
traces=$src/tests/fixtures/traces/deepspeed

head -c 8000 "$traces/req1.u32" > a.u32
head -c 8000 "$traces/req3.u32" > b.u32
run=("$bench" ranks --request a.u32@x4 --request b.u32 --request a.u32 --capacity-rows 20000)
"${run[@]}" --ranks 2 --ranks 5 --json > out.jsonl

python3 - out.jsonl <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
def fail(msg):
    sys.exit(f"FAIL: {msg}")
# unsharded (1 rank), then 2 and 5 ranks, each strided and contiguous
want = [(1, "strided")] + [(r, a) for r in (2, 5) for a in ("strided", "contiguous")]
if len(lines) != sum(r for r, _ in want):
    fail(f"{len(lines)} JSON lines, want {sum(r for r, _ in want)}")
base = lines[0]
if base["slots"] != list(range(24)) or base["lookups"] <= 0:
    fail(f"unsharded line: {base}")
i = 0
for ranks, assignment in want:
    split = lines[i:i + ranks]
    i += ranks
    if [(l["ranks"], l["assignment"], l["rank"]) for l in split] != [(ranks, assignment, r) for r in range(ranks)]:
        fail(f"split order: {split}")
    slots = sorted(s for l in split for s in l["slots"])
    if slots != list(range(24)):
        fail(f"{ranks} {assignment}: slots do not partition 0..23: {slots}")
    for l in split:
        if sorted(l["slots"]) != l["slots"] or not 0 <= l["misses"] <= l["lookups"]:
            fail(f"rank line: {l}")
        if assignment == "strided" and any(s % ranks != l["rank"] for s in l["slots"]):
            fail(f"strided slots of rank {l['rank']}: {l['slots']}")
        if assignment == "contiguous" and l["slots"] != list(range(l["slots"][0], l["slots"][-1] + 1)):
            fail(f"contiguous slots: {l['slots']}")
    # Slots own disjoint row ranges: a gather's distinct rows split exactly.
    if sum(l["lookups"] for l in split) != base["lookups"]:
        fail(f"{ranks} {assignment}: lookups {sum(l['lookups'] for l in split)} != unsharded {base['lookups']}")
    if sum(l["table_rows"] for l in split) != base["table_rows"]:
        fail(f"{ranks} {assignment}: table rows do not add up")
    if abs(sum(l["capacity_rows"] for l in split) - base["capacity_rows"]) > 2 * ranks:
        fail(f"{ranks} {assignment}: caches do not add up to the unsharded one")
    mean = sum(l["misses"] for l in split) / ranks
    if abs(split[0]["max_over_mean"] - max(l["misses"] for l in split) / mean) > 1e-9:
        fail(f"max_over_mean: {split[0]}")
PY

# The table: a header and one line per split.
"${run[@]}" --ranks 4 --tables 1 > table.txt
grep -q "missed rows per rank" table.txt || fail "no table header: $(cat table.txt)"
[ "$(grep -cE '^ +4  (strided|contiguous) ' table.txt)" -eq 2 ] || fail "no 4-rank lines: $(cat table.txt)"
grep -qE '^ +1  all ' table.txt || fail "no unsharded line: $(cat table.txt)"

expect_error 2 "zero ranks" "--ranks" "${run[@]}" --ranks 0
expect_error 2 "more ranks than slots" "ranks must be in 1..24" "${run[@]}" --ranks 25
expect_error 2 "unknown policy" "policy" "${run[@]}" --policy nonsense
expect_error 2 "missing request" "missing.u32" "$bench" ranks --request missing.u32
expect_error 2 "zero capacity" "capacity-rows" "${run[@]}" --capacity-rows 0
echo "bench ranks OK"
