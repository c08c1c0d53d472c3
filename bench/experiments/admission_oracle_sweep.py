#!/usr/bin/env python3
"""How good must the default's admission be to beat every online peer?

Drives an `engram-replay` built with bench/experiments/oracle_bounds.patch over
the eight texts at a quarter and half of the matched capacity, and prints, per
text and pressure, the avoidable misses (summed misses - distinct rows) of:

  admit-est     every admission by the oracle, the default's victim order
  admit-lru     every admission by the oracle, the oldest candidate evicted
  admit-fifo    every admission by the oracle, the first-inserted candidate evicted
  both          victim and admission by the oracle (Belady on the 10 candidates)
  unremembered  admit-lru, the oracle deciding only rows the history does not
                remember (first seen, or forgotten); the reuse test the rest
  remembered    admit-lru, the oracle deciding only remembered rows
  flip Q        unremembered, each oracle decision reversed with probability Q
  phase table   unremembered, decided instead by a table of (request,
                twentieth of the request, first-ever) -> admit, each cell set to
                the majority of the oracle's decisions in the unremembered run
                (fit per text and pressure, with hindsight)

with their ratios to the best online libCacheSim peer. The texts, their
distinct rows, matched capacities and best peers are read from
bench/peer_compare.sh's tables in bench/plots (PEER_TABLES).

  python3 bench/experiments/admission_oracle_sweep.py ORACLE_BUILD [UNSEEN_DIR] [TEXT,...]

UNSEEN_DIR holds the slices cut by
`ENGRAM_UNSEEN_DIR=DIR ENGRAM_UNSEEN_REPLAY=0 bench/unseen_text.sh build`.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LAYOUT = os.path.join(REPO, 'tests/fixtures/engram-hash/layout-v41.json')

PEER_TABLES = [os.path.join(REPO, 'bench/plots/peer_compare.txt'),
               os.path.join(REPO, 'bench/plots/peer_compare_five_more_texts.txt')]
HEADER = re.compile(r'^### (\S+): ([\d,]+) distinct rows, [\d,]+ lookups; capacities ([\d,]+),')
BEST = re.compile(r'^best online peer: .*; half \S+ \(([\d,]+)\); quarter \S+ \(([\d,]+)\)')


def read_peer_tables(paths):
    """text -> (distinct rows, matched capacity N, best peer's avoidable misses
    (quarter, half)), from bench/peer_compare.sh's tables."""
    texts, text = {}, None
    for path in paths:
        with open(path) as f:
            for line in f:
                if m := HEADER.match(line):
                    text = m[1]
                    distinct, n = (int(m[i].replace(',', '')) for i in (2, 3))
                elif (m := BEST.match(line)) and text is not None:
                    half, quarter = (int(m[i].replace(',', '')) for i in (1, 2))
                    texts[text] = (distinct, n, (quarter, half))
                    text = None
    return texts


LRU = 'default,victim=oldest'
TWENTIETHS = 20


def replay(binary, unseen, texts, text, fraction, policy, env):
    distinct, n, _ = texts[text]
    d = os.path.join(REPO, 'tests/fixtures/traces/deepspeed') if text == 'deepspeed' else os.path.join(unseen, text)
    cmd = [binary, '--layout', LAYOUT, '--layer', '0', '--threads', '1',
           '--request', f'{d}/req1.u32@x12', '--request', f'{d}/req2.u32', '--request', f'{d}/req3.u32@x16',
           '--request', f'{d}/req4.u32', '--request', f'{d}/req5.u32',
           '--policy', policy, '--capacity-rows', str(n), '--sweep', fraction, '--json']
    out = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, check=True)
    runs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith('{')]
    return sum(r['misses'] for r in runs) - distinct, [r['lookups'] for r in runs]


def phase_table(dump, lookups):
    """The majority decision per (request, twentieth, first-ever) cell of a dump."""
    starts = [sum(lookups[:r]) for r in range(len(lookups))]
    yes, total = defaultdict(int), defaultdict(int)
    with open(dump, 'rb') as f:
        for _row, request, pos, flags in struct.iter_unpack('<4Q', f.read()):
            cell = (request * TWENTIETHS + (pos - starts[request]) * TWENTIETHS // lookups[request]) * 2 + (flags & 1)
            total[cell] += 1
            yes[cell] += flags >> 1
    table = bytes(int(2 * yes[c] > total[c]) for c in range(len(lookups) * TWENTIETHS * 2))
    agree = sum(max(yes[c], total[c] - yes[c]) for c in total)
    return table, agree / max(1, sum(total.values()))


def main():
    binary = sys.argv[1]
    unseen = sys.argv[2] if len(sys.argv) > 2 else '/work/unseen'
    texts = read_peer_tables(PEER_TABLES)
    chosen = sys.argv[3].split(',') if len(sys.argv) > 3 else list(texts)
    unknown = [t for t in chosen if t not in texts]
    if unknown:
        sys.exit(f'no peer table for {", ".join(unknown)} in {", ".join(PEER_TABLES)}')
    admit = {'ORACLE_ADMIT': '1', 'ORACLE_POLICY': LRU}
    scoped = {**admit, 'ORACLE_SCOPE': '1'}
    variants = [
        ('default', 'default', {}),
        ('admit-est', 'default', {'ORACLE_ADMIT': '1'}),
        ('admit-lru', LRU, admit),
        ('admit-fifo', 'default', {'ORACLE_ADMIT': 'fifo'}),
        ('both', 'default', {'ORACLE_EVICT': '1'}),
        ('unremembered', LRU, scoped),
        ('remembered', LRU, {**admit, 'ORACLE_SCOPE': '2'}),
        ('flip 0.05', LRU, {**scoped, 'ORACLE_FLIP': '0.05'}),
        ('flip 0.1', LRU, {**scoped, 'ORACLE_FLIP': '0.1'}),
        ('flip 0.2', LRU, {**scoped, 'ORACLE_FLIP': '0.2'}),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for text in chosen:
            for column, fraction in enumerate(('0.25', '0.5')):
                peer = texts[text][2][column]
                row = {}
                for name, policy, env in variants:
                    row[name], lookups = replay(binary, unseen, texts, text, fraction, policy, env)
                dump, table_file = os.path.join(tmp, 'dump'), os.path.join(tmp, 'table')
                replay(binary, unseen, texts, text, fraction, LRU, {**scoped, 'ORACLE_DUMP': dump})
                table, accuracy = phase_table(dump, lookups)
                with open(table_file, 'wb') as f:
                    f.write(table)
                row['phase table'], _ = replay(binary, unseen, texts, text, fraction, LRU, {**scoped, 'ORACLE_TABLE': table_file})
                print(json.dumps({'text': text, 'fraction': fraction, 'best_peer': peer,
                                  'phase_table_accuracy': round(accuracy, 4),
                                  'avoidable': row, 'ratio': {k: round(v / peer, 3) for k, v in row.items()}}),
                      flush=True)


if __name__ == '__main__':
    main()
