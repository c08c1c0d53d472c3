#!/usr/bin/env bash
# README command 2: installs what is missing, builds, and runs the whole test
# suite with CTest. ENGRAM_SANITIZE=address,undefined or =thread builds and runs
# it under sanitizers in a separate build directory. ENGRAM_CTEST_EXCLUDE=REGEX
# leaves out the tests whose names match (ctest -E).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/install-deps.sh"
extra=()
# Sanitizer runs are for the tests: skip the microbenchmarks there.
build_type=RelWithDebInfo
if [[ -n ${ENGRAM_SANITIZE:-} ]]; then extra+=(-DENGRAM_BUILD_BENCH=OFF); build_type=Debug; fi
build_dir=$(BUILD_TYPE=$build_type "$here/scripts/build.sh" "${extra[@]}" | tail -n 1)
cd "$build_dir"
exclude=()
if [[ -n ${ENGRAM_CTEST_EXCLUDE:-} ]]; then exclude=(-E "$ENGRAM_CTEST_EXCLUDE"); fi
ctest --output-on-failure -j "${ENGRAM_TEST_JOBS:-2}" --timeout 900 "${exclude[@]}"
