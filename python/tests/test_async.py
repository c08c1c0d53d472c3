"""gather_async / stage_async: wait() and asyncio, buffers kept alive."""

import asyncio
import gc
import json
import weakref

import numpy as np
import pytest

import engram_store
from conftest import RECORD_BYTES, SEEDS, TOKEN_MAP, expected_rows, run_python


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


CLOSE_WHILE_STAGING = r"""
import json, sys, threading
import numpy as np, engram_store
tables, token_map, iterations = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sys.setswitchinterval(1e-6)  # switch threads as often as possible
tokens = np.arange(1, dtype=np.uint32)
closed_errors = 0
for _ in range(iterations):
    s = engram_store.Store(tables=tables, cache_bytes=1 << 20, io_backend="pread", direct_io=False,
                           completion_threads=1, token_map=token_map)
    out = np.empty((1, len(tables), 24, 264), dtype=np.uint8)

    def stage():
        global closed_errors
        try:
            while True:
                s.stage_async(tokens, None, out)  # dropped: waits for its step
        except ValueError as e:
            assert str(e) == "the store is closed", e
            closed_errors += 1

    t = threading.Thread(target=stage)
    t.start()
    s.close()
    t.join()
print(closed_errors)
"""


def test_close_on_one_thread_while_another_calls_stage_async(tables):
    # Each iteration races close() against stage_async() on another thread;
    # an unguarded staging thread crashes the interpreter within 200.
    iterations = 400
    r = run_python(CLOSE_WHILE_STAGING, json.dumps(tables["layers"][:1]), TOKEN_MAP, iterations, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"
    assert r.stdout.split() == [str(iterations)]  # every stager saw a clear "closed" error


def test_stage_async_after_close_is_a_value_error(tables):
    s = engram_store.Store(tables=tables["layers"], cache_bytes=1 << 20, io_backend="pread", token_map=TOKEN_MAP)
    s.close()
    with pytest.raises(ValueError, match="^the store is closed$"):
        s.stage_async(np.arange(2, dtype=np.uint32), None, np.empty((2, 2, 24, RECORD_BYTES), dtype=np.uint8))


RESIZE_WHILE_PENDING = r"""
import json, sys
import numpy as np, torch, engram_store
s = engram_store.Store(tables=json.loads(sys.argv[1]), cache_bytes=1 << 20, io_backend="pread",
                       token_map=sys.argv[2])
ids = np.arange(4000, dtype=np.uint64)
out = torch.zeros((len(ids), 264), dtype=torch.uint8)
try:
    handle = s.gather_async(0, ids, out)
except TypeError as e:
    print("refused:", e)
else:
    out.resize_((40 * len(ids), 264))  # reallocates, freeing the memory the gather writes
    handle.wait()
    print("not refused")
step = torch.zeros((2, 2, 24, 264), dtype=torch.uint8)
try:
    handle = s.stage_async(np.arange(2, dtype=np.uint32), None, step)
except TypeError as e:
    print("refused:", e)
else:
    step.resize_((400, 2, 24, 264))
    handle.wait()
    print("not refused")
"""


def test_a_torch_out_is_refused_by_the_async_forms_whose_writes_a_resize_would_strand(tables):
    # Holding the tensor does not pin its memory: resize_() swaps a new
    # allocation into the same storage and frees the one being written.
    pytest.importorskip("torch")
    r = run_python(RESIZE_WHILE_PENDING, json.dumps(tables["layers"]), TOKEN_MAP)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    assert lines[0].startswith("refused: gather_async: out must be a numpy array"), lines[0]
    assert lines[1].startswith("refused: stage_async: out must be a numpy array"), lines[1]
    assert "Tensor.resize_()" in lines[0] and "torch.from_numpy" in lines[0]


def test_a_pending_numpy_out_cannot_be_resized_and_a_tensor_over_it_is_safe(store):
    torch = pytest.importorskip("torch")
    ids = np.arange(2000, dtype=np.uint64)
    out = np.zeros((len(ids), RECORD_BYTES), dtype=np.uint8)
    tensor = torch.from_numpy(out)  # the recommended way to gather asynchronously into a tensor
    handle = store.gather_async(0, ids, out)
    with pytest.raises(ValueError):
        out.resize((40 * len(ids), RECORD_BYTES))  # numpy refuses: the handle holds a reference
    with pytest.raises(RuntimeError, match="not resizable"):
        tensor.resize_((40 * len(ids), RECORD_BYTES))  # torch refuses: numpy owns the memory
    # (torch has already set the refused shape on the tensor: it must not be read now)
    del tensor
    handle.wait()
    np.testing.assert_array_equal(out, expected_rows(SEEDS[0], ids))


def test_torch_tensors_still_work_as_row_ids_of_the_async_forms(store):
    torch = pytest.importorskip("torch")
    ids = torch.arange(100, 140, dtype=torch.int64)
    out = np.zeros((40, RECORD_BYTES), dtype=np.uint8)
    store.gather_async(1, ids, out).wait()
    np.testing.assert_array_equal(out, expected_rows(SEEDS[1], ids.numpy()))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_dropping_a_dequantizing_stage_handle_still_dequantizes_into_out(tables, deepspeed_tokens, dtype):
    tokens = deepspeed_tokens[:100]
    with engram_store.Store(tables=[tables["fp8"]], cache_bytes=4 << 20, io_backend="pread",
                            token_map=TOKEN_MAP) as s:
        expected = np.empty((100, 1, 24, 256), dtype=dtype)
        s.stage(tokens, None, expected)
        for _ in range(5):
            out = np.zeros((100, 1, 24, 256), dtype=dtype)
            s.stage_async(tokens, None, out)  # dropped at once: waits and dequantizes
            np.testing.assert_array_equal(out, expected)
