#!/usr/bin/env python3
"""Tensor-parallel ranks serving Engram rows: one process per rank.

Each Engram layer is converted once into R rank tables and a manifest
(``engram-convert ... --ranks R OUT.json``). Rank r holds the layer's slots
s (s = order index * heads + head, 0..23 for V4.1) with s % R == r. This
example starts R real processes (torch.multiprocessing, spawn) joined by
torch.distributed over gloo (CPU). Each process opens only its rank:

    store = engram_store.Store(manifest=[layer1.json, layer14.json], rank=r, ...)

and per step stages the step's tokens for its own slots. Its disk and cache hold
only those slots:

    part = np.empty((tokens, layers, len(slots_of_rank), record_bytes), np.uint8)
    store.stage(step, history, part)

The ranks then all-gather their parts, and every rank rebuilds the model's
``[tokens, layers, 24, record_bytes]`` step. This is the all-gather layout:

    full[:, :, s] = part[slot_to_rank[s]][:, :, slot_index_in_rank[s]]

``slot_to_rank`` and ``slot_index_in_rank`` come from the manifest. For the
strided assignment they are s % R and s // R. Ranks may hold different numbers
of slots (R = 5: 5, 5, 5, 5, 4), and gloo's all_gather needs equal sizes, so
each rank sends its part flattened at the front of a buffer sized for the
largest rank.

With ``--tables`` (the unsharded tables of the same layers), rank 0 also stages
every step from the unsharded tables. It checks the rebuilt step against that
bit for bit, and the run exits 1 on any difference.

    PYTHONPATH=build/python /usr/bin/python3 examples/serve_ranks.py --ranks 4
    ... --manifest l1.json l14.json --tables l1.engram l14.engram

Without ``--manifest`` it generates two scaled V4.1 layers with engram-gen,
converts each with ``engram-convert --table ... --ranks R``, and checks
against the generated tables.
"""

import argparse
import json
import os
import sys
import tempfile

import subprocess

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def load_manifests(paths):
    """The manifests of the layers, checked to split the slots the same way."""
    manifests = []
    for path in paths:
        with open(path) as f:
            manifests.append(json.load(f))
    first = manifests[0]
    for path, m in zip(paths, manifests):
        for key in ("ranks", "slot_count", "slot_to_rank", "slot_index_in_rank"):
            if m[key] != first[key]:
                raise SystemExit(f"{path}: {key} differs from {paths[0]}'s: every layer must be split the same way")
    return manifests


def rank_slots(manifest, rank):
    """The slots of `rank`, ascending, from the manifest's maps."""
    return [s for s in range(manifest["slot_count"]) if manifest["slot_to_rank"][s] == rank]


def rebuild(parts, manifest):
    """[tokens, layers, slot_count, record] from every rank's part (the all-gather layout)."""
    tokens, layers, _, record = parts[0].shape
    full = np.empty((tokens, layers, manifest["slot_count"], record), dtype=np.uint8)
    for s in range(manifest["slot_count"]):
        full[:, :, s] = parts[manifest["slot_to_rank"][s]][:, :, manifest["slot_index_in_rank"][s]]
    return full


def steps(tokens, step_tokens, max_steps):
    for k, start in enumerate(range(0, len(tokens), step_tokens)):
        if max_steps and k == max_steps:
            return
        yield tokens[:start], tokens[start:start + step_tokens]


def serve(rank, args, world):
    import torch
    import torch.distributed as dist

    import engram_store

    dist.init_process_group("gloo", init_method="file://" + args.rendezvous, rank=rank, world_size=world)
    manifests = load_manifests(args.manifest)
    m = manifests[0]
    slots = rank_slots(m, rank)
    sizes = [len(rank_slots(m, r)) for r in range(world)]
    store = engram_store.Store(manifest=args.manifest, rank=rank, cache_bytes=args.cache_mib << 20,
                               io_backend=args.io_backend, token_map=args.token_map)
    layers, record = store.stage_layers(), store.record_bytes(0)
    if store.stage_rows_per_token() != len(slots):
        raise SystemExit(f"rank {rank}: the store stages {store.stage_rows_per_token()} slots, "
                         f"the manifest gives it {len(slots)}")
    reference = None
    if rank == 0 and args.tables:
        reference = engram_store.Store(tables=args.tables, cache_bytes=args.cache_mib << 20,
                                       io_backend=args.io_backend, token_map=args.token_map)

    tokens = np.fromfile(args.tokens, dtype="<u4")
    checked_steps = mismatched_steps = staged_rows = 0
    for history, step in steps(tokens, args.step_tokens, args.steps):
        n = len(step)
        part = np.empty((n, layers, len(slots), record), dtype=np.uint8)
        staged_rows += store.stage(step, history, part).rows
        # gloo's all_gather takes equal sizes: each rank's part goes flat at
        # the front of a buffer sized for the rank with the most slots.
        send = torch.zeros(n * layers * max(sizes) * record, dtype=torch.uint8)
        send[:part.size] = torch.from_numpy(part.reshape(-1))
        received = [torch.empty_like(send) for _ in range(world)]
        dist.all_gather(received, send)
        parts = [received[r][:n * layers * sizes[r] * record].numpy().reshape(n, layers, sizes[r], record)
                 for r in range(world)]
        full = rebuild(parts, m)
        if reference is not None:
            want = np.empty((n, layers, m["slot_count"], record), dtype=np.uint8)
            reference.stage(step, history, want)
            checked_steps += 1
            mismatched_steps += not np.array_equal(full, want)

    stats = store.stats().values()
    print(f"rank {rank}/{world}: slots {slots}: {sum(t['row_count'] for t in stats)} rows on its disk, "
          f"{staged_rows} rows staged, {sum(t['cache_misses'] for t in stats)} missed rows read", flush=True)
    dist.barrier()
    if reference is not None:
        reference.close()
        if mismatched_steps:
            print(f"rank 0: {mismatched_steps} of {checked_steps} steps differ from the unsharded staging", flush=True)
            raise SystemExit(1)
        print(f"rank 0: all {checked_steps} steps equal the unsharded staging bit for bit", flush=True)
    store.close()
    dist.destroy_process_group()


def generate(args):
    """Two scaled V4.1 layers (reused when present) and their rank manifests."""
    from engram_store.scaled_tables import write_generated_tables

    work = os.path.join(args.work_dir, f"scaled-{args.rows_per_table}")
    args.tables, _ = write_generated_tables(os.path.join(args.build_dir, "engram-gen"),
                                            os.path.join(FIXTURES, "engram-hash", "layout-v41.json"), work,
                                            args.rows_per_table)
    args.manifest = []
    for table in args.tables:
        manifest = f"{os.path.splitext(table)[0]}-{args.ranks}-ranks.json"
        if not os.path.exists(manifest):
            subprocess.run([os.path.join(args.build_dir, "engram-convert"), "--table", table, "--ranks",
                            str(args.ranks), manifest], check=True)
        args.manifest.append(manifest)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--manifest", nargs="+",
                   help="one rank manifest per Engram layer, in layer order (default: generate and convert two)")
    p.add_argument("--tables", nargs="+", help="the unsharded tables of the same layers: check every step against them")
    p.add_argument("--ranks", type=int, default=2, help="ranks to convert into when generating")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"), help="where engram-gen and engram-convert are")
    p.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "engram-serve-ranks"))
    p.add_argument("--rows-per-table", type=int, default=200000, help="size of the generated tables")
    p.add_argument("--tokens", default=os.path.join(FIXTURES, "traces", "deepspeed", "req1.u32"),
                   help="little-endian uint32 token file, served as one request")
    p.add_argument("--token-map", default=os.path.join(FIXTURES, "engram-hash", "token-map.u32"))
    p.add_argument("--step-tokens", type=int, default=512)
    p.add_argument("--steps", type=int, default=8, help="stop after this many steps (0 = the whole file)")
    p.add_argument("--cache-mib", type=int, default=64, help="cache per rank store")
    p.add_argument("--io-backend", default="auto")
    args = p.parse_args()
    if not args.manifest:
        if args.tables:
            p.error("--tables needs --manifest (the rank manifests of those tables)")
        generate(args)
    if args.tables and len(args.tables) != len(args.manifest):
        p.error(f"{len(args.manifest)} manifests but {len(args.tables)} tables: give one of each per layer")
    world = load_manifests(args.manifest)[0]["ranks"]

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        # A file rendezvous: no TCP port to pick (or to collide on).
        args.rendezvous = os.path.join(tmp, "rendezvous")
        try:
            mp.spawn(serve, args=(args, world), nprocs=world, join=True)
        except mp.ProcessExitedException as e:
            print(f"serve_ranks: {e}", file=sys.stderr)
            return 1
        except mp.ProcessRaisedException as e:
            print(f"serve_ranks: a rank failed:\n{e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
