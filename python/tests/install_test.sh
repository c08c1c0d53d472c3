#!/usr/bin/env bash
# `cmake --install BUILD --prefix P` installs an importable engram_store:
# PYTHONPATH=<the installed package's parent folder> python3 -c 'import engram_store'.
# Usage: install_test.sh BUILD_DIR PACKAGE_DIR_UNDER_PREFIX PYTHON
set -euo pipefail
build=$1 package_dir=$2 python=$3
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/$package_dir/engram_store/__init__.py"
cd "$prefix"  # nothing of the source or build tree on the path
PYTHONPATH="$prefix/$package_dir" "$python" -c '
import engram_store, os, sys
assert engram_store.__file__.startswith(sys.argv[1]), engram_store.__file__
assert issubclass(engram_store.CorruptionError, OSError)
try:
    engram_store.Store(tables=[os.path.join(sys.argv[1], "missing.engram")])
    raise SystemExit("opening a missing table did not fail")
except FileNotFoundError as e:
    assert "missing.engram" in str(e), e
print("installed engram_store imports from", os.path.dirname(engram_store.__file__))
' "$prefix"
