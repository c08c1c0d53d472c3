#!/usr/bin/env bash
# CLI test of in-place (reference) tables: engram-convert --in-place on
# safetensors shards built here byte by byte; engram-inspect info/verify/dump
# must agree with the converted table; every bad input exits 2 with a clear
# message (never a crash).
# Usage: in_place_tables.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
inspect=$build/engram-inspect
convert=$build/engram-convert
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# fail, expect_error
source "$(dirname "${BASH_SOURCE[0]}")/lib/expect_error.bash"
# invert_byte
source "$(dirname "${BASH_SOURCE[0]}")/lib/invert_byte.bash"


le64() { local v=$1 i; for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (v >> (8 * i)) & 255 )))"; done; }
# shard NAME ROWS: F8_E4M3 weight [ROWS,256], a BF16 tensor, F8_E8M0 scale [ROWS,8].
shard() {
  local name=$1 rows=$2
  local w=$((rows * 256)) s=$((rows * 8))
  head -c $w /dev/urandom >w.bin
  head -c $s /dev/urandom >s.bin
  local json="{\"engram.w\":{\"dtype\":\"F8_E4M3\",\"shape\":[$rows,256],\"data_offsets\":[0,$w]},\"attn\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[$w,$((w + 8))]},\"engram.s\":{\"dtype\":\"F8_E8M0\",\"shape\":[$rows,8],\"data_offsets\":[$((w + 8)),$((w + 8 + s))]}}"
  { le64 ${#json}; printf '%s' "$json"; cat w.bin; printf 'bf16bf16'; cat s.bin; } >"$name"
}
mkdir shards
shard shards/a.safetensors 300
shard shards/b.safetensors 17
shard shards/c.safetensors 450
in=shards/a.safetensors,shards/b.safetensors,shards/c.safetensors
"$convert" --safetensors $in --weight engram.w --scale engram.s conv.engram 2>/dev/null
"$convert" --safetensors $in --weight engram.w --scale engram.s --in-place ref.engram 2>/dev/null
"$inspect" ref.engram | grep -q "reference table (in place)" || fail "info names the kind"
"$inspect" ref.engram | grep -q "row_count: *767" || fail "info shows row_count"
"$inspect" verify ref.engram | grep -q "^OK: .* 767 rows verified" || fail "verify"
"$inspect" verify --fingerprint ref.engram >/dev/null || fail "verify --fingerprint"
cmp <("$inspect" dump conv.engram --rows 0-766 --raw) <("$inspect" dump ref.engram --rows 0-766 --raw) ||
  fail "in-place rows differ from the converted table"
# The reference names the shards relative to itself: moved together, it still opens.
mkdir moved
cp -p -r shards moved/ && cp ref.engram moved/
"$inspect" verify moved/ref.engram >/dev/null || fail "a reference moved with its shards"

# --- corruption: verify and dump name the shard; other rows still read --------
cp -p shards/c.safetensors keep.safetensors
off=$(( $(stat -c %s shards/c.safetensors) - 450 * 8 - 8 - 200 * 256 ))  # row 300+17+250's area
mtime=$(stat -c %y shards/c.safetensors)
invert_byte shards/c.safetensors $off
touch -d "$mtime" shards/c.safetensors
set +e; "$inspect" verify ref.engram >out.txt 2>err.txt; rc=$?; set -e
[[ $rc -ne 0 && $rc -lt 128 ]] || fail "verify of a flipped shard byte: rc $rc"
grep -q "c.safetensors.*checksum mismatch" err.txt || fail "verify names the shard: $(cat err.txt)"
"$inspect" dump ref.engram --rows 0-300 --raw >/dev/null || fail "rows of intact blocks still read"
cp -p keep.safetensors shards/c.safetensors

# --- bad input: exit 2 and a clear message ------------------------------------
expect_error 2 "tensor not found" "no tensor named 'nope'" \
  "$convert" --safetensors $in --weight nope --in-place x.engram
expect_error 2 "shard missing at convert" "No such file" \
  "$convert" --safetensors shards/a.safetensors,missing.safetensors --weight engram.w --in-place x.engram
expect_error 2 "unknown dtype" "unsupported dtype" \
  sh -c "sed 's/\"BF16\"/\"F4E2\"/' shards/a.safetensors >f4.safetensors &&
         '$convert' --safetensors f4.safetensors --weight attn --in-place x.engram"
# ... while next to the table's tensors it is ignored.
"$convert" --safetensors f4.safetensors --weight engram.w --scale engram.s --in-place f4.engram 2>/dev/null ||
  fail "an unknown dtype in another tensor blocked the conversion"
bad_json='{"w":{"dtype":"U8","shape":[3,16],"data_offsets":[0,48]},"s":{"dtype":"U8","shape":[2,8],"data_offsets":[48,64]},"sc":{"dtype":"U8","shape":[],"data_offsets":[64,65]}}'
{ le64 ${#bad_json}; printf '%s' "$bad_json"; head -c 65 /dev/zero; } >rows.safetensors
expect_error 2 "dtype or shape not a table" "scalar" \
  "$convert" --safetensors rows.safetensors --weight sc --in-place x.engram
expect_error 2 "tensors of different row counts" "different row counts" \
  "$convert" --safetensors rows.safetensors --weight w --scale s --in-place x.engram
[[ ! -e x.engram ]] || fail "a refused convert left an output file"
ls -a | grep -q '\.tmp-' && fail "a refused convert left a temp file"

cp ref.engram damaged.engram
invert_byte damaged.engram 4100
expect_error 2 "damaged reference" "checksum section checksum mismatch" "$inspect" verify damaged.engram
head -c 5000 ref.engram >short.engram
expect_error 2 "truncated reference" "truncated" "$inspect" short.engram
mv shards/b.safetensors b.away
expect_error 2 "shard missing at open" "b.safetensors" "$inspect" dump ref.engram --rows 1
mv b.away shards/b.safetensors
shard shards/b.safetensors 17   # same shape, new bytes: another checkpoint's shard
expect_error 2 "reference written for other shards" "not the file this reference table was written for" \
  "$inspect" verify ref.engram
echo "in_place_tables: all checks passed"
