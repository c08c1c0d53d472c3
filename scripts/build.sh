#!/usr/bin/env bash
# Configures and builds Engram Store into BUILD_DIR (default: build, or
# build-<sanitizer> when ENGRAM_SANITIZE is set). Used by test.sh and demo.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
sanitize=${ENGRAM_SANITIZE:-}
default_dir=$here/build
if [[ -n $sanitize ]]; then default_dir=$here/build-${sanitize//,/-}; fi
build_dir=${BUILD_DIR:-$default_dir}
jobs=${ENGRAM_JOBS:-$(nproc)}
cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  -DENGRAM_SANITIZE="$sanitize" "${@}" >/dev/null
# The build's own output goes to stderr: callers read the build directory from
# stdout's last line, and a compiler or linker error must not vanish with the
# rest of the log they discard.
cmake --build "$build_dir" -j "$jobs" ${ENGRAM_TARGETS:-} >&2
echo "$build_dir"
