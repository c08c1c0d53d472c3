"""A rank's store: stage for its slots only, refuse an out shaped for another
rank, and examples/serve_ranks.py run as real torch.distributed processes.

The tables: the conftest's two generated V4.1-shaped layers (engram-gen),
converted by engram-convert --table IN --ranks R OUT.json into rank tables and
their manifest."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import engram_store
from conftest import RECORD_BYTES, TOKEN_MAP, tool

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "serve_ranks.py")


@pytest.fixture(scope="module")
def layers(tables, tmp_path_factory):
    """Per layer: the unsharded table and a function giving its manifest for R ranks."""
    d = tmp_path_factory.mktemp("ranks")
    out = []
    for index, table in enumerate(tables["layers"]):
        def manifest(ranks, table=table, index=index):
            path = d / f"layer{index}-{ranks}.json"
            if not path.exists():
                subprocess.run([tool("engram-convert"), "--table", table, "--ranks", str(ranks), str(path)],
                               check=True, capture_output=True)
            return str(path)

        out.append({"table": table, "manifest": manifest})
    return out


def unsharded_stage(layers, tokens, history):
    with engram_store.Store(tables=[layer["table"] for layer in layers], cache_bytes=4 << 20, io_backend="pread",
                            token_map=TOKEN_MAP) as store:
        out = np.empty((len(tokens), len(layers), 24, RECORD_BYTES), dtype=np.uint8)
        store.stage(tokens, history, out)
        return out


@pytest.mark.parametrize("ranks", [2, 5])
def test_each_ranks_stage_is_the_unsharded_stage_at_its_slots(layers, deepspeed_tokens, ranks):
    history, tokens = deepspeed_tokens[:300], deepspeed_tokens[300:700]
    full = unsharded_stage(layers, tokens, history)
    manifests = [layer["manifest"](ranks) for layer in layers]
    with open(manifests[0]) as f:
        m = json.load(f)
    parts = []
    for rank in range(ranks):
        slots = engram_store.strided_rank_slots(ranks, rank)
        with engram_store.Store(manifest=manifests, rank=rank, cache_bytes=4 << 20, io_backend="pread",
                                token_map=TOKEN_MAP) as store:
            assert store.stage_rows_per_token() == len(slots)
            part = np.empty((len(tokens), len(layers), len(slots), RECORD_BYTES), dtype=np.uint8)
            r = store.stage(tokens, history, part)
            assert r.rows == len(tokens) * len(layers) * len(slots)
            np.testing.assert_array_equal(part, full[:, :, slots])
            parts.append(part)
    # The documented all-gather layout rebuilds the model's order.
    rebuilt = np.stack([parts[m["slot_to_rank"][s]][:, :, m["slot_index_in_rank"][s]] for s in range(24)], axis=2)
    np.testing.assert_array_equal(rebuilt, full)


def test_stage_into_an_out_shaped_for_another_rank_is_a_value_error_naming_both_shapes(layers, deepspeed_tokens):
    manifests = [layer["manifest"](5) for layer in layers]
    tokens = deepspeed_tokens[:10]
    with engram_store.Store(manifest=manifests, rank=4, cache_bytes=4 << 20, io_backend="pread",
                            token_map=TOKEN_MAP) as store:
        assert store.stage_rows_per_token() == 4  # slots 4, 9, 14, 19
        for slots in (5, 24):  # ranks 0-3 of 5 hold 5 slots; an unsharded store 24
            out = np.empty((10, 2, slots, RECORD_BYTES), dtype=np.uint8)
            with pytest.raises(ValueError) as e:
                store.stage(tokens, None, out)
            assert f"[10, 2, 4, {RECORD_BYTES}]" in str(e.value) and f"[10, 2, {slots}, {RECORD_BYTES}]" in str(e.value)
            assert "this rank's slots, 4 of 24" in str(e.value)


def test_serve_ranks_example_all_gathers_the_unsharded_step_bit_for_bit(layers):
    pytest.importorskip("torch.distributed")
    manifests = [layer["manifest"](2) for layer in layers]
    r = subprocess.run([sys.executable, EXAMPLE, "--manifest", *manifests, "--tables", *[l["table"] for l in layers],
                        "--token-map", TOKEN_MAP, "--steps", "4", "--step-tokens", "256", "--io-backend", "pread",
                        "--cache-mib", "4"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0: all 4 steps equal the unsharded staging bit for bit" in r.stdout, r.stdout + r.stderr
    for rank in (0, 1):
        assert f"rank {rank}/2: slots {engram_store.strided_rank_slots(2, rank)}" in r.stdout, r.stdout
