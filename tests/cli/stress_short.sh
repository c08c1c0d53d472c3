#!/usr/bin/env bash
# A short engram-stress run: 4 threads of random gathers and
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

# Every backend: read-ahead racing its gather from another thread (no pin may
# be left), and a table truncated under a second store (clean failures, no
# signal, the other table keeps serving).
per_backend=$(( seconds / 3 > 2 ? seconds / 3 : 2 ))
# io_uring_3_rings: the gathering store's reads spread over three rings.
for backend in pread io_uring io_uring_3_rings mmap; do
  rings=1
  [[ $backend == io_uring_3_rings ]] && rings=3
  set +e
  "$stress" --seconds "$per_backend" --threads 3 --faults --truncate --backend "${backend%_3_rings}" --io-rings $rings \
    --seed 11 --rows 20000 --cache-bytes $((1 << 20)) --work-dir "$work" --json >"$work/$backend.json" 2>"$work/$backend.err"
  rc=$?
  set -e
  if [[ $backend == io_uring* && $rc -eq 2 ]] && grep -qi "io_uring" "$work/$backend.err"; then
    echo "stress_short: io_uring unavailable here, skipped: $(tail -n 1 "$work/$backend.err")"
    continue
  fi
  [[ $rc -lt 128 ]] || fail "$backend: engram-stress killed by a signal (rc $rc): $(tail -n 20 "$work/$backend.err")"
  python3 - "$work/$backend.json" "$rc" "$backend" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rc, backend = int(sys.argv[2]), sys.argv[3]
bad = ["check %s failed" % k for k, ok in r["checks"].items() if not ok]
if r["racing_gathers"] <= 0: bad.append("no racing read-ahead was gathered")
for k in ("no_read_ahead_pin_left", "truncated_table_failed_cleanly", "other_table_kept_serving"):
    if k not in r["checks"]: bad.append("check %s missing" % k)
if r["cache"]["pinned_rows_at_end"] != 0: bad.append("%d rows left pinned" % r["cache"]["pinned_rows_at_end"])
if rc != 0: bad.append("exit code %d (%s)" % (rc, r.get("first_problem", "")))
if bad:
    sys.exit("FAIL (%s): %s\n%s" % (backend, "; ".join(bad), json.dumps(r.get("truncation"), indent=1)))
t = r["truncation"]
print("stress_short %s: OK: %d racing gathers, 0 pins left; truncated table: %d clean failures (%s), witness %d ok"
      % (backend, r["racing_gathers"], t["victim_failed_gathers"], t.get("first_failure", ""), t["witness_ok_gathers"]))
PY
done
