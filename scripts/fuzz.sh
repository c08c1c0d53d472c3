#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/*_fuzzer.cc) with clang into
# build-fuzz/ (ASan + UBSan) and runs each one, bounded, over its seed corpus
# tests/fuzz/corpus/<target>/ (new inputs go to build-fuzz/corpus/, not into
# the repo), after replaying its crash reproducers tests/fuzz/regressions/<target>/.
#
#   scripts/fuzz.sh [BUDGET] [TARGET...]
#     BUDGET: N          seconds per target (default 30)
#             Nruns      executions per target (e.g. 1000000runs)
#     TARGET: e.g. npy_header_fuzzer (default: all)
# A crash leaves its input in build-fuzz/artifacts/<target>/ and fails the script.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
budget=${1:-30}
shift || true
"$here/scripts/install-deps.sh" --fuzz

build=${FUZZ_BUILD_DIR:-$here/build-fuzz}
CC=clang CXX=clang++ cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DENGRAM_BUILD_FUZZ=ON \
  -DENGRAM_BUILD_TESTS=OFF -DENGRAM_BUILD_BENCH=OFF -DENGRAM_BUILD_TOOLS=OFF >/dev/null
cmake --build "$build" --target fuzzers -j "${ENGRAM_JOBS:-$(nproc)}"

case $budget in
  *runs) limit=(-runs="${budget%runs}") ;;
  *[!0-9]*) echo "fuzz.sh: BUDGET must be N (seconds) or Nruns" >&2; exit 2 ;;
  *) limit=(-max_total_time="$budget") ;;
esac

targets=("$@")
if ((${#targets[@]} == 0)); then
  for src in "$here"/tests/fuzz/*_fuzzer.cc; do targets+=("$(basename "$src" .cc)"); done
fi

summary=()
status=0
for t in "${targets[@]}"; do
  bin=$build/$t
  seeds=$here/tests/fuzz/corpus/$t
  regressions=$here/tests/fuzz/regressions/$t
  work=$build/corpus/$t
  artifacts=$build/artifacts/$t/
  mkdir -p "$work" "$artifacts" "$seeds"
  if compgen -G "$regressions/*" >/dev/null; then
    echo "== $t: replaying $(ls "$regressions" | wc -l) crash reproducers =="
    "$bin" -runs=1 "$regressions"/* >"$build/$t.regressions.log" 2>&1 || {
      cat "$build/$t.regressions.log" >&2
      echo "FAIL: $t: a crash reproducer fails again" >&2
      status=1
      continue
    }
  fi
  dict=()
  [[ -f $here/tests/fuzz/$t.dict ]] && dict=(-dict="$here/tests/fuzz/$t.dict")
  echo "== $t: fuzzing (${limit[*]}) =="
  log=$build/$t.log
  start=$(date +%s)
  if ! "$bin" "${limit[@]}" "${dict[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$artifacts" "$work" "$seeds" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "FAIL: $t crashed; reproducer in $artifacts" >&2
    status=1
  fi
  secs=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || echo "?")
  summary+=("$(printf '%-28s %12s execs %6s s  cov %s' "$t" "$execs" "$secs" "$cov")")
done
echo "== fuzz summary (budget $budget per target) =="
printf '%s\n' "${summary[@]}"
exit $status
