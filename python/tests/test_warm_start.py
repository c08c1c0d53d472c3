"""Warm start: Store(hot_set=...) saves the rows it holds at close and reads
them back at the next open; a hot set of another cache is ignored."""

import numpy as np

import engram_store
from conftest import RECORD_BYTES, SEEDS, expected_rows


def _gather(store, ids):
    out = np.empty((len(ids), RECORD_BYTES), dtype=np.uint8)
    result = store.gather(0, ids, out)
    assert np.array_equal(out, expected_rows(SEEDS[0], ids))
    return result


def test_hot_set_round_trip_brings_back_the_rows_held_at_close(tables, tmp_path):
    hot_set = tmp_path / "hot.set"
    ids = np.random.default_rng(5).integers(0, 12000, size=1500, dtype=np.uint64)
    with engram_store.Store(tables=tables["layers"][:1], cache_bytes=1 << 20, io_backend="pread",
                            hot_set=hot_set) as s:
        _gather(s, ids)
        held = s.stats()["layer1"]["cache_resident_rows"]
    assert held > 0 and hot_set.exists()

    with engram_store.Store(tables=tables["layers"][:1], cache_bytes=1 << 20, io_backend="pread",
                            hot_set=str(hot_set)) as s:
        s.wait_for_warm_up()
        stats = s.stats()["layer1"]
        assert stats["warm_rows"] == held
        assert stats["warm_skipped_rows"] == 0
        assert _gather(s, ids).hits == held


def test_hot_set_of_another_cache_size_warms_nothing_and_rows_stay_exact(tables, tmp_path):
    hot_set = tmp_path / "hot.set"
    ids = np.random.default_rng(6).integers(0, 12000, size=800, dtype=np.uint64)
    with engram_store.Store(tables=tables["layers"][:1], cache_bytes=1 << 20, io_backend="pread",
                            hot_set=hot_set, hot_set_interval=0.5) as s:
        _gather(s, ids)
    with engram_store.Store(tables=tables["layers"][:1], cache_bytes=2 << 20, io_backend="pread",
                            hot_set=hot_set) as s:
        s.wait_for_warm_up()
        assert s.stats()["layer1"]["warm_rows"] == 0
        assert s.stats()["layer1"]["warm_skipped_rows"] > 0
        assert _gather(s, ids).hits == 0
