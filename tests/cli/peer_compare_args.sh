#!/usr/bin/env bash
# bench/peer_compare.sh runs the user's own cachesim: without CACHESIM it
# exits 2 and says so, whatever else is set, and builds nothing; --help names
# CACHESIM. Nothing here needs a cachesim or a build.
# Usage: peer_compare_args.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
src=$(cd "$2" && pwd)
script=$src/bench/peer_compare.sh
source "$src/tests/cli/lib/expect_error.bash"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# A directory that looks like a libCacheSim checkout: it must not be built.
mkdir -p lcs/libCacheSim/bin/cachesim
touch lcs/CMakeLists.txt
export ENGRAM_PEER_WORK=$tmp/work

expect_error 2 "no CACHESIM" "set CACHESIM to your own libCacheSim cachesim executable" env -u CACHESIM bash "$script" "$tmp/build" "$tmp/out"
expect_error 2 "no CACHESIM, a source tree offered" "this script only runs it" \
  env -u CACHESIM LIBCACHESIM_SRC="$tmp/lcs" bash "$script" "$tmp/build" "$tmp/out"
expect_error 2 "CACHESIM not executable" "CACHESIM=$tmp/lcs/CMakeLists.txt is not an executable" \
  env CACHESIM="$tmp/lcs/CMakeLists.txt" bash "$script" "$tmp/build" "$tmp/out"
[[ ! -e $tmp/work && ! -e $tmp/out ]] || fail "peer_compare.sh wrote output without a cachesim: $(ls -R "$tmp/work" "$tmp/out" 2>&1)"

bash "$script" --help >help.txt 2>&1 || fail "--help: exit $?"
grep -q 'CACHESIM=/path/to/cachesim' help.txt || fail "--help does not name CACHESIM: $(cat help.txt)"
grep -qi 'your own libCacheSim cachesim executable; this script only runs it' help.txt || fail "--help does not say cachesim is the user's own build: $(cat help.txt)"
echo "peer_compare.sh arguments OK"
