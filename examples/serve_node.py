#!/usr/bin/env python3
"""One store per node: client processes sharing one engram-served.

On a node that runs one process per rank (data-parallel attention ranks,
TP ranks), each process opening its own store would keep its own cache of the
same hot rows and read the same blocks again. Instead one ``engram-served``
owns the cache (in shared memory) and the reads:

    engram-served --socket /run/engram/served.sock --table l1.engram --table l14.engram --cache-bytes 16GiB

and every process opens a client of it with the same tables:

    store = engram_store.Store(tables=[l1, l14], node="/run/engram/served.sock", token_map=...)

A client serves its hits itself from a read-only mapping of the cache (no
system call) and sends its misses to the service; a row one client missed is
then a hit for every other.

This example starts ``engram-served`` on two scaled V4.1 layers (generated
with engram-gen, or ``--tables``), then ``--clients`` processes with
torch.multiprocessing (spawn), each serving a different request of the
documentation traces step by step with ``stage``. Every client also stages
each step through a private store of the same tables and checks the rows bit
for bit; the run exits 1 on any difference. It prints each client's hits and
misses and the service's totals.

    PYTHONPATH=build/python /usr/bin/python3 examples/serve_node.py --clients 4
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
REQUESTS = ["req1.u32", "req2.u32", "req3.u32", "req4.u32", "req5.u32"]


def steps(tokens, step_tokens, max_steps):
    for k, start in enumerate(range(0, len(tokens), step_tokens)):
        if max_steps and k == max_steps:
            return
        yield tokens[:start], tokens[start:start + step_tokens]


def client(index, args, results):
    import engram_store

    store = engram_store.Store(tables=args.tables, node=args.socket, client_name=f"client-{index}",
                               token_map=args.token_map)
    private = engram_store.Store(tables=args.tables, cache_bytes=args.cache_mib << 20, io_backend=args.io_backend,
                                 token_map=args.token_map)
    layers, per_token, record = store.stage_layers(), store.stage_rows_per_token(), store.record_bytes(0)
    tokens = np.fromfile(os.path.join(args.traces, REQUESTS[index % len(REQUESTS)]), dtype="<u4")
    hits = misses = checked = mismatched = 0
    for history, step in steps(tokens, args.step_tokens, args.steps):
        got = np.empty((len(step), layers, per_token, record), dtype=np.uint8)
        want = np.empty_like(got)
        r = store.stage(step, history, got)
        hits += r.hits
        misses += r.misses
        private.stage(step, history, want)
        checked += 1
        mismatched += not np.array_equal(got, want)
    private.close()
    store.close()
    results.put((index, hits, misses, checked, mismatched))


def generate(args):
    from engram_store.scaled_tables import write_generated_tables

    work = os.path.join(args.work_dir, f"scaled-{args.rows_per_table}")
    args.tables, _ = write_generated_tables(os.path.join(args.build_dir, "engram-gen"),
                                            os.path.join(FIXTURES, "engram-hash", "layout-v41.json"), work,
                                            args.rows_per_table)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", nargs="+", help="Engram tables, one per layer (default: generate two)")
    p.add_argument("--clients", type=int, default=4, help="client processes")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"), help="where engram-served and engram-gen are")
    p.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "engram-serve-node"))
    p.add_argument("--rows-per-table", type=int, default=200000, help="size of the generated tables")
    p.add_argument("--traces", default=os.path.join(FIXTURES, "traces", "deepspeed"),
                   help="directory of req1..5.u32 token files; client i serves request i mod 5")
    p.add_argument("--token-map", default=os.path.join(FIXTURES, "engram-hash", "token-map.u32"))
    p.add_argument("--step-tokens", type=int, default=512)
    p.add_argument("--steps", type=int, default=4, help="steps per client (0 = its whole request)")
    p.add_argument("--cache-mib", type=int, default=64, help="the service's cache (and each checking store's)")
    p.add_argument("--io-backend", default="auto")
    args = p.parse_args()
    if not args.tables:
        generate(args)

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        args.socket = os.path.join(tmp, "served.sock")
        service = subprocess.Popen(
            [os.path.join(args.build_dir, "engram-served"), "--socket", args.socket, "--cache-bytes",
             f"{args.cache_mib}MiB", "--backend", args.io_backend, "--log-level", "warn"]
            + [a for t in args.tables for a in ("--table", t)],
            stdout=subprocess.PIPE, text=True)
        try:
            ready = service.stdout.readline()
            if not ready.startswith("engram-served: ready"):
                print(f"serve_node: engram-served did not start (exit {service.wait()})", file=sys.stderr)
                return 1
            ctx = mp.get_context("spawn")
            results = ctx.SimpleQueue()
            try:
                mp.spawn(client, args=(args, results), nprocs=args.clients, join=True)
            except (mp.ProcessExitedException, mp.ProcessRaisedException) as e:
                print(f"serve_node: a client failed:\n{e}", file=sys.stderr)
                return 1
            bad = 0
            for _ in range(args.clients):
                index, hits, misses, checked, mismatched = results.get()
                print(f"client {index}: {checked} steps, {hits} hits, {misses} misses, "
                      f"{checked - mismatched} of {checked} steps equal a private store's bit for bit", flush=True)
                bad += mismatched
            if bad:
                print(f"serve_node: {bad} steps differ from a private store", file=sys.stderr)
                return 1
            print(f"serve_node: {args.clients} clients of one engram-served, every step equal a private store's",
                  flush=True)
            return 0
        finally:
            service.send_signal(signal.SIGTERM)
            if service.wait(timeout=60) != 0:
                print(f"serve_node: engram-served exited {service.returncode}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
