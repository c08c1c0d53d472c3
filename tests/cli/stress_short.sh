#!/usr/bin/env bash
# A short engram-stress run (issue 9): 4 threads of random gathers and
# read-aheads against a real store with a small cache, with I/O faults
# injected (EIO, short reads, EAGAIN, delays/reorders, bit flips). Every
# returned row is checked against the generator; the store's checksum and I/O
# error counters must match the injected faults. The long run is on demand:
#   engram-stress --seconds 60 --threads 4 --faults --json
# Usage: stress_short.sh BUILD_DIR SOURCE_DIR [SECONDS]
set -euo pipefail
build=$(cd "$1" && pwd)
seconds=${3:-${ENGRAM_STRESS_SECONDS:-10}}
stress=$build/engram-stress
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

"$stress" --help >/dev/null || fail "engram-stress --help"
# A duration that is not a finite, non-negative number of seconds is refused
# (NaN, 1e300 and -1 used to run for no time at all and report OK).
for bad in nan 1e300 -1; do
  set +e
  timeout 60 "$stress" --seconds "$bad" --rows 1000 --work-dir "$work" >/dev/null 2>"$work/bad.txt"
  rc=$?
  set -e
  [[ $rc -ne 0 && $rc -ne 124 && $rc -lt 128 ]] || fail "--seconds $bad: exit $rc"
  grep -q -- "--seconds" "$work/bad.txt" || fail "--seconds $bad: no message naming it: $(cat "$work/bad.txt")"
done
# A report that cannot be written (full disk, closed pipe) is a failure.
set +e
"$stress" --seconds 0 --rows 1000 --work-dir "$work" >/dev/full 2>"$work/bad.txt"
rc=$?
set -e
[[ $rc -ne 0 && $rc -lt 128 ]] || fail "report to a full disk: exit $rc"
grep -q "write to stdout failed" "$work/bad.txt" || fail "full-disk message: $(cat "$work/bad.txt")"
set +e
# Small table: the run is about the gather paths, not disk bandwidth (and must
# stay quick under ASan/TSan Debug builds).
"$stress" --seconds "$seconds" --threads 4 --faults --seed 9 --rows 20000 --cache-bytes $((2 << 20)) \
  --work-dir "$work" --json >"$work/report.json" 2>"$work/stderr.txt"
rc=$?
set -e
cat "$work/report.json"
[[ $rc -lt 128 ]] || fail "engram-stress killed by a signal (rc $rc): $(tail -n 20 "$work/stderr.txt")"
[[ -s $work/report.json ]] || fail "engram-stress printed no report (rc $rc): $(tail -n 20 "$work/stderr.txt")"
python3 - "$work/report.json" "$rc" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rc = int(sys.argv[2])
bad = []
if r["wrong_rows"] != 0: bad.append("wrong_rows = %d" % r["wrong_rows"])
if r["rows_verified"] <= 0: bad.append("no rows verified")
if r["gathers"] <= 0: bad.append("no gathers")
if r["faults_injected"] <= 0: bad.append("no faults injected")
if r["failed_gathers_by_cause"]["unexpected"] != 0: bad.append("unexpected gather failures")
kinds = r["faults_injected_by_kind"]
if r["store"]["checksum_failures"] != kinds["bit_flip"]:
    bad.append("checksum_failures %d != injected bit flips %d" % (r["store"]["checksum_failures"], kinds["bit_flip"]))
if r["store"]["io_errors"] != kinds["eio"]:
    bad.append("io_errors %d != injected EIO %d" % (r["store"]["io_errors"], kinds["eio"]))
bad += ["check %s failed" % k for k, ok in r["checks"].items() if not ok]
if not r["ok"]: bad.append("report says not ok: %s" % r.get("first_problem", ""))
if rc != 0: bad.append("exit code %d" % rc)
if bad:
    sys.exit("FAIL: " + "; ".join(bad))
print("stress_short: OK: %d gathers, %d rows verified, %d faults injected, 0 wrong rows"
      % (r["gathers"], r["rows_verified"], r["faults_injected"]))
PY
