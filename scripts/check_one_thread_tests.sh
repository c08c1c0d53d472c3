#!/usr/bin/env bash
# Fails when a test program the TSan build leaves out starts a thread.
# tests/CMakeLists.txt lists, in ENGRAM_ONE_THREAD_TESTS, the programs whose
# cases run on one thread: a data race needs two, so the TSan build skips them.
# A list like that goes stale silently (a case gains a worker pool and is no
# longer watched by TSan), so this runs each listed program, whole, under
# strace -f (process-management calls only) and refuses any call that makes a
# thread (flag CLONE_THREAD), in the program or in a process it starts.
# Run by CTest (tsan_skips_only_one_thread_tests) in a build without
# sanitizers: the sanitizers' runtimes cannot be traced (LeakSanitizer stops
# the world with ptrace) and in the TSan build the programs are not there.
#
# Usage: check_one_thread_tests.sh BUILD_DIR   (exit 77: skipped, strace cannot trace)
set -euo pipefail
build=$(cd "$1" && pwd)
command -v strace >/dev/null || { echo "FAIL: strace is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
# A machine that forbids ptrace (a container without CAP_SYS_PTRACE, say)
# cannot run the check at all: skipped (exit 77), not failed.
if ! strace -qq -o /dev/null true 2>/dev/null; then
  echo "SKIP: strace cannot trace here (ptrace not permitted)"
  exit 77
fi
if grep -q '^ENGRAM_SANITIZE:STRING=.' "$build/CMakeCache.txt"; then
  echo "FAIL: run this in a build without sanitizers (see the head of $0)" >&2
  exit 1
fi
IFS=";" read -r -a programs <"$build/one_thread_tests.txt" || true  # no newline at its end
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
for p in "${programs[@]}"; do
  [[ -x $build/tests/$p ]] || { echo "FAIL: $p is listed but $build/tests/$p was not built" >&2; failed=1; continue; }
  if ! (cd "$build/tests" && strace -f -qq -e trace=%process -o "$log" "./$p" >/dev/null 2>&1); then
    echo "FAIL: $p failed (run it alone to see why)" >&2
    failed=1
    continue
  fi
  if threads=$(grep -c CLONE_THREAD "$log"); then
    echo "FAIL: $p started $threads thread(s) but is listed as one-thread in tests/CMakeLists.txt:" \
      "take it off ENGRAM_ONE_THREAD_TESTS so TSan watches it" >&2
    failed=1
  fi
done
((failed == 0)) && echo "one-thread tests: ${#programs[@]} programs ran whole without starting a thread"
exit "$failed"
