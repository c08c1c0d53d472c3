"""Store(manifest=..., rank=r): a rank's tables opened by their manifest
(engram-convert --ranks R OUT.json), gathering the unsharded table's rows at
its slots; and every mistake in the arguments or files a clear exception."""

import json
import shutil
import subprocess

import numpy as np
import pytest

import engram_store
from conftest import RECORD_BYTES, tool


@pytest.fixture(scope="module")
def split(tables, tmp_path_factory):
    """The first generated layer (its layout embedded) as 3 and 5 rank tables."""
    d = tmp_path_factory.mktemp("rank-open")
    out = {}
    for ranks in (3, 5):
        manifest = d / f"layer-{ranks}.json"
        subprocess.run([tool("engram-convert"), "--table", tables["layers"][0], "--ranks", str(ranks), str(manifest)],
                       check=True, capture_output=True)
        out[ranks] = manifest
    return {"dir": d, "table": tables["layers"][0], **out}


def open_rank(manifest, rank, **kwargs):
    return engram_store.Store(manifest=manifest, rank=rank, cache_bytes=1 << 20, io_backend="pread", **kwargs)


def full_row_ids(layout, slots):
    """The unsharded rows of `slots`, in order: each slot's offsets..offsets+primes."""
    heads = layout["heads"]
    ids = []
    for s in slots:
        o, h = divmod(s, heads)
        ids.extend(range(layout["offsets"][o][h], layout["offsets"][o][h] + layout["primes"][o][h]))
    return np.array(ids, dtype=np.uint64)


@pytest.mark.parametrize("ranks", [3, 5])
def test_each_rank_gathers_the_unsharded_rows_of_its_slots(split, ranks):
    with open(split[ranks]) as f:
        m = json.load(f)
    with engram_store.Store([split["table"]], cache_bytes=4 << 20, io_backend="pread") as full:
        for rank in range(ranks):
            slots = [s for s in range(24) if s % ranks == rank]
            want_ids = full_row_ids(m["hash_layout"], slots)
            want = np.empty((len(want_ids), RECORD_BYTES), dtype=np.uint8)
            full.gather(0, want_ids, want)
            # A single manifest path, or a list of them (one per layer).
            for manifest in (split[ranks], [str(split[ranks])]):
                with open_rank(manifest, rank) as store:
                    assert store.table_names == [f"layer-{ranks}"]
                    assert store.row_count(0) == len(want_ids)
                    got = np.empty_like(want)
                    store.gather(0, np.arange(len(want_ids), dtype=np.uint64), got)
                    np.testing.assert_array_equal(got, want)


def test_a_rank_outside_the_manifest_or_missing_or_without_a_manifest_is_a_value_error(split):
    with pytest.raises(ValueError, match="has ranks 0..2"):
        open_rank(split[3], 3)
    with pytest.raises(ValueError, match="needs rank="):
        engram_store.Store(manifest=split[3], io_backend="pread")
    with pytest.raises(ValueError, match="without manifest="):
        engram_store.Store([split["table"]], rank=0, io_backend="pread")
    with pytest.raises(ValueError, match="negative"):
        open_rank(split[3], -1)
    for bad in (True, 1.0, "0"):
        with pytest.raises(TypeError, match="rank must be an integer"):
            open_rank(split[3], bad)


def edited(split, name, edit):
    with open(split[3]) as f:
        m = json.load(f)
    edit(m)
    path = split["dir"] / name
    with open(path, "w") as f:
        json.dump(m, f)
    return path


def test_a_manifest_naming_a_missing_rank_file_is_file_not_found(split):
    path = edited(split, "missing.json", lambda m: m["rank_files"][1].update(file="gone.engram"))
    with pytest.raises(FileNotFoundError, match="gone.engram"):
        open_rank(path, 1)


def test_a_rank_file_of_another_manifest_or_rewritten_is_a_value_error(split):
    with open(split[5]) as f:
        other = json.load(f)
    # Another conversion's rank 1 file, under its own fingerprint: its manifest_id tells.
    path = edited(split, "foreign.json", lambda m: m["rank_files"].__setitem__(1, {**other["rank_files"][1], "rank": 1,
                                                                                     "slots": m["rank_files"][1]["slots"],
                                                                                     "rows": m["rank_files"][1]["rows"]}))
    with pytest.raises(ValueError, match="is rank 1 of 5|belongs to manifest"):
        open_rank(path, 1)
    path = edited(split, "rewritten.json", lambda m: m["rank_files"][0].update(fingerprint="0x00000000000000ff"))
    with pytest.raises(ValueError, match="the manifest recorded 0x00000000000000ff"):
        open_rank(path, 0)


def test_a_corrupt_or_truncated_manifest_is_a_corruption_error(split):
    text = split[3].read_text()
    truncated = split["dir"] / "truncated.json"
    truncated.write_text(text[: len(text) // 2])
    with pytest.raises(engram_store.CorruptionError, match="truncated.json"):
        open_rank(truncated, 0)
    path = edited(split, "maps.json", lambda m: m["slot_to_rank"].reverse())
    with pytest.raises(engram_store.CorruptionError, match="strided maps"):
        open_rank(path, 0)
    with pytest.raises(ValueError, match="not a regular file"):
        open_rank(split["dir"], 0)


def test_a_moved_conversion_still_opens(split, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(split["dir"], moved)
    with open_rank(moved / "layer-3.json", 2) as store:
        assert store.row_count(0) > 0
