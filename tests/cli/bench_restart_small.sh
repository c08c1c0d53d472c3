#!/usr/bin/env bash
# engram-bench restart on a slice of the deepspeed trace: the three restarts
# are reported (cold, warm, warm after its warm-up), a cold store warms
# nothing, and a store that waited for its warm-up starts at >= 0.9x the hit
# rate it had before the restart (hit rates do not depend on timing once the
# warm-up is waited for; the seconds are not checked). Bad arguments exit 2.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
source "$src/tests/cli/lib/optional_tool.bash"
bench=$build/engram-bench
optional_tool "$bench" "ENGRAM_BUILD_BENCH=OFF"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
head -c 16000 "$src/tests/fixtures/traces/deepspeed/req1.u32" > a.u32
"$bench" restart --request a.u32 --tables 1 --rows-per-table 100000 --work-dir "$work/w" --first-gathers 20 \
  --pressure 2 --warm > out.txt 2> err.txt || { cat err.txt; exit 1; }

python3 - out.txt <<'PY'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"^(cold|warm|warm \(waited\))\s+([0-9.]+)\s+([0-9.]+)\s+\S+.*\s(\d+)\s+([0-9.]+)$", line.rstrip())
    if m:
        rows[m.group(1)] = dict(first=float(m.group(2)), x_ref=float(m.group(3)), warm_rows=int(m.group(4)))
if sorted(rows) != ["cold", "warm", "warm (waited)"]:
    sys.exit(f"FAIL: restart rows {sorted(rows)} in:\n" + open(sys.argv[1]).read())
if rows["cold"]["warm_rows"] != 0:
    sys.exit(f"FAIL: a cold restart warmed rows: {rows['cold']}")
waited = rows["warm (waited)"]
if waited["warm_rows"] == 0 or waited["x_ref"] < 0.9 or waited["first"] < rows["cold"]["first"]:
    sys.exit(f"FAIL: the waited warm restart did not start warm: {waited} against cold {rows['cold']}")
print("restart rows:", rows)
PY

for bad in "--compute-ms -1" "--first-gathers 0" "--window 0"; do
  rc=0; "$bench" restart $bad > /dev/null 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || { echo "FAIL: restart $bad exited $rc, want 2"; exit 1; }
done
echo "bench restart: ok"
