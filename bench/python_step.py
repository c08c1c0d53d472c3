#!/usr/bin/env python3
"""A runtime's step from Python, beside its parts, as ratios from one run.

Steps of --tokens tokens over the two layers of engram-bench step's tables
(generate them with `engram-bench step` first), all hits (one warm store, the
same steps again) and all misses (a fresh store per mode and round, new
tokens), through:
  flat         Store.gather per layer of the step's row IDs (hashed beforehand)
  hash_gather  Hasher.row_ids per layer + Store.gather per layer: the baseline
  stage        Store.stage (tokens in)
  gather_step  Store.gather_step (the step's [tokens, layers, slots] IDs in)
  ring         StepRing.start_gather_step, spinning on the slot's words, wait,
               release
Each figure is ns per row (rows = tokens x layers x 24) of the fastest of
--rounds rounds, and x_hash_gather is the median over rounds of the round's
ratio to hash_gather. --history sets the tokens of history given with each
step (stage's cost must not depend on it).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_step.py --dir /dev/shm/engram-bench-step
"""

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import engram_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN_MAP = os.path.join(ROOT, "tests", "fixtures", "engram-hash", "token-map.u32")
MODES = ["flat", "hash_gather", "stage", "gather_step", "ring"]


def open_store(tables, cache_mib):
    return engram_store.Store(tables=tables, cache_bytes=cache_mib << 20, token_map=TOKEN_MAP)


def hashers_of(store, work):
    """One Hasher per layer, from the layout each table embeds."""
    hashers = []
    for t in range(2):
        path = os.path.join(work, f"layout{t}.json")
        with open(path, "w") as f:
            json.dump(json.loads(store.metadata_json(t))["hash_layout"], f)
        hashers.append(engram_store.Hasher(path, 0, TOKEN_MAP))
    return hashers


def make_steps(hashers, text, history, tokens, count):
    """(history, tokens, ids [tokens, layers, 24], each layer's IDs) per step, cut from text."""
    steps = []
    for k in range(count):
        begin = history + k * tokens
        h, t = text[begin - history:begin], text[begin:begin + tokens]
        per_layer = [x.row_ids(t, history=h).reshape(-1) for x in hashers]
        steps.append((h, t, np.stack([ids.reshape(len(t), 24) for ids in per_layer], axis=1), per_layer))
    return steps


def run(mode, store, ring, hashers, steps, out, layer_out):
    """Seconds for every step in `steps` through `mode`."""
    start = time.perf_counter()
    for h, t, ids, per_layer in steps:
        n = len(t)
        if mode == "flat":
            for layer in range(2):
                store.gather(layer, per_layer[layer], layer_out[layer][:n * 24])
        elif mode == "hash_gather":
            for layer in range(2):
                store.gather(layer, hashers[layer].row_ids(t, history=h).reshape(-1), layer_out[layer][:n * 24])
        elif mode == "stage":
            store.stage(t, h, out[:n])
        elif mode == "gather_step":
            store.gather_step(ids, out[:n])
        else:
            slot, sequence = ring.start_gather_step(ids)
            words = ring.words(slot)
            while not (words == sequence).all():  # as the GPU's stream waits
                pass
            ring.wait(slot)
            ring.release(slot)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", default="/dev/shm/engram-bench-step", help="engram-bench step's tables (layer*.engram)")
    p.add_argument("--tokens", type=int, nargs="+", default=[1, 8, 64, 512])
    p.add_argument("--history", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--hit-rows", type=int, default=200000, help="rows per mode and round, all hits")
    p.add_argument("--miss-rows", type=int, default=50000, help="rows per mode and round, all misses")
    p.add_argument("--cases", nargs="+", default=["hit", "miss"])
    args = p.parse_args()
    tables = sorted(glob.glob(os.path.join(args.dir, "**", "layer*.engram"), recursive=True))[:2]
    if len(tables) != 2:
        sys.exit(f"python_step: no two layer*.engram under {args.dir}: run engram-bench step --dir {args.dir} first")
    vocabulary = np.fromfile(TOKEN_MAP, dtype="<u4").size
    work = tempfile.mkdtemp(prefix="engram-python-step-")
    with open_store(tables, 64) as probe:
        hashers = hashers_of(probe, work)
        print(f"python step: {probe.io_description}; tables {tables}; history {args.history} tokens")
    rng = np.random.default_rng(1)
    for case in args.cases:
        for n in args.tokens:
            rows_per_step = n * 2 * 24
            count = max(1, (args.hit_rows if case == "hit" else args.miss_rows) // rows_per_step)
            best = {m: float("inf") for m in MODES}
            ratios = {m: [] for m in MODES}
            hits = {m: 0.0 for m in MODES}
            warm = open_store(tables, 1024) if case == "hit" else None
            if warm:
                text = rng.integers(0, vocabulary, size=args.history + 16 * n, dtype=np.uint32)
                steps = make_steps(hashers, text, args.history, n, 16)
                steps = (steps * (count // len(steps) + 1))[:count]
            for r in range(args.rounds):
                if not warm:
                    text = rng.integers(0, vocabulary, size=args.history + count * n, dtype=np.uint32)
                    steps = make_steps(hashers, text, args.history, n, count)
                took = {}
                for mode in MODES:
                    store = warm or open_store(tables, 256)
                    ring = store.step_ring(slots=2, max_tokens=n) if mode == "ring" else None
                    out = np.empty((n, 2, 24, store.record_bytes(0)), dtype=np.uint8)
                    layer_out = [np.empty((n * 24, store.record_bytes(0)), dtype=np.uint8) for _ in range(2)]
                    if warm and r == 0:
                        run(mode, store, ring, hashers, steps, out, layer_out)  # warm up
                    before = store.stats()
                    took[mode] = run(mode, store, ring, hashers, steps, out, layer_out) / (count * rows_per_step)
                    after = store.stats()
                    lookups = sum(after[t]["cache_lookups"] - before[t]["cache_lookups"] for t in after)
                    hits[mode] = sum(after[t]["cache_hits"] - before[t]["cache_hits"] for t in after) / max(1, lookups)
                    del ring
                    if not warm:
                        store.close()
                for mode in MODES:
                    best[mode] = min(best[mode], took[mode])
                    ratios[mode].append(took[mode] / took["hash_gather"])
            if warm:
                warm.close()
            for mode in MODES:
                print(f"python step {case:<4} tokens={n:<4} {mode:<12} ns_per_row={best[mode] * 1e9:9.1f} "
                      f"ns_per_step={best[mode] * rows_per_step * 1e9:11.0f} "
                      f"x_hash_gather={statistics.median(ratios[mode]):6.3f} hit_rate={hits[mode]:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
