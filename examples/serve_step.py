#!/usr/bin/env python3
"""A runtime's forward loop over Engram Store, staging one step ahead.

Streams a token file (default: the shipped deepspeed request 1) step by step.
While step k "computes", step k+1's rows are staged (hashed for every Engram
layer, deduplicated, gathered) with Store.stage_async into the other of two
step buffers. The step's compute runs layer by layer, and each layer waits
only for its own rows (handle.wait(layer)) just before it runs: layer 0 can
run while the later layers are still being read. Per step it prints how long
the step's staging took and how long compute then had to wait for it (the
exposed wait, summed over the layers, and layer 0's part of it).

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


def compute(seconds):
    """Stands in for the model's forward pass, which runs on the accelerator:
    the runtime's thread waits `seconds` for it (without spinning a CPU core,
    which on a small host would slow the staging it is meant to overlap)."""
    time.sleep(seconds)


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

    exposed, exposed_first, staging, computed = [], [], [], []
    with open_store(args) as store:
        layers = store.stage_layers()
        shape = (args.step_tokens, layers, store.stage_rows_per_token(), store.record_bytes(0))
        buffers = [np.empty(shape, dtype=np.uint8) for _ in range(2)]  # step k computes on one, k+1 stages into the other
        history, step = steps[0]
        pending = store.stage_async(step, history, buffers[0][:len(step)])
        if not args.quiet:
            print(f"{'step':>5} {'tokens':>6} {'staging ms':>10} {'compute ms':>10} {'exposed wait ms':>15} "
                  f"{'layer 0 ms':>10}")
        for k in range(len(steps)):
            compute_seconds = args.compute_factor * staging_calibrated[k + 1] if k + 1 < len(steps) else 0.0
            current, waited = pending, 0.0
            for layer in range(layers):
                start = time.perf_counter()
                current.wait(layer)  # this layer of step k needs its rows now
                waited += time.perf_counter() - start
                if layer == 0:
                    exposed_first.append(waited)
                    if k + 1 < len(steps):
                        # Step k+1 is issued once step k's first layer is in: its reads queue behind
                        # step k's later layers and overlap the rest of step k's compute.
                        history, step = steps[k + 1]
                        start = time.perf_counter()
                        pending = store.stage_async(step, history, buffers[(k + 1) % 2][:len(step)])
                        waited += time.perf_counter() - start  # issuing blocks compute too
                compute(compute_seconds / layers)  # layer `layer` of the forward pass over buffers[k % 2]
            result = current.wait()  # every layer is in: returns at once with the step's figures
            exposed.append(waited)
            staging.append(result.wait_nanoseconds / 1e9)
            computed.append(compute_seconds)
            if not args.quiet:
                print(f"{k:>5} {len(steps[k][1]):>6} {staging[-1] * 1e3:>10.3f} {compute_seconds * 1e3:>10.3f} "
                      f"{exposed[-1] * 1e3:>15.3f} {exposed_first[-1] * 1e3:>10.3f}")
        stats = store.stats()
    # Step 0 has nothing to overlap with: its wait is the whole staging.
    overlapped_exposed, overlapped_staging = sum(exposed[1:]), sum(staging[1:])
    hits = sum(t["cache_hits"] for t in stats.values())
    lookups = sum(t["cache_lookups"] for t in stats.values())
    print(f"steps {len(steps)} of {args.step_tokens} tokens, {len(args.tables)} layers, "
          f"compute = {args.compute_factor:g} x staging; cache hit rate {hits / max(1, lookups):.3f}")
    # Steps whose staging really was covered by the compute it overlapped
    # (compute of step k-1 >= staging of step k): the target's condition.
    covered = [k for k in range(1, len(steps)) if computed[k - 1] >= staging[k]]
    covered_exposed, covered_staging = sum(exposed[k] for k in covered), sum(staging[k] for k in covered)
    print(f"steps where compute >= staging: {len(covered)} of {len(steps) - 1}: exposed wait "
          f"{covered_exposed * 1e3:.1f} ms = {100 * covered_exposed / max(covered_staging, 1e-12):.1f} % of their "
          f"staging {covered_staging * 1e3:.1f} ms")
    print(f"staging {overlapped_staging * 1e3:.1f} ms, exposed wait {overlapped_exposed * 1e3:.1f} ms "
          f"= {100 * overlapped_exposed / max(overlapped_staging, 1e-12):.1f} % of staging (steps 1..{len(steps) - 1}); "
          f"step 0 (nothing to overlap) {exposed[0] * 1e3:.1f} ms")
    print(f"layer 0's exposed wait: step 0 {exposed_first[0] * 1e3:.1f} ms of the step's {exposed[0] * 1e3:.1f} ms; "
          f"steps 1..{len(steps) - 1} {sum(exposed_first[1:]) * 1e3:.1f} ms of {overlapped_exposed * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
