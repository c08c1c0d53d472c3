"""gather_async / stage_async: wait() and asyncio, buffers kept alive."""

import asyncio
import gc
import weakref

import numpy as np

import engram_store
from conftest import RECORD_BYTES, SEEDS, expected_rows


def test_gather_async_wait_returns_the_result_and_fills_out(store):
    ids = np.arange(40, 90, dtype=np.uint64)
    out = np.zeros((len(ids), RECORD_BYTES), dtype=np.uint8)
    handle = store.gather_async(0, ids, out)
    r = handle.wait()
    assert handle.done()
    assert r.rows == 50
    np.testing.assert_array_equal(out, expected_rows(SEEDS[0], ids))


def test_async_handle_keeps_row_ids_and_out_alive_until_done(store):
    ids = np.arange(300, 700, dtype=np.uint64)
    out = np.zeros((len(ids), RECORD_BYTES), dtype=np.uint8)
    ids_ref, out_ref = weakref.ref(ids), weakref.ref(out)
    handle = store.gather_async(0, ids, out)
    del ids, out
    gc.collect()
    assert ids_ref() is not None and out_ref() is not None  # the handle holds them
    held = out_ref()
    handle.wait()
    np.testing.assert_array_equal(held, expected_rows(SEEDS[0], np.arange(300, 700)))
    del held
    gc.collect()
    assert out_ref() is None and ids_ref() is None  # released once done


def test_dropping_an_unwaited_handle_waits_for_its_gather(store):
    for _ in range(20):
        out = np.zeros((500, RECORD_BYTES), dtype=np.uint8)
        store.gather_async(1, np.arange(500, dtype=np.uint64), out)  # handle dropped at once
    np.testing.assert_array_equal(out, expected_rows(SEEDS[1], np.arange(500)))


def test_asyncio_awaits_several_gathers_at_once(store):
    async def main():
        outs = [np.zeros((32, RECORD_BYTES), dtype=np.uint8) for _ in range(6)]
        ids = [np.arange(1000 + 50 * i, 1032 + 50 * i, dtype=np.uint64) for i in range(6)]
        results = await asyncio.gather(*(store.gather_async(i % 2, ids[i], outs[i]) for i in range(6)))
        return ids, outs, results

    ids, outs, results = asyncio.run(main())
    for i, (r, out) in enumerate(zip(results, outs)):
        assert isinstance(r, engram_store.GatherResult) and r.rows == 32
        np.testing.assert_array_equal(out, expected_rows(SEEDS[i % 2], ids[i]))


def test_asyncio_stage_one_step_ahead(store, deepspeed_tokens):
    tokens = deepspeed_tokens[:512]
    steps = [tokens[i:i + 128] for i in range(0, 512, 128)]

    async def main():
        outs = [np.empty((len(s), 2, 24, RECORD_BYTES), dtype=np.uint8) for s in steps]
        pending = store.stage_async(steps[0], None, outs[0])
        results = []
        for k in range(len(steps)):
            nxt = store.stage_async(steps[k + 1], tokens[:128 * (k + 1)], outs[k + 1]) if k + 1 < len(steps) else None
            results.append(await pending)
            pending = nxt
        return outs, results

    outs, results = asyncio.run(main())
    assert all(isinstance(r, engram_store.StageResult) for r in results)
    whole = np.empty((512, 2, 24, RECORD_BYTES), dtype=np.uint8)
    store.stage(tokens, None, whole)
    np.testing.assert_array_equal(np.concatenate(outs), whole)
