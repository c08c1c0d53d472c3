#!/usr/bin/env bash
# Fails when an #include crosses a layer boundary the wrong way
# (docs/ARCHITECTURE.md). Run by CTest (layering_includes) and so by CI.
#
#   include/engram/  the public API: includes only include/engram/; only
#                    asio.h may include Boost
#   storage/         a leaf: nothing from src/
#   src/cache/       no I/O: nothing from storage/, src/store/, src/metrics/
#   core (src/cache, src/store, src/metrics, src/ngram, src/capi): nothing
#                    from the tooling code (src/replay, src/workload, src/stress,
#                    src/common/gnuplot.h, src/common/logging.h, the table
#                    generators, the read benchmark, the progress meter)
#   src/capi/        only the public API
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
failed=0
# forbid DESCRIPTION DIRS... -- PATTERN: any include line in DIRS matching PATTERN fails.
forbid() {
  local what=$1; shift
  local dirs=()
  while [[ $1 != -- ]]; do dirs+=("$1"); shift; done
  shift
  local hits
  hits=$(grep -rnE --include='*.h' --include='*.cc' --include='*.c' "^[[:space:]]*#[[:space:]]*include[[:space:]]+[<\"]($1)" "${dirs[@]}" || true)
  if [[ -n $hits ]]; then
    echo "layering: $what:"
    echo "$hits" | sed 's/^/  /'
    failed=1
  fi
}
tool_only='src/replay/|src/workload/|src/stress/|src/common/gnuplot\.h|src/common/logging\.h|storage/row_generator\.h|storage/table_generator\.h|storage/io/read_benchmark\.h|storage/progress_meter\.h'
forbid "public headers include internal headers" include/engram -- 'src/|storage/|tests/|bench/|tools/'
forbid "public headers other than engram/asio.h include Boost" $(ls include/engram/*.h | grep -v '/asio\.h$') -- 'boost/'
forbid "storage/ includes src/ (storage is a leaf)" storage -- 'src/'
forbid "the cache includes I/O, the store or metrics" src/cache -- 'storage/|src/store/|src/metrics/'
forbid "core code includes tooling code" src/cache src/store src/metrics src/ngram src/capi -- "$tool_only"
forbid "storage's core includes tooling code" $(find storage -name '*.h' -o -name '*.cc' | grep -vE 'row_generator|table_generator|read_benchmark|progress_meter') -- "$tool_only"
forbid "the C API includes internal headers" src/capi -- 'src/|storage/'
if [[ $failed -ne 0 ]]; then exit 1; fi
echo "layering: every include goes the allowed way"
