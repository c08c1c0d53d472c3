#!/usr/bin/env bash
# Compares the row-cache presets with published online cache algorithms on
# the same lookups, text by text, at the matched capacity (distinct rows /
# 0.78, the report's fill), half and a quarter of it.
#   CACHESIM=/path/to/cachesim bench/peer_compare.sh [BUILD_DIR] [OUT_DIR]
#
# The peers are libCacheSim's (the simulator of the S3-FIFO and SIEVE
# authors), all fully associative: 23 online configurations (peers=(...)
# below) run by its `cachesim` tool. CACHESIM names your own cachesim
# executable; this script only runs it (the figures in bench/RESULTS.md and
# docs/lab-notes/ name the cachesim version they used).
#
# Texts: the shared deepspeed requests (tests/fixtures/traces/deepspeed) and
# the unseen slices bench/unseen_text.sh cuts from three other documentation
# corpora (it installs what it needs, and needs ENGRAM_TOKENIZE, your own
# tokenizer; ENGRAM_UNSEEN_DIR=DIR reuses slices
# already cut there). ENGRAM_PEER_TEXTS="deepspeed nodejs-3 ..." picks texts.
# For each text:
#   1. engram-replay replays the five requests through the presets and
#      belady (the offline optimum) at the three capacities, and writes its
#      deduplicated lookup stream (--export-rows), one row ID per line;
#   2. cachesim replays that stream through every peer, and its own Belady,
#      at the same capacities (--ignore-obj-size: a capacity in rows);
#   3. one table: avoidable misses (misses - distinct rows) of every peer,
#      preset and belady, and their ratio to the best online peer's.
# ENGRAM_PEER_POLICIES="default legacy ..." picks the engram-replay policies
# (presets or specs; belady is always added).
# cachesim prints miss ratios to 4 decimals: a peer's misses are known to
# +-0.00005 x lookups (+-147 on the deepspeed stream's 2,924,339 lookups).
# engram-replay's figures are exact. ENGRAM_PEER_REUSE=1 keeps the results of
# texts already replayed in ENGRAM_PEER_WORK (only the tables are made again).
# Writes OUT_DIR/peer_compare.txt (the tables); the raw outputs (~100 MB a
# text: lookups, cachesim's trace and results) go to ENGRAM_PEER_WORK/TEXT
# (default ~/.cache/engram-store/peer_compare). Runs under nice.
set -euo pipefail
usage='usage: CACHESIM=/path/to/cachesim bench/peer_compare.sh [BUILD_DIR] [OUT_DIR]
CACHESIM is your own libCacheSim cachesim executable; this script only runs it.
See the comment at the top of bench/peer_compare.sh for the texts, peers and
ENGRAM_PEER_* settings.'
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  echo "$usage"
  exit 0
fi
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-$here/bench/plots}
cachesim=${CACHESIM:-}
[[ -n "$cachesim" && -x "$cachesim" ]] || {
  echo "set CACHESIM to your own libCacheSim cachesim executable;" \
    "this script only runs it${cachesim:+ (CACHESIM=$cachesim is not an executable)}" >&2
  exit 2
}
[[ -x "$build/engram-replay" ]] || { echo "no $build/engram-replay: build first (scripts/build.sh)" >&2; exit 2; }
work=${ENGRAM_PEER_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/engram-store/peer_compare}
mkdir -p "$out" "$work"
cachesim=$(realpath "$cachesim")

# Online peers: label, cachesim algorithm, eviction parameters ("" = its defaults).
peers=(
  "LRU lru" "FIFO fifo" "CLOCK clock" "CLOCK-2bit clock n-bit-counter=2" "SIEVE sieve" "ARC arc" "LIRS lirs"
  "2Q twoq" "SLRU slru" "S3-FIFO s3fifo" "S3-FIFO-d s3fifod" "S3LRU s3lru" "QDLP qdlp" "SFIFO sfifo"
  "FIFO-Merge fifo-merge" "W-TinyLFU-1% wtinylfu window-size=0.01" "W-TinyLFU-10% wtinylfu window-size=0.1"
  "LHD lhd" "Cacheus cacheus" "LeCaR lecar" "Hyperbolic hyperbolic" "LFU lfu" "LFUDA lfuda"
)
read -r -a policies <<<"${ENGRAM_PEER_POLICIES:-legacy ways8 ways16 two-choice lru default full-lru}"

# ---- texts: name -> request directory
declare -A dirs
dirs[deepspeed]=$here/tests/fixtures/traces/deepspeed
texts=(${ENGRAM_PEER_TEXTS:-deepspeed valgrind-1 valgrind-2 nettle-1 nodejs-1 nodejs-2 nodejs-3 nodejs-4})
for t in "${texts[@]}"; do
  [[ $t == deepspeed ]] && continue
  [[ "${ENGRAM_PEER_REUSE:-0}" == 1 && -f "$work/$t/done" ]] && continue
  unseen=${ENGRAM_UNSEEN_DIR:-$work/unseen}
  if [[ ! -f "$unseen/$t/req5.u32" ]]; then
    ENGRAM_UNSEEN_DIR=$unseen ENGRAM_UNSEEN_REPLAY=0 "$here/bench/unseen_text.sh" "$build" "$out" >&2
  fi
  [[ -f "$unseen/$t/req5.u32" ]] || { echo "bench/unseen_text.sh made no text '$t'" >&2; exit 2; }
  dirs[$t]=$unseen/$t
done

replay=(nice "$build/engram-replay" --layout "$here/tests/fixtures/engram-hash/layout-v41.json" --layer 0
  --threads "${ENGRAM_REPLAY_THREADS:-2}")
for t in "${texts[@]}"; do
  w=$work/$t
  if [[ "${ENGRAM_PEER_REUSE:-0}" == 1 && -f "$w/done" ]]; then continue; fi
  d=${dirs[$t]}
  rm -rf "$w"
  mkdir -p "$w"
  reqs=(--request "$d/req1.u32@x12" --request "$d/req2.u32" --request "$d/req3.u32@x16"
    --request "$d/req4.u32" --request "$d/req5.u32")
  "${replay[@]}" "${reqs[@]}" --policy belady --capacity-rows 1000 --export-rows "$w/rows.txt" >/dev/null
  distinct=$(sort -u "$w/rows.txt" | wc -l)
  matched=$(((distinct * 100 + 39) / 78))
  caps=("$matched" "$((matched / 2))" "$((matched / 4))")
  echo "$distinct $(wc -l <"$w/rows.txt") ${caps[*]}" >"$w/sizes"
  echo "== $t: $distinct distinct rows, matched capacity $matched" >&2
  pol=()
  for p in "${policies[@]}" belady; do pol+=(--policy "$p"); done
  for c in "${caps[@]}"; do "${replay[@]}" "${reqs[@]}" "${pol[@]}" --capacity-rows "$c" --json >"$w/engram.$c.json"; done
  # libCacheSim's oracleGeneral binary trace (its fastest reader, and the one
  # its Belady needs): per lookup uint32 index, uint64 row, uint32 size 1,
  # int64 index of the row's next lookup (-1: none).
  python3 - "$w/rows.txt" "$w/rows.oracleGeneral.bin" <<'PY'
import array, struct, sys
ids = array.array('Q', (int(line) for line in open(sys.argv[1])))
following = array.array('q', [-1]) * len(ids)
seen = {}
for i in range(len(ids) - 1, -1, -1):
    following[i] = seen.get(ids[i], -1)
    seen[ids[i]] = i
rec = struct.Struct('<IQIq')
buf = bytearray(rec.size * len(ids))
for i, row in enumerate(ids):
    rec.pack_into(buf, i * rec.size, i & 0xffffffff, row, 1, following[i])
open(sys.argv[2], 'wb').write(buf)
PY
  sizes=$(IFS=,; echo "${caps[*]}")
  : >"$w/peers.txt"
  # Peers with the same eviction parameters run together, at most 8 to a
  # cachesim call (it takes 16 algorithms at most); its results come in
  # (algorithm, size) order.
  declare -A groups=()
  for p in "${peers[@]}" "Belady belady"; do
    read -r label algo params <<<"$p"
    groups[${params:--}]+="$label:$algo "
  done
  for params in "${!groups[@]}"; do
    read -r -a all <<<"${groups[$params]}"
    for ((i = 0; i < ${#all[@]}; i += 8)); do
      members=("${all[@]:i:8}")
      algos=$(IFS=,; echo "${members[*]#*:}")
      labels=("${members[@]%%:*}")
      extra=()
      [[ $params != - ]] && extra=(-e "$params")
      # cachesim writes result/ into its working directory.
      (cd "$w" && nice "$cachesim" rows.oracleGeneral.bin oracleGeneral "$algos" "$sizes" --ignore-obj-size 1 \
        --num-thread 2 "${extra[@]}") 2>>"$w/cachesim.err" |
        awk -v labels="${labels[*]}" -v n="${#caps[@]}" 'BEGIN { split(labels, label, " ") }
          / cache size .* req, miss ratio /{
          for (i = 1; i <= NF; ++i) { if ($i == "size") size = $(i + 1); if ($i == "req,") req = $(i - 1); if ($i == "ratio") { r = $(i + 1); break } }
          sub(/,$/, "", size); sub(/,$/, "", r); print label[int(k / n) + 1], size + 0, req, r; ++k }' >>"$w/peers.txt"
    done
  done
  touch "$w/done"
done

python3 - "$work" "${texts[@]}" <<'PY' | tee "$out/peer_compare.txt"
import json, sys
root, texts = sys.argv[1], sys.argv[2:]
for t in texts:
    w = f'{root}/{t}'
    distinct, lookups, *caps = map(int, open(f'{w}/sizes').read().split())
    rows = {}  # name -> {cap: (avoidable misses, exact?)}
    for cap in caps:
        totals = {}
        for line in open(f'{w}/engram.{cap}.json'):
            o = json.loads(line)
            totals[o['policy']] = totals.get(o['policy'], 0) + o['misses']
        for p, m in totals.items():
            rows.setdefault(p, {})[cap] = m - distinct
    peers = []
    expected = 24 * len(caps)  # 23 peers and Belady
    got = sum(1 for _ in open(f'{w}/peers.txt'))
    if got != expected: sys.exit(f'{t}: cachesim gave {got} results, expected {expected} (see {w}/cachesim.err)')
    for line in open(f'{w}/peers.txt'):
        if line.startswith('Belady '):
            label, size, req, ratio = line.split()
            cap = min(caps, key=lambda c: abs(c - int(size)))
            rows.setdefault('Belady (libCacheSim)', {})[cap] = max(0, round(float(ratio) * lookups) - distinct)
            continue
        label, size, req, ratio = line.split()
        size = int(size)
        cap = min(caps, key=lambda c: abs(c - size))  # cachesim may report a capacity rounded
        if int(req) != lookups: sys.exit(f'{t}: cachesim read {req} lookups, the export has {lookups}')
        # 4-decimal ratios: clamp what rounding puts below the distinct rows.
        rows.setdefault(label, {})[cap] = max(0, round(float(ratio) * lookups) - distinct)
        if label not in peers: peers.append(label)
    best = {c: min((rows[p][c], p) for p in peers) for c in caps}
    names = ['matched', 'half', 'quarter']
    resolution = -(-lookups // 20000)  # cachesim's +-0.00005 x lookups
    print(f'### {t}: {distinct:,} distinct rows, {lookups:,} lookups; capacities {", ".join(f"{c:,}" for c in caps)}; '
          f'peers +-{resolution:,}')
    print('best online peer: ' + '; '.join(f'{n} {best[c][1]} ({best[c][0]:,})' for n, c in zip(names, caps)))
    print('| policy | ' + ' | '.join(f'{n}: avoidable | / best peer' for n in names) + ' |')
    print('|---|' + '---|---|' * len(caps))
    order = [p for p in rows if p not in peers] + sorted(peers, key=lambda p: rows[p][caps[-1]])
    for p in order:
        cells = []
        for c in caps:
            a, b = rows[p].get(c), best[c][0]
            # No ratio where the best peer's avoidable misses are within cachesim's resolution.
            cells += ['-', '-'] if a is None else [f'{a:,}', f'{a / b:.3f}' if b > resolution else '-']
        print(f'| {p} | ' + ' | '.join(cells) + ' |')
    print()
PY
echo "wrote $out/peer_compare.txt" >&2
