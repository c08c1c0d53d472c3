#!/usr/bin/env python3
"""What the Python binding costs over the same C++ calls, as ratios from one run.

In one process, on one store with warm caches (every row a hit, so the
binding's share is not hidden behind disk time), alternating rounds of:
  1. gather of 24 rows: Store.gather from Python vs the same Store::Gather
     loop in C++ (engram_store._cxx_gather_seconds); target: <= 2 us more;
  2. gather of 4096 rows: rows/s from Python vs C++; target: >= 0.95x;
  3. a 4096-token step over 2 layers: Store.stage vs separate NgramHasher::Hash
     + Store::Gather per layer in C++ (engram_store._cxx_hash_gather_seconds);
     target: <= 1.2x;
then 4. examples/serve_step.py on the deepspeed requests: exposed wait as a
share of staging time when compute = staging; target: <= 10 %.
Medians over rounds.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import engram_store
from engram_store.scaled_tables import write_generated_tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
TOKEN_MAP = os.path.join(FIXTURES, "engram-hash", "token-map.u32")


def python_seconds(call, iterations):
    start = time.perf_counter()
    for _ in range(iterations):
        call()
    return time.perf_counter() - start


def rounds_of(py, cxx, rounds):
    """Alternating rounds; per-round (python, c++) seconds."""
    pys, cxxs = [], []
    for _ in range(rounds):
        pys.append(py())
        cxxs.append(cxx())
    return statistics.median(pys), statistics.median(cxxs)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "engram-serve-step"))
    p.add_argument("--rows-per-table", type=int, default=400000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--skip-serve-step", action="store_true")
    args = p.parse_args()

    tables, _ = write_generated_tables(os.path.join(args.build_dir, "engram-gen"),
                                       os.path.join(FIXTURES, "engram-hash", "layout-v41.json"),
                                       os.path.join(args.work_dir, f"scaled-{args.rows_per_table}"),
                                       args.rows_per_table)
    tokens = np.fromfile(os.path.join(FIXTURES, "traces", "deepspeed", "req1.u32"), dtype="<u4")
    failed = []
    with engram_store.Store(tables=tables, cache_bytes=1 << 30, token_map=TOKEN_MAP) as store:
        rb = store.record_bytes(0)
        rng = np.random.default_rng(1)
        print(f"store: {store.io_description}; tables {tables}")

        # 1. 24 rows.
        ids24 = rng.integers(0, store.row_count(0), size=24, dtype=np.uint64)
        out24 = np.empty((24, rb), dtype=np.uint8)
        store.gather(0, ids24, out24)  # warm: every row a hit from now on
        n = 20000
        py, cxx = rounds_of(lambda: python_seconds(lambda: store.gather(0, ids24, out24), n),
                            lambda: engram_store._cxx_gather_seconds(store, 0, ids24, out24, n), args.rounds)
        delta_us = (py - cxx) / n * 1e6
        print(f"1. gather of 24 rows (hits): Python {py / n * 1e6:.3f} us, C++ {cxx / n * 1e6:.3f} us per call; "
              f"Python costs {delta_us:+.3f} us more (target <= 2 us)")
        if delta_us > 2.0:
            failed.append("gather 24")

        # 2. 4096 rows.
        ids4k = rng.integers(0, store.row_count(0), size=4096, dtype=np.uint64)
        out4k = np.empty((4096, rb), dtype=np.uint8)
        store.gather(0, ids4k, out4k)
        n = 300
        py, cxx = rounds_of(lambda: python_seconds(lambda: store.gather(0, ids4k, out4k), n),
                            lambda: engram_store._cxx_gather_seconds(store, 0, ids4k, out4k, n), args.rounds)
        ratio = (4096 * n / py) / (4096 * n / cxx)
        print(f"2. gather of 4096 rows (hits): Python {4096 * n / py / 1e6:.2f} M rows/s, "
              f"C++ {4096 * n / cxx / 1e6:.2f} M rows/s = {ratio:.3f}x (target >= 0.95x)")
        if ratio < 0.95:
            failed.append("gather 4096")

        # 3. A 4096-token step over 2 layers.
        history, step = tokens[:4096], tokens[4096:8192]
        out = np.empty((4096, 2, 24, rb), dtype=np.uint8)
        r = store.stage(step, history, out)  # warm
        n = 10
        py, cxx = rounds_of(lambda: python_seconds(lambda: store.stage(step, history, out), n),
                            lambda: engram_store._cxx_hash_gather_seconds(store, step, history, None, n), args.rounds)
        ratio = py / cxx
        print(f"3. stage of 4096 tokens x 2 layers ({r.rows} rows, {r.distinct_rows} distinct): Python stage "
              f"{py / n * 1e3:.3f} ms, C++ hash + gather per layer {cxx / n * 1e3:.3f} ms = {ratio:.3f}x "
              f"(target <= 1.2x)")
        if ratio > 1.2:
            failed.append("stage")

    if not args.skip_serve_step:
        # 4. The serving loop, one step ahead.
        cmd = [sys.executable, os.path.join(ROOT, "examples", "serve_step.py"), "--quiet", "--build-dir",
               args.build_dir, "--work-dir", args.work_dir, "--rows-per-table", str(args.rows_per_table)]
        env = dict(os.environ)
        for req in ("req1", "req3"):
            result = subprocess.run(cmd + ["--tokens", os.path.join(FIXTURES, "traces", "deepspeed", f"{req}.u32")],
                                    check=True, capture_output=True, text=True, env=env).stdout
            summary = result.strip().splitlines()[-1]
            print(f"4. serve_step {req}: {result.strip().splitlines()[-2]}\n   {summary}")
            share = float(summary.split("=")[1].split("%")[0])
            if share > 10.0:
                failed.append(f"serve_step {req}")
    print("targets missed: " + ", ".join(failed) if failed else "all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
