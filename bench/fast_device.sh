#!/usr/bin/env bash
# fast_device.sh [DIR] [--plot] [--out OUTDIR]
#
# What a gather costs on a fast device, next to what the hardware costs, from
# the same runs: makes a 2M-row table of 264-B rows (~550 MB) under DIR
# (default /dev/shm: tmpfs accepts O_DIRECT on Linux >= 6.6 and stands in for
# a fast NVMe; pass a directory on a real disk to measure that disk), runs
# `engram-bench hit` and `engram-bench miss` ROUNDS times, and prints per round
# and gather size one line ending in `hit_ratio=X miss_ratio_fio=Y`, then the
# latency of a 24-row all-miss gather next to one 4 KiB read at QD 1 and to
# 24 reads handed to the raw engine at once (raw_batch: the device's floor).
# The table is removed at exit.
#
#   hit_ratio       store rows/s / flat memcpy rows/s, resident rows
#   miss_ratio_fio  store rows/s / fio io_uring IOPS (registered file and
#                   buffers, batched submit), all-miss gathers on a fresh store
#   miss_ratio_raw  store rows/s / engram-bench read IOPS (our raw engine)
#   miss_ratio_raw_batch  store rows/s / the raw engine reading batches of
#                   the gather's size on the caller's ring, each reaped read
#                   by read and finished before the next: the bound of one
#                   gather at a time on this device (n/a where the gather
#                   exceeds the depth)
#   miss_ratio_fio_batch  the same against fio's batches, each waited for
#                   whole in one call (a reference, not the bound)
#   (hit and miss ratios are medians of paired rounds: each store slice is
#   followed by its baselines' slices, so host drift cancels)
#
# --plot also draws, with gnuplot, OUTDIR/iops_vs_depth.png (all-miss rows/s
# against queue depth: store; raw engine and fio, continuous and in batches)
# and OUTDIR/latency_cdf.png (24-row all-miss gather vs one read at QD 1).
# OUTDIR: out/fast-device.
#
# Environment: ENGRAM_BENCH, ENGRAM_GEN (default: build/ next to bench/),
# ROWS (2000000), SECONDS_PER (2, per measurement), ROUNDS (2),
# SIZES ("24,4096"), DEPTHS ("1,4,16,32,64,128", the --plot sweep).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BENCH=${ENGRAM_BENCH:-$here/../build/engram-bench}
GEN=${ENGRAM_GEN:-$here/../build/engram-gen}
ROWS=${ROWS:-2000000}
SECONDS_PER=${SECONDS_PER:-2}
ROUNDS=${ROUNDS:-2}
SIZES=${SIZES:-24,4096}
DEPTHS=${DEPTHS:-1,4,16,32,64,128}
dir=/dev/shm
plot=0
out=out/fast-device
while [ $# -gt 0 ]; do
  case $1 in
    --plot) plot=1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fast_device: unknown option $1" >&2; exit 2 ;;
    *) dir=$1 ;;
  esac
  shift
done
for tool in "$BENCH" "$GEN"; do
  [ -x "$tool" ] || { echo "fast_device: $tool not built (cmake --build build --target engram-bench engram-gen)" >&2; exit 2; }
done
[ -d "$dir" ] || { echo "fast_device: no directory $dir" >&2; exit 2; }
command -v python3 > /dev/null || { echo "fast_device: python3 is needed to read the JSON results" >&2; exit 2; }
if ! command -v fio > /dev/null; then
  echo "fast_device: note: fio is not installed: miss_ratio_fio will be n/a" >&2
fi
if [ "$plot" = 1 ] && ! command -v gnuplot > /dev/null; then
  echo "fast_device: --plot needs gnuplot (apt-get install gnuplot-nox)" >&2
  exit 2
fi

# 4096-B blocks of floor(4088 / 264) = 15 rows: ~273 B per row, plus room.
need=$(( ROWS * 4096 / 15 + (64 << 20) ))
avail=$(df --output=avail -B1 "$dir" | tail -1 | tr -d ' ')
if [ "$avail" -lt "$need" ]; then
  echo "fast_device: $dir has $((avail >> 20)) MiB free; the $ROWS-row table needs $((need >> 20)) MiB" >&2
  exit 2
fi
work=$(mktemp -d "$dir/engram-fast-device.XXXXXX")
trap 'rm -rf "$work"' EXIT
table=$work/table.engram
echo "fast_device: generating $ROWS rows in $table" >&2
"$GEN" --rows "$ROWS" --seed 1 "$table" > /dev/null

# The figures of one round, one line per gather size (python reads both
# JSON-lines outputs; paths are passed as arguments, never as code).
summarize() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
rnd, hit_path, miss_path = sys.argv[1:]
hits = {j["rows_per_gather"]: j for j in map(json.loads, open(hit_path)) if j["kind"] == "hit"}
misses = [json.loads(l) for l in open(miss_path)]
lat = [j for j in misses if j["kind"] == "miss_latency"][0]
for m in (j for j in misses if j["kind"] == "miss"):
    n = m["rows_per_gather"]
    h = hits.get(n)
    fio = m.get("miss_ratio_fio")
    fio_batch = m.get("miss_ratio_fio_batch")
    raw_batch = m.get("miss_ratio_raw_batch")
    print(f"round={rnd} rows_per_gather={n} depth={m['depth']} "
          f"hit_store_ns_per_row={h['store_ns_per_row']:.1f} hit_memcpy_ns_per_row={h['memcpy_ns_per_row']:.1f} "
          f"hit_cpu_ns_per_row={h['store_cpu_ns_per_row']:.1f} "
          f"miss_rows_per_s={m['store_rows_per_s']:.0f} raw_iops={m['raw_iops']:.0f} "
          f"fio_iops={m.get('fio_iops', 0):.0f} miss_cpu_ns_per_row={m['store_cpu_ns_per_row']:.0f} "
          f"miss_ratio_raw={m['miss_ratio_raw']:.3f} "
          f"miss_ratio_raw_batch={'n/a' if raw_batch is None else format(raw_batch, '.3f')} "
          f"miss_ratio_fio_batch={'n/a' if fio_batch is None else format(fio_batch, '.3f')} "
          f"hit_ratio={h['hit_ratio']:.3f} miss_ratio_fio={'n/a' if fio is None else format(fio, '.3f')}")
g, r, b, f = lat["gather"], lat["raw_read"], lat["raw_batch"], lat.get("fio_read")
print(f"round={rnd} latency rows_per_gather={lat['rows_per_gather']} gathers={lat['gathers']} "
      f"gather_p50_us={g['p50_us']:.1f} gather_p99_us={g['p99_us']:.1f} "
      f"raw_read_p50_us={r['p50_us']:.1f} raw_read_p99_us={r['p99_us']:.1f} "
      f"raw_batch_p50_us={b['p50_us']:.1f} raw_batch_p99_us={b['p99_us']:.1f} "
      + (f"fio_read_p50_us={f['p50_us']:.1f} fio_read_p99_us={f['p99_us']:.1f}" if f else "fio_read=n/a"))
PY
}

for round in $(seq "$ROUNDS"); do
  echo "fast_device: round $round/$ROUNDS: hit" >&2
  "$BENCH" hit --file "$table" --rows-per-gather "$SIZES" --seconds "$SECONDS_PER" --json > "$work/hit.$round.json"
  echo "fast_device: round $round/$ROUNDS: miss" >&2
  "$BENCH" miss --file "$table" --rows-per-gather "$SIZES" --seconds "$SECONDS_PER" --json > "$work/miss.$round.json"
  summarize "$round" "$work/hit.$round.json" "$work/miss.$round.json"
done

if [ "$plot" = 1 ]; then
  mkdir -p "$out"
  echo "fast_device: queue-depth sweep ($DEPTHS) for the plot" >&2
  "$BENCH" miss --file "$table" --rows-per-gather "$DEPTHS" --seconds "$SECONDS_PER" --json > "$work/sweep.json"
  python3 - "$work/sweep.json" "$work/miss.1.json" "$out/iops_vs_depth.dat" "$out/latency_cdf.dat" <<'PY'
import json, sys
sweep, miss, iops_out, cdf_out = sys.argv[1:]
with open(iops_out, "w") as f:
    f.write("# depth store_rows_per_s raw_iops fio_iops fio_batch_iops raw_batch_rows_per_s\n")
    for j in map(json.loads, open(sweep)):
        if j["kind"] == "miss":
            f.write(f"{j['depth']} {j['store_rows_per_s']:.0f} {j['raw_iops']:.0f} {j.get('fio_iops', float('nan'))} "
                    f"{j.get('fio_batch_iops', float('nan'))} {j.get('raw_batch_rows_per_s', float('nan'))}\n")
lat = [j for j in map(json.loads, open(miss)) if j["kind"] == "miss_latency"][0]
with open(cdf_out, "w") as f:
    # gnuplot data blocks: 0 = store gather, 1 = fio read, 2 = raw engine read
    f.write("# store gather: percentile us\n")
    for p, us in lat["gather_cdf"]: f.write(f"{p} {us}\n")
    f.write("\n\n# fio read at QD 1\n")
    for p, us in lat.get("fio_read_cdf", []): f.write(f"{p} {us}\n")
    r = lat["raw_read"]
    f.write("\n\n# raw engine read at QD 1\n")
    for p, k in ((50, "p50_us"), (90, "p90_us"), (99, "p99_us"), (99.9, "p999_us")): f.write(f"{p} {r[k]}\n")
PY
  # gnuplot -c: the paths arrive as ARG1..ARG4 strings, not as script text.
  gnuplot -c "$here/fast_device.gp" "$out/iops_vs_depth.dat" "$out/latency_cdf.dat" \
    "$out/iops_vs_depth.png" "$out/latency_cdf.png"
  echo "fast_device: plots: $out/iops_vs_depth.png $out/latency_cdf.png" >&2
fi
