#!/usr/bin/env bash
# CLI test of engram-convert --ranks over an existing manifest, with real
# processes: a re-conversion killed by SIGTERM after its first rank, or
# failing on a full disk (RLIMIT_FSIZE: write() fails with EFBIG), leaves the
# old manifest and the set it names opening as before (engram-served serves
# each rank), and nothing of its own; a first conversion failing on a full
# disk leaves no rank table; a successful one writes the other generation of
# names and removes the old set only once its manifest is in place; and the
# --layout file is never an output.
# Usage: rank_reconvert.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
convert=$build/engram-convert
served=$build/engram-served
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
# fail, expect_error
source "$src/tests/cli/lib/expect_error.bash"

# Two one-order layers of two slots: a small one, and one whose slot 1 (rank
# 1 of 2) has 16,000,057 rows (4.2 GB of 264-B records, read from a sparse
# source), so that a conversion is still writing rank 1 when it is stopped.
python3 - <<'PY'
import json
def layout(name, primes):
    layer = {"layer_id": 1, "orders": [2], "heads": 2, "pad_id": 0, "multipliers": ["3", "5"],
             "primes": [primes], "offsets": [[0, primes[0]]], "total_rows": sum(primes)}
    json.dump({"format": "engram-hash-layout/1", "layers": [layer]}, open(name, "w"))
def npy(name, rows, data=None):
    header = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, 264), }" % rows
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(name, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        if data is None:
            f.truncate(10 + len(header) + rows * 264)  # sparse: reads as zeros
        else:
            f.write(data)
layout("small.json", [11, 13])
layout("big.json", [11, 16000057])
npy("small.npy", 24, bytes((r * 7 + c) & 255 for r in range(24) for c in range(264)))
npy("big.npy", 16000068)
PY
small=(--npy small.npy --layout small.json --layer 1 --ranks 2)
big=(--npy big.npy --layout big.json --layer 1 --ranks 2)

# Each rank of the manifest opens: engram-served starts on it (and stops).
set_opens() {
  local manifest=$1 what=$2 r
  for r in 0 1; do
    # Removed first: the previous run's readiness line must not be read.
    rm -f s.sock ready.txt
    "$served" --socket s.sock --manifest "$manifest" --rank $r --cache-bytes 4MiB --log-level warn \
      >ready.txt 2>served-err.txt &
    local pid=$! i
    for i in $(seq 1 300); do
      grep -q ready ready.txt 2>/dev/null && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if ! grep -q ready ready.txt 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null || true
      wait "$pid" || true
      fail "$what: rank $r of $manifest does not open: $(cat served-err.txt)"
    fi
    kill -TERM "$pid"
    wait "$pid" || fail "$what: engram-served on rank $r did not stop cleanly"
  done
}

# Nothing but `want` (sorted names) of the set `stem` is in the directory:
# no rank table, temporary file or manifest of another conversion.
expect_files() {
  local stem=$1 want=$2 what=$3 got
  got=$(ls -A | grep -E "^\.?$stem\." | sort | tr '\n' ' ' || true)
  [[ $got == "$want" ]] || fail "$what: files of $stem are '$got', want '$want'"
}

"$convert" "${small[@]}" l.json 2>err.txt || fail "first conversion: $(cat err.txt)"
cp l.json l.keep
expect_files l "l.json l.keep l.rank0-of-2.engram l.rank1-of-2.engram " "first conversion"
set_opens l.json "first conversion"

# --- SIGTERM after the first rank of a conversion over the manifest ---------
# (RLIMIT_FSIZE bounds what it could write were the signal late.)
( trap '' XFSZ; ulimit -f 1048576; exec "$convert" "${big[@]}" l.json 2>term-err.txt ) &
pid=$!
waited=0
until [[ -n $(find . -maxdepth 1 -name '.l.*rank1-of-2.engram.tmp-*' -size +1M 2>/dev/null) ]]; do
  kill -0 "$pid" 2>/dev/null || fail "SIGTERM: the conversion ended before rank 1 got going: $(cat term-err.txt)"
  sleep 0.02
  waited=$((waited + 1))
  [[ $waited -lt 1500 ]] || { kill -KILL "$pid"; fail "SIGTERM: rank 1's temporary file never grew"; }
done
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
[[ $rc -eq 143 ]] || fail "SIGTERM: exit status $rc, want 143: $(cat term-err.txt)"
cmp -s l.json l.keep || fail "SIGTERM: the manifest changed"
expect_files l "l.json l.keep l.rank0-of-2.engram l.rank1-of-2.engram " "SIGTERM after rank 0"
set_opens l.json "SIGTERM after rank 0"

# --- a full disk in rank 1 -----------------------------------------------------
set +e
( trap '' XFSZ; ulimit -f 1024; exec "$convert" "${big[@]}" l.json 2>full-err.txt )
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "full disk: exit status $rc, want 1: $(cat full-err.txt)"
grep -q "File too large" full-err.txt || fail "full disk: no write error reported: $(cat full-err.txt)"
cmp -s l.json l.keep || fail "full disk: the manifest changed"
expect_files l "l.json l.keep l.rank0-of-2.engram l.rank1-of-2.engram " "full disk"
set_opens l.json "full disk"
# A first conversion that fails so leaves nothing at all.
set +e
( trap '' XFSZ; ulimit -f 1024; exec "$convert" "${big[@]}" fresh.json 2>full-err.txt )
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "full disk, first conversion: exit status $rc, want 1: $(cat full-err.txt)"
expect_files fresh "" "full disk, first conversion"

# --- a conversion over the manifest that succeeds ---------------------------
"$convert" "${small[@]}" l.json 2>err.txt || fail "second conversion: $(cat err.txt)"
expect_files l "l.g1.rank0-of-2.engram l.g1.rank1-of-2.engram l.json l.keep " "second conversion"
set_opens l.json "second conversion"
"$convert" "${small[@]}" l.json 2>err.txt || fail "third conversion: $(cat err.txt)"
expect_files l "l.json l.keep l.rank0-of-2.engram l.rank1-of-2.engram " "third conversion"
set_opens l.json "third conversion"

# --- the --layout file is never an output ---------------------------------------
cp small.json small.keep
expect_error 2 "--ranks OUT is the --layout file" "is the same file as small.json" "$convert" "${small[@]}" small.json
expect_error 2 "OUT is the --layout file" "is the same file as small.json" \
  "$convert" --npy small.npy --layout small.json --layer 1 small.json
cmp -s small.json small.keep || fail "the layout file was replaced"
expect_files small "small.json small.keep small.npy " "the layout as OUT"
echo "rank_reconvert: all checks passed"
