#!/usr/bin/env bash
# CLI test of the table tools: engram-gen -> engram-inspect verify/dump
# against the generator's own bytes; engram-convert on a safetensors file
# built here byte by byte; corrupted and bad inputs must give a non-zero
# exit with a clear message (and never a crash).
# Usage: storage_tools.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
gen=$build/engram-gen
inspect=$build/engram-inspect
convert=$build/engram-convert
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# fail, expect_error
source "$(dirname "${BASH_SOURCE[0]}")/lib/expect_error.bash"
# invert_byte
source "$(dirname "${BASH_SOURCE[0]}")/lib/invert_byte.bash"


for tool in "$gen" "$inspect" "$convert"; do
  "$tool" --help >/dev/null || fail "$tool --help"
done

# --- gen -> verify -> dump matches the generator --------------------------
"$gen" --rows 1000 --record-bytes 264 --seed 7 t.engram 2>/dev/null
"$inspect" verify t.engram | grep -q "OK: 67 blocks, 1000 rows" || fail "verify of a fresh table"
"$inspect" t.engram | grep -q "row_count: *1000" || fail "info shows row_count"
"$inspect" info t.engram | grep -q '"seed": 7' || fail "info shows metadata"
rows=0,14,15,999,500,1
"$inspect" dump t.engram --rows $rows --raw >dump.bin
"$gen" --record-bytes 264 --seed 7 --emit-rows $rows >want.bin
[[ $(stat -c %s dump.bin) -eq $((6 * 264)) ]] || fail "dump size"
cmp dump.bin want.bin || fail "dumped rows differ from the generator"
"$gen" --record-bytes 264 --seed 8 --emit-rows $rows >other.bin
! cmp -s dump.bin other.bin || fail "another seed gave the same bytes"
"$inspect" dump t.engram --rows 3 | grep -q "^row 3 (block 0, offset 792)" || fail "hex dump header"
"$inspect" dump t.engram --rows 10-12 --raw | cmp - <("$gen" --seed 7 --emit-rows 10,11,12) || fail "row range"

# Same seed and salt -> byte-identical files.
"$gen" --rows 300 --record-bytes 100 --seed 3 --checksum-salt 9 a.engram 2>/dev/null
"$gen" --rows 300 --record-bytes 100 --seed 3 --checksum-salt 9 b.engram 2>/dev/null
cmp a.engram b.engram || fail "reruns differ"

# --- corruption ------------------------------------------------------------
cp t.engram bad.engram
# Block 3 starts at 4096 * (1 + 3); flip a byte inside it.
invert_byte bad.engram $((4096 * 4 + 100))
expect_error nonzero "verify of a flipped byte" "block 3 checksum mismatch" "$inspect" verify bad.engram
expect_error nonzero "dump of a row in the bad block" "block 3" "$inspect" dump bad.engram --rows 45
"$inspect" dump bad.engram --rows 44 --raw >/dev/null || fail "a row in an intact block must still read"
head -c 100000 t.engram >trunc.engram
expect_error nonzero "truncated table" "truncated" "$inspect" trunc.engram
head -c 8192 /dev/zero | tr '\0' a >junk.engram
expect_error nonzero "not a table" "magic" "$inspect" verify junk.engram
expect_error nonzero "missing file" "No such file" "$inspect" nope.engram
expect_error nonzero "row out of range" "past the end" "$inspect" dump t.engram --rows 1000
expect_error nonzero "bad row list" "bad row" "$inspect" dump t.engram --rows 1,x

# --- gen bad input ---------------------------------------------------------
expect_error nonzero "record too big" "not in range 1 to 4088" "$gen" --rows 10 --record-bytes 5000 x.engram
expect_error nonzero "size overflows" "overflows a 64-bit file size" "$gen" --rows 18446744073709551615 --record-bytes 4088 x.engram
expect_error nonzero "larger than the disk" "free" "$gen" --rows 1000000000000000 --record-bytes 16 x.engram
expect_error nonzero "emit-rows zero record" "not in range" "$gen" --record-bytes 0 --emit-rows 1
expect_error nonzero "emit-rows with a table option" "excludes" "$gen" --emit-rows 1 --rows 5
expect_error nonzero "emit-rows to a full disk" "write to stdout failed" sh -c "'$gen' --emit-rows 1,2 >/dev/full"
expect_error nonzero "info to a full disk" "write to stdout failed" sh -c "'$inspect' info t.engram >/dev/full"
mkfifo fifo.engram
expect_error nonzero "a FIFO is not a table" "not a regular file" timeout 10 "$inspect" fifo.engram
expect_error nonzero "no rows" "--rows is required" "$gen" x.engram
layout=$src/tests/fixtures/engram-hash/layout-v41.json
expect_error nonzero "layout row mismatch" "total_rows 384006168" "$gen" --rows 10 --layout "$layout" --layer 1 x.engram
expect_error nonzero "unknown layer" "available: 1, 14" "$gen" --layout "$layout" --layer 5 x.engram
[[ ! -e x.engram ]] || fail "a failed gen left an output file"
ls -a | grep -q '\.tmp-' && fail "a failed gen left a temp file"

# --- convert a safetensors file built byte by byte ---------------------------
le64() { local v=$1 i; for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (v >> (8 * i)) & 255 )))"; done; }
rows=5
head -c $((rows * 256)) /dev/urandom >w.bin
head -c $((rows * 8)) /dev/urandom >s.bin
json="{\"engram.w\":{\"dtype\":\"F8_E4M3\",\"shape\":[$rows,256],\"data_offsets\":[0,$((rows * 256))]},\"engram.s\":{\"dtype\":\"U8\",\"shape\":[$rows,8],\"data_offsets\":[$((rows * 256)),$((rows * 264))]}}"
{ le64 ${#json}; printf '%s' "$json"; cat w.bin s.bin; } >in.safetensors
"$convert" --safetensors in.safetensors --weight engram.w --scale engram.s conv.engram 2>/dev/null
"$inspect" verify conv.engram >/dev/null || fail "verify converted table"
: >want.bin
for ((r = 0; r < rows; r++)); do
  dd if=w.bin bs=256 skip=$r count=1 status=none >>want.bin
  dd if=s.bin bs=8 skip=$r count=1 status=none >>want.bin
done
"$inspect" dump conv.engram --rows 0-4 --raw | cmp - want.bin || fail "converted records differ from the input"
# Two shards: the same file twice gives the rows twice.
"$convert" --safetensors in.safetensors,in.safetensors --weight engram.w --scale engram.s two.engram 2>/dev/null
"$inspect" dump two.engram --rows 5-9 --raw | cmp - want.bin || fail "second shard rows"

expect_error nonzero "missing tensor" "no tensor named 'nope'" "$convert" --safetensors in.safetensors --weight nope o.engram
head -c 50 in.safetensors >cut.safetensors
expect_error nonzero "truncated safetensors" "safetensors header" "$convert" --safetensors cut.safetensors --weight engram.w o.engram
expect_error nonzero "chunk too big" "not in range 1 to 4096" "$convert" --safetensors in.safetensors --weight engram.w \
  --chunk-mib 100000000 o.engram
expect_error nonzero "no input" "--safetensors or --npy" "$convert" o.engram
[[ ! -e o.engram ]] || fail "a failed convert left an output file"

# --- the output is checked before anything is read: not an input, not a dir --
cp in.safetensors keep.safetensors
expect_error 2 "output is the input" "is the same file as in.safetensors" \
  "$convert" --safetensors in.safetensors --weight engram.w in.safetensors
cmp in.safetensors keep.safetensors || fail "the input was replaced by its own conversion"
cp in.safetensors shard2.safetensors
expect_error 2 "output is the second shard" "is the same file as shard2.safetensors" \
  "$convert" --safetensors in.safetensors,shard2.safetensors --weight engram.w shard2.safetensors
ln in.safetensors hardlink.safetensors
expect_error 2 "output is the input under another name" "is the same file as in.safetensors" \
  "$convert" --safetensors in.safetensors --weight engram.w hardlink.safetensors
cmp in.safetensors keep.safetensors || fail "the input was replaced through a hard link"
mkdir outdir
# A missing input shows the check comes before any reading.
expect_error 2 "output is a directory" "is a directory" \
  "$convert" --safetensors missing.safetensors --weight engram.w outdir
[[ -z $(ls -A outdir) ]] || fail "something was written into the output directory"
ls -a | grep -q '\.tmp-' && fail "a refused convert left a temp file"

# --- a table has at least one row: one rule, one message, in every tool ------
expect_error nonzero "gen of zero rows" "a table needs at least one row" "$gen" --rows 0 z.engram
zero_json='{"engram.w":{"dtype":"U8","shape":[0,264],"data_offsets":[0,0]}}'
{ le64 ${#zero_json}; printf '%s' "$zero_json"; } >zero.safetensors
expect_error nonzero "convert of a tensor without rows" "a table needs at least one row" \
  "$convert" --safetensors zero.safetensors --weight engram.w z.engram
[[ ! -e z.engram ]] || fail "a zero-row table was written"

echo "storage_tools: all checks passed"
