#!/usr/bin/env bash
# CLI test of engram-convert --ranks: a V4.1-shaped layer (the scaled layout
# of engram_store.scaled_tables) split into rank tables from an existing
# table (--table), from safetensors, and in place; the manifest names files
# beside it; engram-inspect shows each rank table's rank_shard; and bad
# arguments exit 2 with a clear message, leaving nothing behind.
# Usage: rank_tables.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
convert=$build/engram-convert
inspect=$build/engram-inspect
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# fail, expect_error
source "$src/tests/cli/lib/expect_error.bash"

# The layout module is plain Python (json, os): loaded by path, without the
# compiled package.
python3 - "$src/python/engram_store/scaled_tables.py" "$src/tests/fixtures/engram-hash/layout-v41.json" <<'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("scaled_tables", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
with open("layout.json", "w") as f:
    json.dump(m.scale_layout(sys.argv[2], 3000), f)
PY
layer=$(python3 -c 'import json; print(json.load(open("layout.json"))["layers"][0]["layer_id"])')
rows=$(python3 -c 'import json; print(json.load(open("layout.json"))["layers"][0]["total_rows"])')
"$build/engram-gen" --layout layout.json --layer "$layer" --seed 5 --record-bytes 264 layer.engram 2>/dev/null

# From an existing table: the layout is the table's own.
mkdir out
"$convert" --table layer.engram --ranks 5 out/layer.json 2>err.txt || fail "--table --ranks 5: $(cat err.txt)"
for r in 0 1 2 3 4; do
  [[ -f out/layer.rank$r-of-5.engram ]] || fail "rank $r's table is not beside the manifest"
done
python3 - <<'PY' || fail "manifest contents"
import json
m = json.load(open("out/layer.json"))
assert m["format"] == "engram-rank-manifest/1" and m["ranks"] == 5 and m["name"] == "layer", m
assert [f["file"] for f in m["rank_files"]] == [f"layer.rank{r}-of-5.engram" for r in range(5)]
assert [len(f["slots"]) for f in m["rank_files"]] == [5, 5, 5, 5, 4]
assert m["slot_to_rank"] == [s % 5 for s in range(24)] and m["slot_index_in_rank"] == [s // 5 for s in range(24)]
PY
"$inspect" info out/layer.rank4-of-5.engram >info.txt
grep -q "rank_shard:      rank 4 of 5 (strided), slots \[4, 9, 14, 19\] of a $rows-row table" info.txt ||
  fail "engram-inspect does not show the rank_shard: $(grep rank_shard info.txt)"
"$inspect" verify out/layer.rank2-of-5.engram >/dev/null || fail "a rank table does not verify"

# From safetensors, copied and in place.
le64() { local v=$1 i; for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (v >> (8 * i)) & 255 )))"; done; }
json="{\"engram.w\":{\"dtype\":\"F8_E4M3\",\"shape\":[$rows,256],\"data_offsets\":[0,$((rows * 256))]},\"engram.s\":{\"dtype\":\"F8_E8M0\",\"shape\":[$rows,8],\"data_offsets\":[$((rows * 256)),$((rows * 264))]}}"
{ le64 ${#json}; printf '%s' "$json"; head -c $((rows * 264)) /dev/urandom; } >in.safetensors
st=(--safetensors in.safetensors --weight engram.w --scale engram.s --layout layout.json --layer "$layer")
"$convert" "${st[@]}" --ranks 3 st.json 2>err.txt || fail "safetensors --ranks 3: $(cat err.txt)"
"$convert" "${st[@]}" --ranks 24 --in-place ref.json 2>err.txt || fail "--in-place --ranks 24: $(cat err.txt)"
"$inspect" verify ref.rank23-of-24.engram >/dev/null || fail "an in-place rank table does not verify"
"$inspect" info ref.rank0-of-24.engram | grep -q "reference table" || fail "--in-place did not write a reference"

# Bad arguments: exit 2, a clear message, no output left behind.
expect_error 2 "--ranks 0" "outside 1..24" "$convert" "${st[@]}" --ranks 0 bad.json
expect_error 2 "--ranks 25" "outside 1..24" "$convert" "${st[@]}" --ranks 25 bad.json
expect_error 2 "--ranks -3" "outside 1..24" "$convert" "${st[@]}" --ranks -3 bad.json
expect_error 2 "no layout" "--layout FILE --layer ID" "$convert" --safetensors in.safetensors --weight engram.w \
  --scale engram.s --ranks 2 bad.json
expect_error 2 "OUT in a missing directory" "cannot write" "$convert" "${st[@]}" --ranks 2 nowhere/bad.json
mkdir dir.json
expect_error 2 "OUT is a directory" "is a directory" "$convert" "${st[@]}" --ranks 2 dir.json
expect_error 2 "a rank table converted again" "already a rank table" "$convert" --table out/layer.rank0-of-5.engram \
  --ranks 2 bad.json
expect_error nonzero "--table in place" "requires --safetensors" "$convert" --table layer.engram --ranks 2 --in-place bad.json
expect_error 2 "a missing table" "No such file" "$convert" --table missing.engram --ranks 2 bad.json
expect_error 2 "the manifest is the input" "is the same file as layer.engram" "$convert" --table layer.engram --ranks 2 \
  layer.engram
expect_error nonzero "--table without --ranks" "ranks" "$convert" --table layer.engram bad.engram
ls bad* >/dev/null 2>&1 && fail "a refused conversion left output: $(ls bad*)"
ls -a | grep -q '\.tmp-' && fail "a refused conversion left a temp file"
echo "rank_tables: all checks passed"
