"""Zero rows or zero tokens: a valid, empty gather or stage."""

import numpy as np
import pytest

import engram_store
from conftest import RECORD_BYTES, TOKEN_MAP


def test_gather_of_no_rows(store):
    ids = np.empty(0, dtype=np.uint64)
    r = store.gather(0, ids, np.empty((0, RECORD_BYTES), dtype=np.uint8))
    assert r.rows == 0
    r = store.gather(1, np.arange(10, dtype=np.int32)[:0], np.empty((5, RECORD_BYTES), dtype=np.uint8)[:0])
    assert r.rows == 0
    assert store.gather_async(0, ids, np.empty((0, RECORD_BYTES), dtype=np.uint8)).wait().rows == 0


def test_gather_of_no_rows_into_torch(store):
    torch = pytest.importorskip("torch")
    r = store.gather(0, torch.empty(0, dtype=torch.int64), torch.empty((0, RECORD_BYTES), dtype=torch.uint8))
    assert r.rows == 0


def test_an_empty_out_of_the_wrong_shape_is_still_refused(store):
    with pytest.raises(ValueError, match=r"shape \[0, 264\]"):
        store.gather(0, np.empty(0, dtype=np.uint64), np.empty((0, RECORD_BYTES - 1), dtype=np.uint8))


def test_stage_of_no_tokens(store, deepspeed_tokens):
    out = np.empty((0, 2, 24, RECORD_BYTES), dtype=np.uint8)
    r = store.stage(np.empty(0, dtype=np.uint32), deepspeed_tokens[:10], out)
    assert r.tokens == 0 and r.rows == 0
    r = store.stage([], None, out)
    assert r.rows == 0
    assert store.stage_async([], None, out).wait().rows == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_dequantized_stage_of_no_tokens(tables, dtype):
    with engram_store.Store(tables=[tables["fp8"]], cache_bytes=4 << 20, io_backend="pread",
                            token_map=TOKEN_MAP) as s:
        out = np.empty((0, 1, 24, 256), dtype=dtype)
        assert s.stage([], None, out).rows == 0
        assert s.stage_async([], None, out).wait().rows == 0
