"""Store.gather: rows bit-exact with the C++ API, numpy and torch buffers,
written in place, GIL released, many threads."""

import threading
import time

import numpy as np
import pytest

import engram_store
from conftest import RECORD_BYTES, SEEDS, expected_rows


def test_gather_rows_match_the_cxx_generator_and_the_cxx_gather(store):
    ids = np.array([0, 5, 5, 17, 4000, 123, 0, store.row_count(0) - 1], dtype=np.uint64)
    out = np.zeros((len(ids), RECORD_BYTES), dtype=np.uint8)
    r = store.gather(0, ids, out)
    assert isinstance(r, engram_store.GatherResult)
    assert (r.rows, r.distinct_rows) == (8, 6)
    assert r.hits + r.misses == r.distinct_rows
    np.testing.assert_array_equal(out, expected_rows(SEEDS[0], ids))
    cxx = np.zeros_like(out)
    engram_store._cxx_gather_seconds(store, 0, ids, cxx, 1)
    np.testing.assert_array_equal(out, cxx)


def test_second_gather_of_the_same_rows_hits_the_cache(store):
    ids = np.arange(100, 160, dtype=np.uint64)
    out = np.empty((len(ids), RECORD_BYTES), dtype=np.uint8)
    first = store.gather("layer14", ids, out)
    second = store.gather("layer14", ids, out)
    assert first.misses == 60 and second.hits == 60 and second.misses == 0
    assert second.wait_nanoseconds >= second.cache_nanoseconds + second.disk_nanoseconds
    np.testing.assert_array_equal(out, expected_rows(SEEDS[1], ids))


def test_gather_writes_into_the_callers_memory_in_place(store):
    # out is a view into a larger array: the rows must land in the parent's
    # memory, at the view's address, with the rows around it untouched.
    parent = np.full((30, RECORD_BYTES), 0xAB, dtype=np.uint8)
    out = parent[10:20]
    address = out.ctypes.data
    ids = np.arange(200, 210, dtype=np.int64)
    store.gather(0, ids, out)
    assert out.ctypes.data == address
    np.testing.assert_array_equal(parent[10:20], expected_rows(SEEDS[0], ids))
    assert (parent[:10] == 0xAB).all() and (parent[20:] == 0xAB).all()


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64])
def test_row_ids_of_any_integer_dtype(store, dtype):
    ids = np.array([1, 2, 250, 3], dtype=dtype)
    out = np.empty((4, RECORD_BYTES), dtype=np.uint8)
    store.gather(0, ids, out)
    np.testing.assert_array_equal(out, expected_rows(SEEDS[0], ids))


def test_non_contiguous_row_ids_are_converted(store):
    ids = np.arange(0, 400, dtype=np.int64)[::7]
    out = np.empty((len(ids), RECORD_BYTES), dtype=np.uint8)
    store.gather(0, ids, out)
    np.testing.assert_array_equal(out, expected_rows(SEEDS[0], ids))
    ids2d = np.arange(0, 40, dtype=np.uint64).reshape(5, 8).T  # a transposed 2-D array, row-major order
    out2 = np.empty((40, RECORD_BYTES), dtype=np.uint8)
    store.gather(0, ids2d, out2)
    np.testing.assert_array_equal(out2, expected_rows(SEEDS[0], ids2d.reshape(-1)))


def test_torch_tensors_as_row_ids_and_out(store):
    torch = pytest.importorskip("torch")
    ids = torch.tensor([7, 8, 9, 3000], dtype=torch.int64)
    out = torch.zeros((4, RECORD_BYTES), dtype=torch.uint8)
    address = out.data_ptr()
    store.gather(1, ids, out)
    assert out.data_ptr() == address
    np.testing.assert_array_equal(out.numpy(), expected_rows(SEEDS[1], ids.numpy()))
    # A column slice of a larger tensor is not contiguous: refused, not copied.
    wide = torch.zeros((4, 2 * RECORD_BYTES), dtype=torch.uint8)
    with pytest.raises(ValueError, match="contiguous"):
        store.gather(1, ids, wide[:, :RECORD_BYTES])
    with pytest.raises(ValueError, match="uint8"):
        store.gather(1, ids, torch.zeros((4, RECORD_BYTES), dtype=torch.int16))


def test_python_threads_run_during_a_long_gather(tables):
    # A cold store with a tiny cache and direct I/O: a gather of every row of
    # a layer reads thousands of blocks. A counting thread must make progress
    # while it runs, which it cannot if the GIL is held.
    with engram_store.Store(tables=tables["layers"], cache_bytes=1 << 20, io_backend="pread") as s:
        ids = np.arange(s.row_count(0), dtype=np.uint64)
        out = np.empty((len(ids), RECORD_BYTES), dtype=np.uint8)
        count = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                count[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        time.sleep(0.05)
        before = count[0]
        start = time.perf_counter()
        r = s.gather(0, ids, out)
        elapsed = time.perf_counter() - start
        during = count[0] - before
        stop.set()
        t.join()
        assert r.misses > 0
        # A Python loop counts millions per second; with the GIL held during
        # the gather it would count nothing until the call returned.
        assert during > 1000, f"counter advanced {during} during a {elapsed:.3f} s gather"
        np.testing.assert_array_equal(out[::997], expected_rows(SEEDS[0], ids[::997]))


def test_many_threads_gather_concurrently(store):
    errors = []
    n = store.row_count(0)

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(20):
                table = int(rng.integers(0, 2))
                ids = rng.integers(0, n if table == 0 else store.row_count(1), size=64, dtype=np.uint64)
                out = np.empty((64, RECORD_BYTES), dtype=np.uint8)
                store.gather(table, ids, out)
                pick = rng.integers(0, 64, size=3)
                np.testing.assert_array_equal(out[pick], expected_rows(SEEDS[table], ids[pick]))
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
