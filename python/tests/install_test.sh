#!/usr/bin/env bash
# `cmake --install BUILD --prefix P` installs an engram_store that imports and
# gathers: PYTHONPATH=<the installed package's parent folder> python3, run
# outside the source and build trees, opens a table engram-gen wrote and
# gathers rows bit-exact with engram-gen --emit-rows. A module linked empty
# (no PyInit__engram_store) fails the import.
# Usage: install_test.sh BUILD_DIR PACKAGE_DIR_UNDER_PREFIX PYTHON [TOOLS_DIR]
# TOOLS_DIR (default BUILD_DIR) holds engram-gen: any build of this tree, so a
# build of only the library and the module can be checked too.
set -euo pipefail
build=$1 package_dir=$2 python=$3
tools=$(cd "${4:-$1}" && pwd)  # absolute: the test runs from the prefix
gen=$tools/engram-gen
[[ -x $gen ]] || { echo "FAIL: no $gen to write the test table (give a TOOLS_DIR with the tools)" >&2; exit 1; }
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/$package_dir/engram_store/__init__.py"
cd "$prefix"  # nothing of the source or build tree on the path
"$gen" --rows 3000 --seed 7 --record-bytes 264 "$prefix/t.engram" >/dev/null
ids=(0 1 17 1234 17 2999)
"$gen" --seed 7 --record-bytes 264 --emit-rows "${ids[@]}" >"$prefix/expected.bin"
PYTHONPATH="$prefix/$package_dir" "$python" -c '
import engram_store, os, sys
import numpy as np
prefix, ids = sys.argv[1], np.array([int(i) for i in sys.argv[2:]], dtype=np.uint64)
assert engram_store.__file__.startswith(prefix), engram_store.__file__
assert issubclass(engram_store.CorruptionError, OSError)
try:
    engram_store.Store(tables=[os.path.join(prefix, "missing.engram")])
    raise SystemExit("opening a missing table did not fail")
except FileNotFoundError as e:
    assert "missing.engram" in str(e), e
expected = np.fromfile(os.path.join(prefix, "expected.bin"), dtype=np.uint8).reshape(len(ids), 264)
with engram_store.Store(tables=[os.path.join(prefix, "t.engram")], cache_bytes=8 << 20, io_backend="pread") as s:
    out = np.zeros((len(ids), 264), dtype=np.uint8)
    r = s.gather(0, ids, out)
    assert (r.rows, r.distinct_rows) == (6, 5), r
    np.testing.assert_array_equal(out, expected)
print("installed engram_store imports and gathers from", os.path.dirname(engram_store.__file__))
' "$prefix" "${ids[@]}"
