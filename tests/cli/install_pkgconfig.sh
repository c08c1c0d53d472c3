#!/usr/bin/env bash
# The installed library is usable from C the way the README says: install the
# build into a temporary prefix, compile tests/capi_test.c with nothing but
# `pkg-config --cflags --libs engram` (libengram is static: its .pc must bring
# the C++ runtime and every dependency), and run it.
# Usage: install_pkgconfig.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
if grep -q '^ENGRAM_SANITIZE:STRING=.\+' "$build/CMakeCache.txt"; then
  # A sanitized libengram needs the sanitizer's runtime and flags at link time:
  # not what the .pc is for. The plain build's run of this test covers it.
  echo "sanitized build: install_pkgconfig checked by the plain build only"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
pc=$(find "$work/prefix" -name engram.pc)
# The installed library is the core only: no tool code (engram_tools).
lib=$(find "$work/prefix" -name libengram.a)
tool_objects=$(ar t "$lib" | grep -E '^(replay_|policy_runner|reference_policies|report_|store_workload|stress_|truncation_run|read_benchmark|row_generator|table_generator|progress_meter|gnuplot|logging|cli_values|gather_trace|request_spec|trace_files|trace_index)' || true)
[[ -z $tool_objects ]] || { echo "FAIL: libengram.a holds tool-only code: $tool_objects" >&2; exit 1; }
# Only engram/asio.h may include Boost.
boosty=$(grep -l 'include <boost/' "$work/prefix"/include/engram/*.h | grep -v '/asio\.h$' || true)
[[ -z $boosty ]] || { echo "FAIL: public headers include Boost: $boosty" >&2; exit 1; }
[[ -n $pc ]] || { echo "FAIL: no engram.pc installed" >&2; exit 1; }
# Moved after installation: the .pc finds its prefix from its own place.
mv "$work/prefix" "$work/moved"
export PKG_CONFIG_PATH=$(dirname "${pc/$work\/prefix/$work/moved}")
flags=$(pkg-config --cflags --libs engram)
# -I "$src": only for the test's own CHECK macro (tests/testing/capi_check.h);
# everything of the library comes from the .pc.
cc -std=gnu11 -I "$src" -o "$work/capi" "$src/tests/capi_test.c" $flags
"$work/capi" "$build" | grep -q "all checks passed" || { echo "FAIL: capi_test linked via pkg-config failed" >&2; exit 1; }
echo "install_pkgconfig: ok ($flags)"
