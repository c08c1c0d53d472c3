#!/usr/bin/env bash
# CLI test of engram-convert's exit status: bad input exits 2 with a clear
# message, the same for a rewritten table and an in-place one (--in-place),
# and a layout file that is not a regular file or is too large is refused at
# once (never read or waited on).
# Usage: convert_exit_codes.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
convert=$build/engram-convert
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# fail, expect_error
source "$(dirname "${BASH_SOURCE[0]}")/lib/expect_error.bash"

le64() { local v=$1 i; for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (v >> (8 * i)) & 255 )))"; done; }
rows=4
json="{\"engram.w\":{\"dtype\":\"F8_E4M3\",\"shape\":[$rows,256],\"data_offsets\":[0,$((rows * 256))]},\"engram.s\":{\"dtype\":\"F8_E8M0\",\"shape\":[$rows,8],\"data_offsets\":[$((rows * 256)),$((rows * 264))]},\"scalar\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[$((rows * 264)),$((rows * 264 + 1))]}}"
{ le64 ${#json}; printf '%s' "$json"; head -c $((rows * 264 + 1)) /dev/urandom; } >in.safetensors
in=(--safetensors in.safetensors --weight engram.w --scale engram.s)
"$convert" "${in[@]}" ok.engram 2>/dev/null || fail "a good conversion"
"$convert" "${in[@]}" --in-place ok-ref.engram 2>/dev/null || fail "a good in-place conversion"

# both WANT WHAT NEEDLE ARGS...: engram-convert ARGS OUT and ARGS --in-place
# OUT exit WANT with NEEDLE in stderr.
both() {
  local want=$1 what=$2 needle=$3
  shift 3
  expect_error "$want" "$what" "$needle" "$convert" "$@" x.engram
  expect_error "$want" "$what (--in-place)" "$needle" "$convert" "$@" --in-place x.engram
}

both 2 "missing tensor" "no tensor named 'nope'" --safetensors in.safetensors --weight nope
both 2 "missing shard" "No such file" --safetensors in.safetensors,missing.safetensors --weight engram.w
both 2 "no --weight" "needs --weight" --safetensors in.safetensors
both 2 "a scalar is not a table" "scalar" --safetensors in.safetensors --weight scalar
both 2 "--layout without --layer" "needs --layer" "${in[@]}" --layout layout.json
both 2 "missing layout file" "No such file" "${in[@]}" --layout missing.json --layer 0
mkdir layout.d
both 2 "layout file is a directory" "not a regular file (a directory)" "${in[@]}" --layout layout.d --layer 0
mkfifo layout.fifo
both 2 "layout file is a FIFO" "not a regular file (a FIFO)" "${in[@]}" --layout layout.fifo --layer 0
both 2 "layout file is /dev/zero" "not a regular file (a character device)" "${in[@]}" --layout /dev/zero --layer 0
truncate -s 65M big.json  # sparse: no disk used
both 2 "layout file over the size limit" "more than the limit" "${in[@]}" --layout big.json --layer 0
printf '{"layers": [' >bad.json
both 2 "layout file that is not JSON" "not valid JSON" "${in[@]}" --layout bad.json --layer 0
[[ ! -e x.engram ]] || fail "a refused convert left an output file"
ls -a | grep -q '\.tmp-' && fail "a refused convert left a temp file"

echo "convert_exit_codes: all checks passed"
