#!/usr/bin/env bash
# Instructions per all-hit gather through the public Store API, counted by
# callgrind: a figure that host load does not move, where engram-bench hit's
# timings swing with the other tenants of a shared machine.
#
#   bench/gather_instructions.sh TABLE [ENGRAM_BENCH]
#   ROWS=24 RESIDENT=24 bench/gather_instructions.sh /dev/shm/eb/table.engram build/engram-bench
#
# Runs `engram-bench hit` twice under callgrind, for 0.2 s and 0.8 s, counting
# only inside StoreImpl::Gather (what Store::Gather runs), and prints (Ir2 - Ir1) / (gathers2 - gathers1):
# the warm-up and the store's opening cancel out. The pread backend is used
# because valgrind does not emulate io_uring's ring (a run with it hangs); a
# hit gather does no I/O either way. RESIDENT rows small enough to stay in the
# CPU caches keep the run short; callgrind counts instructions, not stalls.
set -euo pipefail
table=${1:?usage: $0 TABLE [ENGRAM_BENCH]}
bench=${2:-build/engram-bench}
rows=${ROWS:-24}
resident=${RESIDENT:-$rows}
command -v valgrind >/dev/null || { echo "$0: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
[ -x "$bench" ] || { echo "$0: no executable $bench (cmake --build build --target engram-bench)" >&2; exit 2; }
[ -f "$table" ] || { echo "$0: no table $table (build/engram-gen --rows 2000000 $table)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Sets ir and gathers for one run of $1 seconds.
count() {
  local out=$work/cg.$1.out
  valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect='engram::StoreImpl::Gather(*' \
    "$bench" hit --file "$table" --seconds "$1" --rounds 1 --rows-per-gather "$rows" \
    --resident-rows "$resident" --io-backend pread >/dev/null 2>"$work/log" ||
    { cat "$work/log" >&2; exit 1; }
  ir=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  gathers=$(callgrind_annotate --tree=caller "$out" |
    grep -o 'StoreImpl::Gather(unsigned long, std::span<unsigned long const, [0-9]*ul>, std::byte\*, unsigned long) ([0-9,]*x)' |
    sed -n '1{s/.*(\([0-9,]*\)x)/\1/; s/,//g; p}')
}
count 0.2
short_ir=$ir short_gathers=$gathers
count 0.8
long_ir=$ir long_gathers=$gathers
echo "rows_per_gather=$rows resident_rows=$resident gathers=$((long_gathers - short_gathers))" \
  "instructions_per_gather=$(((long_ir - short_ir) / (long_gathers - short_gathers)))"
