#!/usr/bin/env bash
# engram-bench node on a small generated table with 2 clients: the JSON has
# its memory, hit and miss fields with positive sizes and ratios (their
# values are claims for bench/RESULTS.md, not for a timed test), the clients
# and the service are real processes that are all gone afterwards, and a bad
# --served is exit 2 with a message.
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
tmp=$(mktemp -d "$build/bench-node.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$gen" --rows 20000 --seed 7 "$tmp/t.engram" > /dev/null

timeout 60 "$bench" node --file "$tmp/t.engram" --clients 2 --resident-rows 2000 --rows-per-gather 24,256 \
  --seconds 0.1 --rounds 3 --memory-cache-mib 8 --miss-rows 512 --miss-rows-per-gather 64 --miss-rounds 1 \
  --json > "$tmp/node.json" 2> "$tmp/node.err" || { cat "$tmp/node.err" >&2; fail "node run"; }

python3 - "$tmp/node.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
def fail(msg): sys.exit(f"FAIL: {msg} in {json.dumps(j)}")
if j.get("clients") != 2: fail("clients is not 2")
m = j["memory"]
for k in ("service_pss_kib", "clients_pss_kib", "node_pss_kib", "one_private_pss_kib", "all_privates_pss_kib",
          "rows_per_process", "cache_bytes"):
    if not (isinstance(m.get(k), int) and m[k] > 0): fail(f"memory.{k} not a positive integer")
if m["node_pss_kib"] != m["service_pss_kib"] + m["clients_pss_kib"]: fail("node PSS is not service + clients")
for k in ("node_over_one_private", "all_privates_over_node"):
    if not m.get(k, 0) > 0: fail(f"memory.{k} not positive")
points = sorted((p["resident_rows"], p["rows_per_gather"]) for p in j["hits"])
if points != [(2000, 24), (2000, 256)]: fail(f"hit points {points}")
for p in j["hits"]:
    for k in ("client_ns_per_row", "private_ns_per_row", "client_over_private"):
        if not p[k] > 0: fail(f"hits.{k} not positive")
    if len(p["round_ratios"]) != 3: fail("not one ratio per round")
mi = j["misses"]
if mi["rows"] != 2 * 512: fail("miss rows are not clients x --miss-rows")
if len(mi["client_rows_per_s"]) != 1 or len(mi["private_rows_per_s"]) != 1: fail("not one miss figure per round")
if not (mi["client_rows_per_s"][0] > 0 and mi["private_rows_per_s"][0] > 0 and mi["clients_over_private"] > 0):
    fail("miss rates not positive")
print("bench node:", json.dumps(j["memory"]), len(j["hits"]), "hit points, miss ratio", mi["clients_over_private"])
PY

# Every process it started has ended: no engram-served or node-client is
# left holding the table.
if pgrep -f "node-client --file $tmp/t.engram" > /dev/null || pgrep -f -- "--table $tmp/t.engram" > /dev/null; then
  fail "a node-client or engram-served outlived the benchmark"
fi

rc=0
"$bench" node --file "$tmp/t.engram" --clients 2 --served "$tmp/no-such-served" --seconds 0.1 \
  > "$tmp/bad.out" 2> "$tmp/bad.err" || rc=$?
[ "$rc" -ne 0 ] || fail "a missing --served exited 0"
[ -s "$tmp/bad.err" ] || fail "a missing --served said nothing"
[ ! -s "$tmp/bad.out" ] || fail "a missing --served printed a result: $(cat "$tmp/bad.out")"
echo "bench node: ok"
