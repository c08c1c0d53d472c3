#!/usr/bin/env python3
"""A CUDA-graph runtime's decode loop over Engram Store's step ring, with the
CPU standing in for the GPU.

A forward pass captured as a CUDA graph cannot call the store. Per step, a
runtime instead
  1. hashes the step's tokens on the GPU into row IDs [tokens, layers, slots]
     (here: Hasher.row_ids per layer, on the host);
  2. starts the step in the ring (StepRing.start_gather_step, which never
     blocks, so it may run from a cuLaunchHostFunc callback): the store
     gathers each layer's rows into the slot's fixed buffer, then writes the
     step's sequence number into the slot's word for that layer;
  3. has the stream wait, before layer k's kernels, until word k holds the
     sequence number: cuStreamWaitValue32(word_k, seq, CU_STREAM_WAIT_VALUE_GEQ).
     Here the forward spins on the word, as the GPU's front end would.

Step t+1 is started before step t's forward runs, so its rows are read while
step t computes. The forward checks each layer's rows, the moment its word is
set, against what a second, private store over the same tables stages for
the same tokens.

    PYTHONPATH=build/python /usr/bin/python3 examples/serve_graph_ready.py
    ... --tables a.engram b.engram --layout layout.json   (tables with that layout)
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import engram_store
from engram_store.scaled_tables import write_generated_tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
FAILED = 0x80000000  # a layer that failed: its word holds sequence | FAILED


def wait_for_word(words, layer, sequence):
    """What the stream's cuStreamWaitValue32(..., GEQ) does: spin until the
    layer's word holds the step's sequence number. A failed layer's word
    never passes a GEQ wait; the host is told by the ring and raises here."""
    while True:
        word = int(words[layer])
        if word == sequence:
            return
        if word == sequence | FAILED:
            raise RuntimeError(f"layer {layer} of step {sequence} failed")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", default=os.path.join(FIXTURES, "traces", "deepspeed", "req1.u32"),
                   help="little-endian uint32 token file: one request, decoded step by step")
    p.add_argument("--tables", nargs="+", help="one table per Engram layer (default: generate two)")
    p.add_argument("--layout", help="the hash layout file whose layers 0, 1, ... the tables are, in order")
    p.add_argument("--token-map", default=os.path.join(FIXTURES, "engram-hash", "token-map.u32"))
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"), help="where engram-gen is")
    p.add_argument("--step-tokens", type=int, default=1, help="tokens per step (1: decode)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--io-backend", default="auto")
    args = p.parse_args()
    if bool(args.tables) != bool(args.layout):
        p.error("--tables and --layout go together")
    if not args.tables:
        work = os.path.join(tempfile.gettempdir(), "engram-serve-graph-ready")
        args.tables, args.layout = write_generated_tables(
            os.path.join(args.build_dir, "engram-gen"), os.path.join(FIXTURES, "engram-hash", "layout-v41.json"),
            work, 200000)

    text = np.fromfile(args.tokens, dtype="<u4")
    n = args.step_tokens
    steps = [(text[:i], text[i:i + n]) for i in range(0, min(len(text) - n + 1, args.steps * n), n)]
    hashers = [engram_store.Hasher(args.layout, layer, args.token_map) for layer in range(len(args.tables))]

    def hash_kernel(history, tokens):  # the GPU's hash: [tokens, layers, slots] row IDs
        return np.stack([h.row_ids(tokens, history=history) for h in hashers], axis=1)

    with engram_store.Store(tables=args.tables, cache_bytes=256 << 20, io_backend=args.io_backend,
                            token_map=args.token_map) as store, \
         engram_store.Store(tables=args.tables, cache_bytes=16 << 20, io_backend="pread",
                            token_map=args.token_map) as private:
        ring = store.step_ring(slots=2, max_tokens=n)  # register=... would cudaHostRegister each buffer
        layers = ring.layers
        expected = np.empty((n, layers, store.stage_rows_per_token(), store.record_bytes(0)), dtype=np.uint8)
        spun = 0.0
        pending = ring.start_gather_step(hash_kernel(*steps[0]))
        for t, (history, tokens) in enumerate(steps):
            slot, sequence = pending
            if t + 1 < len(steps):  # step t+1's rows are read while step t computes
                pending = ring.start_gather_step(hash_kernel(*steps[t + 1]))
            private.stage(tokens, history, expected)
            out, words = ring.buffer(slot), ring.words(slot)
            for layer in range(layers):  # the forward pass, layer by layer
                start = time.perf_counter()
                wait_for_word(words, layer, sequence)
                spun += time.perf_counter() - start
                if not np.array_equal(out[:n, layer], expected[:, layer]):
                    print(f"step {t} layer {layer}: rows differ from the private store's", file=sys.stderr)
                    return 1
            ring.wait(slot)  # the step's figures; returns at once once every word is in
            ring.release(slot)  # the graph no longer reads the slot
    print(f"{len(steps)} steps of {n} tokens over {layers} layers: every layer's rows equal the private "
          f"store's when its word is set; the forward spun {spun / len(steps) * 1e6:.1f} us per step on words")
    return 0


if __name__ == "__main__":
    sys.exit(main())
