"""Hasher against the public reference vectors (tests/fixtures/engram-hash)."""

import json
import os
import subprocess

import numpy as np
import pytest

import engram_store
from conftest import HASH_DIR, LAYOUT_V41, TOKEN_MAP, tool

VECTORS = os.path.join(HASH_DIR, "vectors")


def sequences():
    with open(os.path.join(VECTORS, "manifest.json")) as f:
        return json.load(f)["sequences"]


@pytest.mark.parametrize("mapped", [True, False], ids=["mapped", "identity"])
@pytest.mark.parametrize("layer", [0, 1])
def test_row_ids_equal_the_reference_vectors(layer, mapped):
    hasher = engram_store.Hasher(LAYOUT_V41, layer=layer, token_map=TOKEN_MAP if mapped else None)
    assert hasher.rows_per_token == 24
    checked = 0
    for seq in sequences():
        tokens = np.fromfile(os.path.join(VECTORS, seq["files"]["tokens"]["file"]), dtype="<u4")
        rows_file = seq["files"]["rows_mapped" if mapped else "rows_identity"]["file"]
        expected = np.fromfile(os.path.join(VECTORS, rows_file), dtype="<u4").reshape(len(tokens), 2, 24)[:, layer]
        got = hasher.row_ids(tokens)
        assert got.shape == (len(tokens), 24) and got.dtype == np.uint64
        np.testing.assert_array_equal(got, expected.astype(np.uint64), err_msg=seq["name"])
        checked += 1
    assert checked >= 13


def test_row_ids_equal_engram_hash_cli(tmp_path, deepspeed_tokens):
    tokens = deepspeed_tokens[:3000]
    path = tmp_path / "tokens.u32"
    tokens.astype("<u4").tofile(path)
    out = tmp_path / "rows.u64"
    subprocess.run([tool("engram-hash"), "--layout", LAYOUT_V41, "--layer", "1", "--token-map", TOKEN_MAP, str(path),
                    str(out)], check=True)
    expected = np.fromfile(out, dtype="<u8").reshape(-1, 24)
    np.testing.assert_array_equal(engram_store.Hasher(LAYOUT_V41, 1, TOKEN_MAP).row_ids(tokens), expected)


def test_history_makes_chunked_hashing_equal_whole(deepspeed_tokens):
    hasher = engram_store.Hasher(LAYOUT_V41, 0, np.fromfile(TOKEN_MAP, dtype="<u4"))
    tokens = deepspeed_tokens[:1000]
    whole = hasher.row_ids(tokens)
    parts = [hasher.row_ids(tokens[i:i + 97], history=tokens[:i]) for i in range(0, 1000, 97)]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    # Without history the first rows of a chunk differ (n-grams start at the pad).
    assert not np.array_equal(hasher.row_ids(tokens[97:194]), whole[97:194])


@pytest.mark.parametrize("ranks", [2, 4, 5])
def test_a_ranks_row_ids_are_the_reference_ids_moved_to_its_packed_offsets(ranks):
    with open(LAYOUT_V41) as f:
        layer = json.load(f)["layers"][1]
    primes = np.array(layer["primes"], dtype=np.uint64).reshape(-1)
    offsets = np.array(layer["offsets"], dtype=np.uint64).reshape(-1)
    seq = sequences()[0]
    tokens = np.fromfile(os.path.join(VECTORS, seq["files"]["tokens"]["file"]), dtype="<u4")
    reference = np.fromfile(os.path.join(VECTORS, seq["files"]["rows_mapped"]["file"]),
                            dtype="<u4").reshape(len(tokens), 2, 24)[:, 1].astype(np.uint64)
    for rank in range(ranks):
        slots = engram_store.strided_rank_slots(ranks, rank)
        assert slots == [s for s in range(24) if s % ranks == rank]
        hasher = engram_store.Hasher(LAYOUT_V41, layer=1, token_map=TOKEN_MAP, slots=slots)
        assert hasher.rows_per_token == len(slots) and hasher.slots == slots
        local = np.concatenate([[0], np.cumsum(primes[slots])[:-1]]).astype(np.uint64)
        assert hasher.table_rows == int(primes[slots].sum())
        np.testing.assert_array_equal(hasher.row_ids(tokens), reference[:, slots] - offsets[slots] + local)


def test_bad_slots_and_ranks_are_value_or_type_errors():
    for bad in ([24], [3, 3], [5, 2], [-1]):
        with pytest.raises(ValueError):
            engram_store.Hasher(LAYOUT_V41, slots=bad)
    with pytest.raises(TypeError):
        engram_store.Hasher(LAYOUT_V41, slots=[True])
    with pytest.raises(ValueError, match="rank 4"):
        engram_store.strided_rank_slots(4, 4)
    for ranks in (0, 25):
        with pytest.raises(ValueError):
            engram_store.strided_rank_slots(ranks, 0)
