#!/usr/bin/env bash
# The default policy is to be checked "on text you have not seen".
# This cuts the report's five-request workload from three documentation
# corpora that are neither the deepspeed docs of tests/fixtures/traces nor
# slices of them, and replays legacy, default and belady at the matched
# capacity (distinct rows / 0.78, the report's fill), half and a quarter:
#   - nodejs: the Node.js API reference (/usr/share/doc/nodejs/api/*.md or
#     *.md.gz, sorted, first 1.5 MB), Debian package nodejs-doc
#     (ENGRAM_NODEJS_API_DIR points at another copy of the pages);
#   - valgrind: the Valgrind user manual (HTML, tags stripped), package valgrind;
#   - nettle: the Nettle manual (HTML, tags stripped), package nettle-dev.
# Tokenizer: the DeepSeek-V3 one, as the user's own executable (below).
# Its texts are the documentation files those Debian packages install under
# /usr/share/doc; its only other input is the user's own tokenizer.
# Requests are cut like tests/fixtures/traces/README's (A = 20,000 tokens, B =
# 60,000 unless the corpus is short; A', B', A'' restart with 16 seeded
# pseudo-random tokens; request 1 in 12 gathers, 3 in 16, the rest 4,096 tokens).
#   bench/unseen_text.sh [BUILD_DIR] [OUT_DIR]
# The Node.js text differs between versions of its docs: the summary's first
# line records the packages used.
# Installs the Debian packages whose documentation it reads (nodejs-doc
# valgrind nettle-dev) and python3. The tokenizer is the user's own executable,
# which this script only runs: ENGRAM_TOKENIZE=/path/to/tokenize, called as
# `tokenize IN.txt OUT.u32`, must write IN's DeepSeek-V3 token IDs as
# little-endian uint32, without special tokens, dropping IDs outside
# 3..127,999 as the shared traces do (exit 2 without it).
# Writes OUT_DIR/replay_unseen_text.txt (the replay tables) and prints a summary.
# ENGRAM_UNSEEN_DIR=DIR keeps the tokenized corpora and the slices' requests
# in DIR (DIR/NAME/req1.u32 ... req5.u32) instead of a temporary directory;
# with ENGRAM_UNSEEN_REPLAY=0 the script stops there (bench/peer_compare.sh
# makes its texts that way).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-$here/bench/plots}
tokenize=${ENGRAM_TOKENIZE:-}
[[ -x "$build/engram-replay" ]] || { echo "no $build/engram-replay: build first (scripts/test.sh or cmake)" >&2; exit 1; }
mkdir -p "$out"

if [[ -z "$tokenize" || ! -x "$tokenize" ]]; then
  echo "unseen_text: set ENGRAM_TOKENIZE to your own DeepSeek-V3 tokenizer executable (tokenize IN.txt OUT.u32);" \
    "this script only runs it${tokenize:+ (ENGRAM_TOKENIZE=$tokenize is not an executable)}" >&2
  exit 2
fi

sudo=""; [[ $(id -u) == 0 ]] || sudo=sudo
need=()
command -v python3 >/dev/null || need+=(python3)
api=${ENGRAM_NODEJS_API_DIR:-/usr/share/doc/nodejs/api}
compgen -G "$api/fs.md*" >/dev/null || need+=(nodejs-doc)
[[ -f /usr/share/doc/valgrind/html/mc-manual.html ]] || need+=(valgrind)
[[ -f /usr/share/doc/nettle-dev/nettle.html ]] || need+=(nettle-dev)
if ((${#need[@]})); then
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [[ -n "${ENGRAM_UNSEEN_DIR:-}" ]]; then
  work=$ENGRAM_UNSEEN_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
python3 - "$work" "$api" <<'PY'
import glob, gzip, html, re, sys
work, api = sys.argv[1], sys.argv[2]
def strip(path):
    s = open(path, encoding='utf-8', errors='replace').read()
    s = re.sub(r'(?is)<(script|style).*?</\1>', '', s)
    return html.unescape(re.sub(r'<[^>]+>', '', s))
def read(path):  # Debian's nodejs-doc gzips the pages
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt', encoding='utf-8', errors='replace') as f:
        return f.read()
pages = glob.glob(api + '/*.md') + glob.glob(api + '/*.md.gz')
node = ''.join(read(p) for p in sorted(pages, key=lambda p: p.removesuffix('.gz')))
if not node: sys.exit(f'no *.md pages in {api}')
open(work + '/nodejs.txt', 'w').write(node[:1500000])
manuals = ['manual-intro', 'manual-core', 'manual-core-adv', 'mc-manual', 'cg-manual', 'cl-manual',
           'hg-manual', 'drd-manual', 'ms-manual', 'dh-manual', 'lk-manual', 'nl-manual', 'bbv-manual',
           'manual-writing-tools', 'design-impl', 'faq', 'dist.readme']
open(work + '/valgrind.txt', 'w').write('\n'.join(strip(f'/usr/share/doc/valgrind/html/{m}.html') for m in manuals))
open(work + '/nettle.txt', 'w').write(strip('/usr/share/doc/nettle-dev/nettle.html'))
PY
for corpus in nodejs valgrind nettle; do
  "$tokenize" "$work/$corpus.txt" "$work/$corpus.u32" >&2
done

# Slices: name corpus A_begin A_end B_begin B_end.
slices=(
  "valgrind-1 valgrind 1000 21000 60000 120000"
  "valgrind-2 valgrind 125000 145000 80000 140000"
  "nettle-1 nettle 0 15000 20000 70000"
  "nodejs-1 nodejs 1000 21000 60000 120000"
  "nodejs-2 nodejs 150000 170000 200000 260000"
  "nodejs-3 nodejs 300000 320000 340000 400000"
  "nodejs-4 nodejs 125000 140000 20000 90000"
)
for spec in "${slices[@]}"; do
  read -r name corpus a0 a1 b0 b1 <<<"$spec"
  "$here/bench/make_requests.py" "$work/$corpus.u32" "$work/$name" "$a0" "$a1" "$b0" "$b1"
done
[[ "${ENGRAM_UNSEEN_REPLAY:-1}" == 1 ]] || exit 0

replay=("$build/engram-replay" --layout "$here/tests/fixtures/engram-hash/layout-v41.json" --layer 0
  --threads "${ENGRAM_REPLAY_THREADS:-2}")
{
  echo "# bench/unseen_text.sh, $(date -u +%F); packages: $(dpkg-query -W -f='${Package} ${Version}\n' nodejs nodejs-doc valgrind nettle-dev 2>/dev/null | awk '{printf "%s %s; ", $1, ($2 == "" ? "(not installed)" : $2)}'); Node.js pages from $api"
  for spec in "${slices[@]}"; do
    read -r name corpus a0 a1 b0 b1 <<<"$spec"
    d=$work/$name
    reqs=(--request "$d/req1.u32@x12" --request "$d/req2.u32" --request "$d/req3.u32@x16"
      --request "$d/req4.u32" --request "$d/req5.u32")
    distinct=$("${replay[@]}" "${reqs[@]}" --policy legacy --capacity-rows 1000 |
      sed -n 's/.* \([0-9,]*\) distinct rows$/\1/p' | tr -d ,)
    matched=$(( (distinct * 100 + 39) / 78 ))
    echo "### $name ($corpus: A = tokens $a0..$((a1 - 1)), B = $b0..$((b1 - 1)); $distinct distinct rows -> matched $matched)"
    "${replay[@]}" "${reqs[@]}" --policy legacy --policy default --policy belady \
      --capacity-rows "$matched" --sweep 0.25,0.5,1
  done
} > "$out/replay_unseen_text.txt"
echo "wrote $out/replay_unseen_text.txt" >&2

# Summary: avoidable misses (misses - distinct rows) as a multiple of belady's.
python3 - "$out/replay_unseen_text.txt" <<'PY'
import re, sys
rows, name, distinct, cap = {}, None, None, None
for line in open(sys.argv[1]):
    if line.startswith('### '): name = line.split()[1]
    m = re.search(r'([\d,]+) distinct rows$', line.strip())
    if m: distinct = int(m[1].replace(',', ''))
    m = re.match(r'== capacity (\d+) rows', line)
    if m: cap = int(m[1])
    f = line.split()
    if len(f) > 8 and f[0] in ('legacy', 'default', 'belady') and f[1][0].isdigit():
        rows.setdefault(name, {}).setdefault(cap, {})[f[0]] = (int(f[7].replace(',', '')), f[4], f[5])
        rows[name]['distinct'] = distinct
print('| slice | matched: default req4 / req5 vs belady | half: default | legacy | quarter: default | legacy |')
print('|---|---|---|---|---|---|')
for name, by_cap in rows.items():
    n = by_cap.pop('distinct'); caps = sorted(by_cap)
    q, h, m = (by_cap[c] for c in caps)
    ratio = lambda t, p: (t[p][0] - n) / (t['belady'][0] - n)
    print(f"| {name} | {m['default'][1]} / {m['default'][2]} vs {m['belady'][1]} / {m['belady'][2]} "
          f"| {ratio(h, 'default'):.3f}x | {ratio(h, 'legacy'):.3f}x | {ratio(q, 'default'):.3f}x | {ratio(q, 'legacy'):.3f}x |")
PY
