#!/usr/bin/env bash
# engram-bench node --mixed on a small generated table: the JSON has the
# fairness figures of both pairs (B's latencies, A's rows/s, the ratios) and
# the stopped neighbour's (B alone and beside a stopped A), every gather of A
# and B was a miss and none failed, the CSV has one line per B gather, the
# CDF chart is drawn (when gnuplot is installed), and every process it
# started -- engram-served, A (stopped and continued), B -- is gone
# afterwards. A table too small for the workloads is exit 2 with a message.
# The figures themselves are claims for bench/RESULTS.md, not for a test.
set -euo pipefail
build=$1
bench=$build/engram-bench
gen=$build/engram-gen
served=$build/engram-served
if [ ! -x "$bench" ] || [ ! -x "$gen" ] || [ ! -x "$served" ]; then
  echo "engram-bench, engram-gen or engram-served not built: skipping"
  exit 0
fi
# Under the build dir (O_DIRECT works there), not tmpfs, which refuses
# O_DIRECT on older kernels.
tmp=$(mktemp -d "$build/bench-node-mixed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$gen" --rows 40000 --seed 7 "$tmp/t.engram" > /dev/null

small=(--bulk-rows-per-gather 2000 --bulk-in-flight 3 --bulk-gathers 6 --decode-rows-per-gather 64
       --decode-max-gathers 40 --decode-interval-ms 2 --stopped-decode-gathers 10)
plot=()
if command -v gnuplot > /dev/null; then plot=(--plot "$tmp/cdf.png"); fi
timeout 60 "$bench" node --mixed --file "$tmp/t.engram" "${small[@]}" --csv "$tmp/b.csv" "${plot[@]}" --json \
  > "$tmp/mixed.json" 2> "$tmp/mixed.err" || { cat "$tmp/mixed.err" >&2; fail "node --mixed run"; }

python3 - "$tmp/mixed.json" "$tmp/b.csv" <<'PY'
import csv, json, sys
j = json.load(open(sys.argv[1]))
def fail(msg): sys.exit(f"FAIL: {msg}")
if j.get("mode") != "mixed": fail("mode is not mixed")
if j["table_rows"] != 40000: fail("table_rows is not the table's")
def check_series(name, s, gathers=None):
    n = s["gathers"]
    if not n >= 1: fail(f"{name}: no gathers")
    if gathers is not None and n != gathers: fail(f"{name}: {n} gathers, not {gathers}")
    if len(s["latencies_us"]) != n: fail(f"{name}: not one latency per gather")
    if not all(v > 0 for v in s["latencies_us"]): fail(f"{name}: a latency is not positive")
    if not 0 < s["p50_ms"] <= s["p99_ms"] <= s["max_ms"]: fail(f"{name}: p50 <= p99 <= max does not hold")
    if abs(s["max_ms"] - max(s["latencies_us"]) / 1000) > 1e-6: fail(f"{name}: max is not the slowest latency")
    if s["hit_rows"] != 0: fail(f"{name}: {s['hit_rows']} rows hit: B's rows were not all never read")
    if s["failed"] != 0: fail(f"{name}: {s['failed']} gathers failed")
    if not isinstance(s["ran_out"], bool): fail(f"{name}: ran_out is not a bool")
f = j["fairness"]
if f["b"]["rows_per_gather"] != 64 or f["b"]["interval_ms"] != 2 or f["b"]["shares_bulk_rows"] is not False:
    fail("fairness.b's workload is not the one asked for")
for side in ("private", "service"):
    check_series(f"fairness.b.{side}", f["b"][side])
    a = f["a"][side]
    if a["rows"] != 6 * 2000: fail(f"fairness.a.{side}: {a['rows']} rows, not 6 x 2000")
    if not (a["seconds"] > 0 and a["rows_per_s"] > 0): fail(f"fairness.a.{side}: rate not positive")
    if a["hit_rows"] != 0 or a["failed"] != 0: fail(f"fairness.a.{side}: hits or failures")
if (f["a"]["rows_per_gather"], f["a"]["in_flight"], f["a"]["gathers"]) != (2000, 3, 6): fail("fairness.a's workload")
for k in ("private_a", "private_b", "service"):
    if not f["cache_bytes"][k] > 0: fail(f"fairness.cache_bytes.{k} not positive")
r = f["service_over_private"]
for k in ("b_p50", "b_p99", "b_max", "a_rows_per_s"):
    if not r[k] > 0: fail(f"fairness.service_over_private.{k} not positive")
if abs(r["b_p99"] - f["b"]["service"]["p99_ms"] / f["b"]["private"]["p99_ms"]) > 1e-9: fail("b_p99 is not the ratio")
t = f["targets"]
if (t["b_p99_at_most"], t["b_max_at_most"], t["a_rows_per_s_at_least"]) != (1.5, 2, 0.9): fail("fairness targets")
if not isinstance(t["met"], bool): fail("fairness.targets.met is not a bool")
s = j["stopped_neighbour"]
check_series("stopped_neighbour.alone", s["alone"], 10)
check_series("stopped_neighbour.beside_stopped", s["beside_stopped"], 10)
if s["held_rows"] != 3 * 2000: fail("held_rows is not 3 x 2000")
if not 0 <= s["held_answered_before_stop"] <= 3: fail("held_answered_before_stop is not 0..3")
if not (s["held_reads_seconds"] is None or s["held_reads_seconds"] >= 0): fail("held_reads_seconds")
if not s["held_outcome"]: fail("no held_outcome")
if not s["beside_stopped_over_alone"]["b_max"] > 0: fail("stopped ratio not positive")
if not isinstance(s["targets"]["met"], bool) or s["targets"]["b_max_at_most"] != 2: fail("stopped targets")
rows = list(csv.DictReader(open(sys.argv[2])))
expect = {"private": f["b"]["private"], "service": f["b"]["service"], "alone": s["alone"],
          "beside_stopped": s["beside_stopped"]}
for side, series in expect.items():
    got = [float(x["latency_us"]) for x in rows if x["side"] == side]
    if len(got) != series["gathers"]: fail(f"CSV: {len(got)} {side} lines, not {series['gathers']}")
    if any(abs(a - b) > 0.051 for a, b in zip(got, series["latencies_us"])): fail(f"CSV: {side} latencies differ")
if len(rows) != sum(x["gathers"] for x in expect.values()): fail("CSV: lines of no side")
print("bench node --mixed: B p99 service/private", r["b_p99"], "A rows/s", r["a_rows_per_s"],
      "stopped/absent", s["beside_stopped_over_alone"]["b_max"])
PY
if [ ${#plot[@]} -gt 0 ]; then [ -s "$tmp/cdf.png" ] || fail "no CDF chart"; fi

# Every process it started has ended: no engram-served or node-client (A
# stopped and continued, or B) is left holding the table.
if pgrep -f "node-client --file $tmp/t.engram" > /dev/null || pgrep -f -- "--table $tmp/t.engram" > /dev/null; then
  fail "a node-client or engram-served outlived the benchmark"
fi

# A table too small for the workloads: exit 2, a message, no result.
"$gen" --rows 3000 --seed 7 "$tmp/small.engram" > /dev/null
rc=0
"$bench" node --mixed --file "$tmp/small.engram" "${small[@]}" > "$tmp/bad.out" 2> "$tmp/bad.err" || rc=$?
[ "$rc" -eq 2 ] || fail "a too-small table exited $rc, not 2"
grep -q "never-read rows" "$tmp/bad.err" || fail "a too-small table said: $(cat "$tmp/bad.err")"
[ ! -s "$tmp/bad.out" ] || fail "a too-small table printed a result: $(cat "$tmp/bad.out")"
echo "bench node --mixed: ok"
