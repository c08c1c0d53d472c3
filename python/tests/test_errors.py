"""Every error path is a clear Python exception carrying the store's status."""

import shutil

import numpy as np
import pytest

import engram_store
from conftest import LAYOUT_V41, RECORD_BYTES, ROWS_PER_BLOCK, SEEDS, TOKEN_MAP, expected_rows


def rows(n):
    return np.empty((n, RECORD_BYTES), dtype=np.uint8)


def test_wrong_out_dtype_shape_size_or_read_only_is_value_error(store):
    ids = np.arange(4, dtype=np.uint64)
    with pytest.raises(ValueError, match="uint8"):
        store.gather(0, ids, np.empty((4, RECORD_BYTES), dtype=np.float32))
    with pytest.raises(ValueError, match=r"shape \[4, 264\]"):
        store.gather(0, ids, rows(5))
    with pytest.raises(ValueError, match="shape"):
        store.gather(0, ids, np.empty(4 * RECORD_BYTES, dtype=np.uint8))
    with pytest.raises(ValueError, match="shape"):
        store.gather(0, ids, np.empty((4, RECORD_BYTES - 1), dtype=np.uint8))
    read_only = rows(4)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        store.gather(0, ids, read_only)
    with pytest.raises(ValueError, match="read-only"):
        store.gather(0, ids, bytes(4 * RECORD_BYTES))
    with pytest.raises(ValueError, match="contiguous"):
        store.gather(0, ids, np.empty((8, RECORD_BYTES), dtype=np.uint8)[::2])
    with pytest.raises(ValueError, match="must be an array"):
        store.gather(0, ids, "not a buffer")


def test_bad_row_ids_are_value_errors(store):
    with pytest.raises(ValueError, match="negative"):
        store.gather(0, np.array([1, -2], dtype=np.int64), rows(2))
    with pytest.raises(ValueError, match="integers"):
        store.gather(0, np.array([1.0, 2.0]), rows(2))
    with pytest.raises(ValueError) as e:
        store.gather(0, np.array([1, store.row_count(0)], dtype=np.uint64), rows(2))
    assert e.value.code == "Out of range"
    assert str(store.row_count(0)) in str(e.value)


def test_unknown_tables_are_value_errors(store):
    with pytest.raises(ValueError, match="nope"):
        store.gather("nope", np.arange(1, dtype=np.uint64), rows(1))
    with pytest.raises(ValueError, match="out of range"):
        store.record_bytes(2)
    with pytest.raises(ValueError):
        store.row_count(-1)


def test_a_closed_store_raises_value_error(tables):
    s = engram_store.Store(tables=tables["layers"], cache_bytes=1 << 20, io_backend="pread")
    s.close()
    assert s.closed
    with pytest.raises(ValueError, match="closed"):
        s.gather(0, np.arange(1, dtype=np.uint64), rows(1))
    s.close()  # twice is fine


def test_open_errors(tables, tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.engram"):
        engram_store.Store(tables=[str(tmp_path / "missing.engram")])
    not_a_table = tmp_path / "junk.engram"
    not_a_table.write_bytes(b"x" * 8192)
    with pytest.raises(OSError) as e:
        engram_store.Store(tables=[str(not_a_table)])
    assert "junk.engram" in str(e.value)
    with pytest.raises(ValueError, match="policy|preset|cache"):
        engram_store.Store(tables=tables["layers"], policy="no-such-policy")
    with pytest.raises(ValueError, match="io_backend|backend"):
        engram_store.Store(tables=tables["layers"], io_backend="carrier-pigeon")
    with pytest.raises(ValueError, match="list"):
        engram_store.Store(tables=tables["layers"][0])


def test_a_corrupt_block_raises_corruption_error_and_spares_the_other_rows(tables, tmp_path):
    path = tmp_path / "corrupt.engram"
    shutil.copy(tables["layers"][0], path)
    block = 3
    with open(path, "r+b") as f:
        f.seek(4096 * (1 + block) + 100)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    ids = np.arange(0, 6 * ROWS_PER_BLOCK, dtype=np.uint64)
    out = np.zeros((len(ids), RECORD_BYTES), dtype=np.uint8)
    with engram_store.Store(tables=[str(path)], cache_bytes=1 << 20, io_backend="pread") as s:
        with pytest.raises(engram_store.CorruptionError) as e:
            s.gather(0, ids, out)
        assert isinstance(e.value, OSError)
        assert e.value.code == "Corruption"
        assert "checksum" in str(e.value)
        bad = list(range(block * ROWS_PER_BLOCK, (block + 1) * ROWS_PER_BLOCK))
        assert e.value.failed_positions == bad
        good = np.setdiff1d(np.arange(len(ids)), bad)
        np.testing.assert_array_equal(out[good], expected_rows(SEEDS[0], ids[good]))
        # Nothing unverified was cached: the same rows fail again.
        with pytest.raises(engram_store.CorruptionError):
            s.gather(0, ids[bad[:2]], out[:2])
        assert s.stats()["corrupt"]["checksum_failures"] >= 2


def test_async_errors_raise_on_wait(tables, tmp_path):
    path = tmp_path / "corrupt.engram"
    shutil.copy(tables["layers"][1], path)
    with open(path, "r+b") as f:
        f.seek(4096 + 10)
        f.write(b"\x00\x01\x02")
    with engram_store.Store(tables=[str(path)], cache_bytes=1 << 20, io_backend="pread") as s:
        handle = s.gather_async(0, np.arange(3, dtype=np.uint64), rows(3))
        with pytest.raises(engram_store.CorruptionError):
            handle.wait()
        with pytest.raises(ValueError):
            s.gather_async(0, np.arange(3, dtype=np.uint64), rows(4))


def test_stage_errors(store, tables):
    step = np.array([10, 11, 12], dtype=np.uint32)
    with pytest.raises(ValueError, match=r"shape \[3, 2, 24, 264\]"):
        store.stage(step, None, np.empty((3, 1, 24, RECORD_BYTES), dtype=np.uint8))
    with pytest.raises(ValueError, match="uint8 .*float16/float32"):
        store.stage(step, None, np.empty((3, 2, 24, RECORD_BYTES), dtype=np.int32))
    # These tables hold synthetic bytes, not fp8 weights: no dequantization.
    with pytest.raises(ValueError, match="F8_E4M3"):
        store.stage(step, None, np.empty((3, 2, 24, 256), dtype=np.float32))
    with pytest.raises(ValueError, match="token"):
        store.stage(np.array([5, 4000000000], dtype=np.uint64), None, np.empty((2, 2, 24, RECORD_BYTES), np.uint8))
    with pytest.raises(ValueError, match="uint32"):
        store.stage(np.array([5, 1 << 40], dtype=np.uint64), None, np.empty((2, 2, 24, RECORD_BYTES), np.uint8))


def test_hasher_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        engram_store.Hasher(str(tmp_path / "none.json"))
    with pytest.raises(ValueError, match="layer index 5"):
        engram_store.Hasher(LAYOUT_V41, layer=5)
    hasher = engram_store.Hasher(LAYOUT_V41, 0, TOKEN_MAP)
    with pytest.raises(ValueError):
        hasher.row_ids(np.array([200000], dtype=np.uint32))  # outside the token map
    with pytest.raises(ValueError):
        hasher.row_ids(np.array([-1], dtype=np.int32))
    bad_map = tmp_path / "map.u32"
    bad_map.write_bytes(b"abc")
    with pytest.raises(engram_store.CorruptionError, match="multiple of 4"):
        engram_store.Hasher(LAYOUT_V41, 0, str(bad_map))


def test_stage_async_reports_a_bad_token_on_wait(store):
    out = np.full((2, 2, 24, RECORD_BYTES), 7, dtype=np.uint8)
    handle = store.stage_async(np.array([5, 4000000000], dtype=np.uint64), None, out)
    with pytest.raises(ValueError, match="token"):
        handle.wait()
    assert (out == 7).all()  # nothing written
