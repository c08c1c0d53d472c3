#!/usr/bin/env python3
"""A runtime's forward loop over Engram Store, staging one step ahead.

Streams a token file (default: the shipped deepspeed request 1) step by step.
While step k "computes", step k+1's rows are staged (hashed for every Engram
layer, deduplicated, gathered) with Store.stage_async into the other of two
step buffers. Per step it prints how long the step's staging took and how long
compute then had to wait for it (the exposed wait).

The stand-in compute of step k lasts as long as step k+1's staging took in a
calibration pass over a fresh, cold store (times --compute-factor), so compute
is "at least the staging time" at the default factor 1.0; with prefetching one
step ahead the exposed wait is then a small share of the staging time.

    PYTHONPATH=build/python /usr/bin/python3 examples/serve_step.py
    ... --tables a.engram b.engram --token-map tests/fixtures/engram-hash/token-map.u32
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import engram_store
from engram_store.scaled_tables import write_generated_tables

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def busy_compute(seconds):
    """Stands in for the model's forward pass: holds the thread for `seconds`."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def open_store(args):
    return engram_store.Store(tables=args.tables, cache_bytes=args.cache_mib << 20, io_backend=args.io_backend,
                              token_map=args.token_map)


def calibrate(args, steps):
    """Staging time of every step, staged synchronously on a fresh store."""
    times = []
    with open_store(args) as store:
        out = np.empty((args.step_tokens, store.stage_layers(), store.stage_rows_per_token(),
                        store.record_bytes(0)), dtype=np.uint8)
        for history, step in steps:
            times.append(store.stage(step, history, out[:len(step)]).wait_nanoseconds / 1e9)
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", default=os.path.join(FIXTURES, "traces", "deepspeed", "req1.u32"),
                   help="little-endian uint32 token file")
    p.add_argument("--tables", nargs="+", help="one table per Engram layer (default: generate two scaled layers)")
    p.add_argument("--token-map", default=os.path.join(FIXTURES, "engram-hash", "token-map.u32"))
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"), help="where engram-gen is (to generate tables)")
    p.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "engram-serve-step"))
    p.add_argument("--rows-per-table", type=int, default=400000, help="size of the generated tables")
    p.add_argument("--step-tokens", type=int, default=512)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0 = the whole file)")
    p.add_argument("--compute-factor", type=float, default=1.0,
                   help="compute of step k = this x step k+1's calibrated staging time")
    p.add_argument("--cache-mib", type=int, default=256)
    p.add_argument("--io-backend", default="auto")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    args = p.parse_args()

    if not args.tables:
        work = os.path.join(args.work_dir, f"scaled-{args.rows_per_table}")
        args.tables, _ = write_generated_tables(os.path.join(args.build_dir, "engram-gen"),
                                                os.path.join(FIXTURES, "engram-hash", "layout-v41.json"), work,
                                                args.rows_per_table)
    tokens = np.fromfile(args.tokens, dtype="<u4")
    steps = [(tokens[:i], tokens[i:i + args.step_tokens]) for i in range(0, len(tokens), args.step_tokens)]
    if args.steps:
        steps = steps[:args.steps]
    staging_calibrated = calibrate(args, steps)

    exposed, staging = [], []
    with open_store(args) as store:
        shape = (args.step_tokens, store.stage_layers(), store.stage_rows_per_token(), store.record_bytes(0))
        buffers = [np.empty(shape, dtype=np.uint8) for _ in range(2)]  # step k computes on one, k+1 stages into the other
        history, step = steps[0]
        pending = store.stage_async(step, history, buffers[0][:len(step)])
        if not args.quiet:
            print(f"{'step':>5} {'tokens':>6} {'staging ms':>10} {'compute ms':>10} {'exposed wait ms':>15}")
        for k in range(len(steps)):
            start = time.perf_counter()
            result = pending.wait()  # compute of step k needs its rows now
            exposed.append(time.perf_counter() - start)
            staging.append(result.wait_nanoseconds / 1e9)
            if k + 1 < len(steps):
                history, step = steps[k + 1]
                start = time.perf_counter()
                pending = store.stage_async(step, history, buffers[(k + 1) % 2][:len(step)])
                exposed[-1] += time.perf_counter() - start  # issuing blocks compute too
                compute = args.compute_factor * staging_calibrated[k + 1]
            else:
                compute = 0.0
            busy_compute(compute)  # the forward pass over buffers[k % 2]
            if not args.quiet:
                print(f"{k:>5} {len(steps[k][1]):>6} {staging[-1] * 1e3:>10.3f} {compute * 1e3:>10.3f} "
                      f"{exposed[-1] * 1e3:>15.3f}")
        stats = store.stats()
    # Step 0 has nothing to overlap with: its wait is the whole staging.
    overlapped_exposed, overlapped_staging = sum(exposed[1:]), sum(staging[1:])
    hits = sum(t["cache_hits"] for t in stats.values())
    lookups = sum(t["cache_lookups"] for t in stats.values())
    print(f"steps {len(steps)} of {args.step_tokens} tokens, {len(args.tables)} layers, "
          f"compute = {args.compute_factor:g} x staging; cache hit rate {hits / max(1, lookups):.3f}")
    print(f"staging {overlapped_staging * 1e3:.1f} ms, exposed wait {overlapped_exposed * 1e3:.1f} ms "
          f"= {100 * overlapped_exposed / max(overlapped_staging, 1e-12):.1f} % of staging (steps 1..{len(steps) - 1}); "
          f"step 0 (nothing to overlap) {exposed[0] * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
