#!/usr/bin/env bash
# scripts/check_layers.sh on small fake trees: a tree whose every include is
# allowed passes, and each include a layer's allow-list leaves out fails the
# check, naming the file and line. Also a folder of src/ that no layer names,
# a file loose in src/, and a layer folder that is missing.
# Usage: check_layers_test.sh SOURCE_DIR
set -euo pipefail
check=$(cd "$1" && pwd)/scripts/check_layers.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# A tree with every layer's folder and one file per folder, each including
# only what its layer may.
make_tree() {
  rm -rf "$tmp/tree"
  mkdir -p "$tmp/tree"
  cd "$tmp/tree"
  mkdir -p include/engram storage/io src/{cache,store,metrics,ngram,capi,node,replay,workload,stress,tablegen,iobench,common} \
    python/src tools bench tests
  printf '#include <cstdint>\n#include <stdint.h>\n#include "engram/status.h"\n' > include/engram/store.h
  printf '#include <cstdint>\n' > include/engram/status.h
  printf '#include <boost/asio/post.hpp>\n#include "engram/store.h"\n' > include/engram/asio.h
  printf '#include <liburing.h>\n#include "engram/status.h"\n#include "engram/hasher.h"\n#include "storage/io/io_engine.h"\n' \
    > storage/table_file.cc
  printf '#include "storage/table_file.h"\n' > storage/io/io_engine.cc
  printf '#include <sys/mman.h>\n#include "engram/cache_stats.h"\n#include "src/cache/row_cache.h"\n' > src/cache/row_cache.cc
  printf '#include "engram/store.h"\n#include "src/cache/row_cache.h"\n#include "src/metrics/http_endpoint.h"\n' > src/store/store_impl.cc
  printf '#include "src/ngram/scaled_layout.h"\n#include "storage/table_file.h"\n#include "src/store/log_rate_limiter.h"\n' \
    >> src/store/store_impl.cc
  printf '#include "engram/status.h"\n#include "src/metrics/metrics_snapshot.h"\n' > src/metrics/http_endpoint.cc
  printf '#include "engram/hasher.h"\n#include "storage/prime.h"\n' > src/ngram/scaled_layout.cc
  printf '#include "engram/engram.h"\n#include "engram/store.h"\n' > src/capi/engram_c.cc
  printf '#include "src/store/store_impl.h"\n#include "src/cache/shared_row_cache_reader.h"\n' > src/node/node_service.cc
  printf '#include "src/common/gnuplot.h"\n#include "src/cache/row_cache.h"\n' > src/replay/replay_output.cc
  printf '#include "src/tablegen/table_generator.h"\n#include "src/store/store_impl.h"\n' > src/workload/report_workload.cc
  printf '#include "src/tablegen/row_generator.h"\n' > src/stress/stress_run.cc
  printf '#include "storage/table_writer.h"\n' > src/tablegen/table_generator.cc
  printf '#include "storage/io/io_engine.h"\n' > src/iobench/read_benchmark.cc
  printf '#include "engram/status.h"\n' > src/common/logging.cc
  printf '#include <pybind11/pybind11.h>\n#include "engram/store.h"\n#include "python/src/module.h"\n' > python/src/module.cc
  printf '#include <CLI/CLI.hpp>\n#include "src/common/logging.h"\n#include "storage/table_file.h"\n' > tools/engram-gen.cc
  printf '#include "bench/hit_miss_command.h"\n#include "src/common/resident_memory.h"\n' > bench/engram-bench.cc
  printf '#include <gtest/gtest.h>\n#include "tests/testing/temp_table.h"\n#include "src/store/store_impl.h"\n' > tests/store_test.cc
}

# expect_pass NAME / expect_fail NAME FILE:LINE: runs the check on the tree.
expect_pass() {
  if ! bash "$check" "$tmp/tree" > "$tmp/out" 2>&1; then
    echo "FAIL ($1): the check rejected an allowed tree:"; sed 's/^/  /' "$tmp/out"; failures=$((failures + 1))
  fi
}
expect_fail() {
  if bash "$check" "$tmp/tree" > "$tmp/out" 2>&1; then
    echo "FAIL ($1): the check passed"; failures=$((failures + 1))
  elif ! grep -qF "$2" "$tmp/out"; then
    echo "FAIL ($1): the check failed without naming $2:"; sed 's/^/  /' "$tmp/out"; failures=$((failures + 1))
  fi
}
# bad NAME FILE INCLUDE_LINE: the tree plus one line appended to FILE must fail at that line.
bad() {
  make_tree
  echo "$3" >> "$2"
  expect_fail "$1" "$2:$(wc -l < "$2"): $3"
}

make_tree
expect_pass "every include allowed"

bad "storage includes a public header other than status.h and hasher.h" storage/table_file.cc '#include "engram/store.h"'
bad "storage includes the cache" storage/io/io_engine.cc '#include "src/cache/row_cache.h"'
bad "storage includes the tools' library" storage/table_file.cc '#include "src/tablegen/row_generator.h"'
bad "storage includes through a relative path" storage/table_file.cc '#include "../src/store/store_impl.h"'
bad "storage includes a project folder in angle brackets" storage/table_file.cc '#include <src/store/store_impl.h>'
bad "the cache includes storage" src/cache/row_cache.cc '#include "storage/table_file.h"'
bad "the cache includes the store" src/cache/row_cache.cc '#include "src/store/store_impl.h"'
bad "the cache includes a public header it does not need" src/cache/row_cache.cc '#include "engram/store.h"'
bad "the store includes src/common" src/store/store_impl.cc '#include "src/common/logging.h"'
bad "the store includes a tool folder" src/store/store_impl.cc '#include "src/workload/report_workload.h"'
bad "the store includes the node service" src/store/store_impl.cc '#include "src/node/node_service.h"'
bad "the cache includes the node service" src/cache/row_cache.cc '#include "src/node/shared_cache_memory.h"'
bad "the node service includes src/common" src/node/node_service.cc '#include "src/common/logging.h"'
bad "the metrics include the store" src/metrics/http_endpoint.cc '#include "src/store/store_impl.h"'
bad "the hasher includes src/common" src/ngram/scaled_layout.cc '#include "src/common/logging.h"'
bad "the C API includes the store's internals" src/capi/engram_c.cc '#include "src/store/store_impl.h"'
bad "the C API includes storage" src/capi/engram_c.cc '#include "storage/table_file.h"'
bad "a public header includes an internal header" include/engram/store.h '#include "src/store/store_impl.h"'
bad "a public header other than asio.h includes Boost" include/engram/store.h '#include <boost/asio/post.hpp>'
bad "a public header includes a third-party header" include/engram/status.h '#include <nlohmann/json.hpp>'
bad "asio.h includes a third-party header other than Boost" include/engram/asio.h '#include <spdlog/spdlog.h>'
bad "the Python binding includes the store's internals" python/src/module.cc '#include "src/store/store_impl.h"'
bad "the tools' library includes tests" src/common/logging.cc '#include "tests/testing/temp_table.h"'
bad "a benchmark includes tests" bench/engram-bench.cc '#include "tests/testing/resident_memory.h"'
bad "a tool includes a benchmark" tools/engram-gen.cc '#include "bench/hit_miss_command.h"'
bad "a test includes a benchmark" tests/store_test.cc '#include "bench/hit_miss_command.h"'

make_tree
mkdir src/newfolder
printf '#include "tests/testing/temp_table.h"\n' > src/newfolder/x.cc
expect_fail "a folder of src/ in no layer" "src/newfolder/ belongs to no layer"

make_tree
printf '#include "engram/status.h"\n' > src/status.cc
expect_fail "a file loose in src/" "src/status.cc is in no layer's folder"

make_tree
rm -r src/iobench
expect_fail "a layer's folder is missing" "src/iobench does not exist"

if [[ $failures -ne 0 ]]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "check_layers.sh: every allow-list case behaves"
