#!/usr/bin/env bash
# CLI test of engram-served --hot-set with real processes: a hot set path that
# is a file the service reads -- its rank manifest (by name, symlink or hard
# link) or its rank table -- or that is not a regular file (a FIFO, a
# symlink to a device, a directory) is refused at start (exit 2, a clear
# message), and the file is left as it was; on a good path, a temporary file
# a killed save left is removed, and SIGTERM saves the hot set.
# Usage: served_hot_set.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
served=$build/engram-served
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
# fail
source "$src/tests/cli/lib/expect_error.bash"

python3 - <<'PY'
import json
layer = {"layer_id": 1, "orders": [2], "heads": 2, "pad_id": 0, "multipliers": ["3", "5"],
         "primes": [[401, 409]], "offsets": [[0, 401]], "total_rows": 810}
json.dump({"format": "engram-hash-layout/1", "layers": [layer]}, open("layout.json", "w"))
PY
"$build/engram-gen" --layout layout.json --layer 1 --seed 5 --record-bytes 264 layer.engram 2>/dev/null
"$build/engram-convert" --table layer.engram --ranks 2 l1.json 2>/dev/null
cp l1.json l1.keep
ln -s l1.json symlink.set
ln l1.json hardlink.set
mkfifo fifo.set
ln -s /dev/null null.set
mkdir dir.set

# Starts engram-served on rank 0 of l1.json with --hot-set PATH; it must
# exit 2 at start with NEEDLE in its stderr. Should it start instead, it is
# stopped with SIGTERM (which saves its hot set) and the test fails.
refused() {
  local what=$1 path=$2 needle=$3
  rm -f s.sock ready.txt
  "$served" --socket s.sock --manifest l1.json --rank 0 --cache-bytes 4MiB --hot-set "$path" --log-level warn \
    >ready.txt 2>err.txt &
  local pid=$! i rc
  for i in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    grep -q ready ready.txt 2>/dev/null && break
    sleep 0.05
  done
  if grep -q ready ready.txt 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" || true
    fail "$what: engram-served started with --hot-set $path (and saved its hot set there at SIGTERM)"
  fi
  set +e
  wait "$pid"
  rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "$what: exit status $rc, want 2: $(cat err.txt)"
  grep -qF -- "$needle" err.txt || fail "$what: stderr lacks '$needle': $(cat err.txt)"
  [[ ! -e s.sock ]] || fail "$what: a refused start left its socket"
}

refused "the manifest" l1.json "hot_set_path l1.json is the same file as l1.json (the rank manifest of table 'l1'"
refused "a symlink to the manifest" symlink.set "is the same file as l1.json (the rank manifest"
refused "a hard link of the manifest" hardlink.set "is the same file as l1.json (the rank manifest"
refused "the rank table" l1.rank0-of-2.engram "is the same file as l1.rank0-of-2.engram (a table file"
cmp -s l1.json l1.keep || fail "the manifest was changed"
[[ -L symlink.set && -f hardlink.set ]] || fail "a link to the manifest was replaced"

refused "a FIFO" fifo.set "hot_set_path fifo.set is a FIFO, not a regular file"
refused "a symlink to /dev/null" null.set "is a character device, not a regular file"
refused "a directory" dir.set "is a directory, not a regular file"
[[ -p fifo.set ]] || fail "the FIFO was replaced"
[[ -L null.set && -c null.set ]] || fail "the symlink to /dev/null was replaced"
[[ -d dir.set ]] || fail "the directory was replaced"

# A good path: the temporary file a killed save left goes at start; SIGTERM
# saves the hot set.
echo "half a hot set" >.hot.set.tmp-Dead00
rm -f s.sock ready.txt
"$served" --socket s.sock --manifest l1.json --rank 0 --cache-bytes 4MiB --hot-set hot.set --log-level warn \
  >ready.txt 2>err.txt &
pid=$!
for _ in $(seq 1 300); do grep -q ready ready.txt 2>/dev/null && break; sleep 0.05; done
grep -q ready ready.txt || fail "a good hot set path: no readiness line: $(cat err.txt)"
[[ ! -e .hot.set.tmp-Dead00 ]] || fail "the temporary file of a killed save was not removed at start"
kill -TERM "$pid"
wait "$pid" || fail "SIGTERM: a non-zero exit: $(cat err.txt)"
[[ -f hot.set ]] || fail "SIGTERM did not save the hot set"
ls -A | grep -q '\.tmp-' && fail "a temporary file was left: $(ls -A)"
echo "served_hot_set: all checks passed"
