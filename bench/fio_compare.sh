#!/usr/bin/env bash
# fio_compare.sh FILE [ENGRAM_BENCH]
#
# Runs fio and `engram-bench read` alternately on the same FILE with the same
# block size (4 KiB random reads), O_DIRECT, depth and engine, and prints one
# line per (engine, depth/threads) ending in `iops_ratio=X p99_ratio=Y`
# (ours / fio; iops_ratio >= 1 and p99_ratio <= 1 mean we match or beat fio).
# Alternating (fio, ours, fio, ours, ...) spreads background noise over both.
#
# Environment: DEPTHS ("1 32 128") for io_uring, THREADS ("1 4") for
# pread-vs-psync, SECONDS_PER (3) per run, ROUNDS (2) runs each, averaged.
# Latency compared is fio's total latency (lat_ns, submit to completion),
# which is what engram-bench measures.
set -euo pipefail
FILE=${1:?usage: fio_compare.sh FILE [ENGRAM_BENCH]}
BENCH=${2:-${ENGRAM_BENCH:-$(dirname "$0")/../build/engram-bench}}
DEPTHS=${DEPTHS:-"1 32 128"}
THREADS=${THREADS:-"1 4"}
SECONDS_PER=${SECONDS_PER:-3}
ROUNDS=${ROUNDS:-2}
command -v fio >/dev/null || { echo "fio_compare: fio not found" >&2; exit 1; }
[ -x "$BENCH" ] || { echo "fio_compare: engram-bench not found at $BENCH" >&2; exit 1; }
[ -f "$FILE" ] || { echo "fio_compare: no file $FILE (engram-bench read --create-mib N makes one)" >&2; exit 1; }
SIZE=$(stat -c %s "$FILE")

# fio_run ENGINE DEPTH JOBS -> "iops p99_us"
fio_run() {
  fio --name=cmp --filename="$FILE" --size="$SIZE" --rw=randread --bs=4k --direct=1 \
      --ioengine="$1" --iodepth="$2" --numjobs="$3" --group_reporting --thread \
      --time_based --runtime="$SECONDS_PER" --norandommap --randrepeat=0 \
      --lat_percentiles=1 --output-format=json 2>/dev/null |
    python3 -c 'import json,sys
r=json.load(sys.stdin)["jobs"][0]["read"]
print(r["iops"], r["lat_ns"]["percentile"]["99.000000"]/1000.0)'
}

# ours_run BACKEND MODE DEPTH THREADS -> "iops p99_us"
ours_run() {
  "$BENCH" read --file "$FILE" --backends "$1" --mode "$2" --depths "$3" --threads "$4" \
      --seconds "$SECONDS_PER" --cache cold --json 2>/dev/null |
    python3 -c 'import json,sys
r=json.load(sys.stdin)[0]
print(r["iops"], r["p99_us"])'
}

# compare LABEL FIO_ENGINE FIO_DEPTH FIO_JOBS OUR_BACKEND OUR_MODE OUR_DEPTH OUR_THREADS
compare() {
  local label=$1 fsum="" osum=""
  for _ in $(seq "$ROUNDS"); do
    fsum+="$(fio_run "$2" "$3" "$4");"
    osum+="$(ours_run "$5" "$6" "$7" "$8");"
  done
  python3 - "$label" "$fsum" "$osum" <<'PY'
import sys
label, f, o = sys.argv[1], sys.argv[2], sys.argv[3]
def avg(s):
    rows = [list(map(float, x.split())) for x in s.split(';') if x.strip()]
    return [sum(c) / len(rows) for c in zip(*rows)]
fi, fp = avg(f); oi, op = avg(o)
print(f"{label} fio_iops={fi:.0f} ours_iops={oi:.0f} fio_p99_us={fp:.1f} ours_p99_us={op:.1f} "
      f"iops_ratio={oi/fi:.3f} p99_ratio={op/fp:.3f}")
PY
}

for d in $DEPTHS; do
  compare "engine=io_uring qd=$d threads=1" io_uring "$d" 1 io_uring async "$d" 1
done
for t in $THREADS; do
  compare "engine=pread/psync qd=1 threads=$t" psync 1 "$t" pread sync 1 "$t"
done
