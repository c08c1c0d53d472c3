#!/usr/bin/env bash
# README command 1: installs what is missing, builds the tools, and runs the
# main demonstration (engram-demo): the row-cache report reproduced on this
# machine, legacy policy vs Engram Store's default, through the real store.
# Extra arguments go to engram-demo (try --help).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/install-deps.sh"
build_dir=$(ENGRAM_TARGETS="--target engram-demo" BUILD_DIR="$here/build-demo" BUILD_TYPE=Release "$here/scripts/build.sh" -DENGRAM_BUILD_TESTS=OFF -DENGRAM_BUILD_BENCH=OFF | tail -n 1)
cd "$here"
exec "$build_dir/engram-demo" --work-dir "${ENGRAM_DEMO_DIR:-$here/out/demo}" "$@"
