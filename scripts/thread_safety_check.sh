#!/usr/bin/env bash
# Compiles the libraries (engram, engram_storage) with Clang's thread-safety
# analysis as an error (-Wthread-safety -Werror): a field GUARDED_BY a mutex
# read or written without it, or a function that REQUIRES a lock called
# without it, fails the build (storage/thread_annotations.h, storage/mutex.h).
# A check only: nothing is linked into a program or run, so it builds at -O0
# without debug info, into its own directory (BUILD_DIR, default
# build-thread-safety).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/install-deps.sh" --fuzz  # the group that brings clang
build_dir=${BUILD_DIR:-$here/build-thread-safety}
# Debug, with its flags (-g) replaced by -O0 alone: the fastest compile.
CC=clang CXX=clang++ cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror" \
  -DENGRAM_BUILD_TESTS=OFF -DENGRAM_BUILD_BENCH=OFF -DENGRAM_BUILD_TOOLS=OFF -DENGRAM_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build_dir" -j "${ENGRAM_JOBS:-$(nproc)}" --target engram engram_storage
echo "thread-safety: engram and engram_storage compile under -Wthread-safety -Werror"
