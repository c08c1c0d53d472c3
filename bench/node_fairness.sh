#!/usr/bin/env bash
# node_fairness.sh [DIR] [--runs N] [--plot OUTDIR] [--label NAME] [--node-phases]
#
# Whether one client of engram-served can hold up another, on a table under
# DIR (default /dev/shm: tmpfs accepts O_DIRECT on Linux >= 6.6, so the misses
# measure the CPU path; pass a directory on a real disk to measure that disk):
# makes a 2M-row table of 264-B rows (~550 MB), runs `engram-bench node
# --mixed` RUNS times (default 3) and prints one line per run:
#
#   b_p50/p99/max_ms  client B's 256-row all-miss gathers beside client A's
#                     bulk (3 x 60,000 never-read rows in flight): through one
#                     engram-served (service) and as two private stores
#                     (private), both in the same run
#   *_ratio           service / private: B's p99 (target <= 1.5), B's slowest
#                     (<= 2), A's rows/s (>= 0.9)
#   stopped_*         B's slowest beside A stopped (SIGSTOP) with its answers
#                     unread, against A absent (target <= 2)
#
# --node-phases also runs `engram-bench node` once (its memory, hit and miss
# phases: PSS of the service + 4 clients against one private store, target
# <= 1.1x; client hits within 1.3x; 4 clients missing together >= 0.9x one
# private store running their union) and prints its figures.
# --plot writes OUTDIR/node_fairness_LABEL_runK.png (B's latency CDFs, gnuplot)
# and the CSV beside each (.csv). LABEL defaults to DIR's last part.
# The table is removed at exit. Every run's JSON is kept in OUTDIR (with
# --plot) as node_fairness_LABEL_runK.json.
#
# Environment: ENGRAM_BENCH, ENGRAM_GEN (default: build/ next to bench/),
# ROWS (2000000), MIXED_ARGS (more `engram-bench node --mixed` options).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BENCH=${ENGRAM_BENCH:-$here/../build/engram-bench}
GEN=${ENGRAM_GEN:-$here/../build/engram-gen}
ROWS=${ROWS:-2000000}
dir=/dev/shm
runs=3
out=
label=
node_phases=0
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=${2:?--runs needs a number}; shift ;;
    --plot) out=${2:?--plot needs a directory}; shift ;;
    --label) label=${2:?--label needs a name}; shift ;;
    --node-phases) node_phases=1 ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "node_fairness: unknown option $1" >&2; exit 2 ;;
    *) dir=$1 ;;
  esac
  shift
done
for tool in "$BENCH" "$GEN"; do
  [ -x "$tool" ] || { echo "node_fairness: $tool not built (cmake --build build --target engram-bench engram-gen engram-served)" >&2; exit 2; }
done
[ -d "$dir" ] || { echo "node_fairness: no directory $dir" >&2; exit 2; }
command -v python3 > /dev/null || { echo "node_fairness: python3 is needed to read the JSON results" >&2; exit 2; }
label=${label:-$(basename "$dir")}
if [ -n "$out" ]; then mkdir -p "$out"; fi

# 4096-B blocks of floor(4088 / 264) = 15 rows: ~273 B per row, plus room.
need=$(( ROWS * 4096 / 15 + (64 << 20) ))
avail=$(df --output=avail -B1 "$dir" | tail -1 | tr -d ' ')
if [ "$avail" -lt "$need" ]; then
  echo "node_fairness: $dir has $((avail >> 20)) MiB free; the $ROWS-row table needs $((need >> 20)) MiB" >&2
  exit 2
fi
work=$(mktemp -d "$dir/engram-node-fairness.XXXXXX")
trap 'rm -rf "$work"' EXIT
table=$work/table.engram
echo "node_fairness: generating $ROWS rows in $table" >&2
"$GEN" --rows "$ROWS" --seed 1 "$table" > /dev/null

# MIXED_ARGS is split on spaces on purpose: it holds options.
# shellcheck disable=SC2206
extra=(${MIXED_ARGS:-})
for run in $(seq "$runs"); do
  echo "node_fairness: run $run/$runs (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  json=$work/run$run.json
  plot=()
  if [ -n "$out" ]; then
    plot=(--plot "$out/node_fairness_${label}_run$run.png"
          --plot-title "engram-bench node --mixed on a $ROWS-row table under $dir ($label), run $run of $runs")
  fi
  "$BENCH" node --mixed --file "$table" "${extra[@]}" "${plot[@]}" --json > "$json"
  if [ -n "$out" ]; then cp "$json" "$out/node_fairness_${label}_run$run.json"; fi
  python3 - "$run" "$json" <<'PY'
import json, sys
run, path = sys.argv[1:]
j = json.load(open(path))
f, s = j["fairness"], j["stopped_neighbour"]
bp, bs = f["b"]["private"], f["b"]["service"]
ap, as_ = f["a"]["private"], f["a"]["service"]
r = f["service_over_private"]
held = s["held_reads_seconds"]
print(f"run={run} b_gathers={bp['gathers']}/{bs['gathers']} "
      f"b_private_p50/p99/max_ms={bp['p50_ms']:.2f}/{bp['p99_ms']:.2f}/{bp['max_ms']:.2f} "
      f"b_service_p50/p99/max_ms={bs['p50_ms']:.2f}/{bs['p99_ms']:.2f}/{bs['max_ms']:.2f} "
      f"a_private_rows_per_s={ap['rows_per_s']:.0f} a_service_rows_per_s={as_['rows_per_s']:.0f} "
      f"b_p99_ratio={r['b_p99']:.2f} b_max_ratio={r['b_max']:.2f} a_rows_per_s_ratio={r['a_rows_per_s']:.3f} "
      f"stopped_alone_p50/max_ms={s['alone']['p50_ms']:.2f}/{s['alone']['max_ms']:.2f} "
      f"stopped_beside_p50/max_ms={s['beside_stopped']['p50_ms']:.2f}/{s['beside_stopped']['max_ms']:.2f} "
      f"stopped_max_ratio={s['beside_stopped_over_alone']['b_max']:.2f} "
      f"held_answered_before_stop={s['held_answered_before_stop']} "
      f"held_reads_s={'n/a' if held is None else format(held, '.2f')} held_outcome={s['held_outcome'][:40]!r}")
PY
done

if [ "$node_phases" = 1 ]; then
  echo "node_fairness: engram-bench node (memory, hits, misses) (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  "$BENCH" node --file "$table" --json > "$work/node.json"
  if [ -n "$out" ]; then cp "$work/node.json" "$out/node_phases_${label}.json"; fi
  python3 - "$work/node.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
m, mi = j["memory"], j["misses"]
print(f"node memory: node_pss_mib={m['node_pss_kib'] / 1024:.1f} one_private_pss_mib={m['one_private_pss_kib'] / 1024:.1f} "
      f"node_over_one_private={m['node_over_one_private']:.3f}")
for h in j["hits"]:
    print(f"node hit resident_rows={h['resident_rows']} rows_per_gather={h['rows_per_gather']} "
          f"client_ns_per_row={h['client_ns_per_row']:.1f} private_ns_per_row={h['private_ns_per_row']:.1f} "
          f"client_over_private={h['client_over_private']:.3f}")
print(f"node miss rows={mi['rows']} clients_rows_per_s={[round(x) for x in mi['client_rows_per_s']]} "
      f"private_rows_per_s={[round(x) for x in mi['private_rows_per_s']]} clients_over_private={mi['clients_over_private']:.3f}")
PY
fi
