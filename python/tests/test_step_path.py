"""The runtime's step path from Python: a step's row IDs in (gather_step),
completion words, the step ring's address-stable buffers, and their
argument mistakes."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import engram_store
from conftest import RECORD_BYTES, TOKEN_MAP

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "serve_graph_ready.py")


def step_ids(tables, tokens, history, layers=(0, 1), dtype=np.uint64):
    """[tokens, layers, 24] row IDs, as a GPU hash kernel writes them."""
    per_layer = [engram_store.Hasher(tables["layout"], index, TOKEN_MAP).row_ids(tokens, history=history)
                 for index in layers]
    return np.stack(per_layer, axis=1).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
def test_gather_step_equals_stage(store, tables, deepspeed_tokens, dtype):
    history, tokens = deepspeed_tokens[:300], deepspeed_tokens[300:364]
    staged = np.zeros((64, 2, 24, RECORD_BYTES), dtype=np.uint8)
    store.stage(tokens, history, staged)
    ids = step_ids(tables, tokens, history, dtype=dtype)
    out = np.zeros_like(staged)
    r = store.gather_step(ids, out)
    assert r.tokens == 64 and r.rows == 64 * 48
    np.testing.assert_array_equal(out, staged)
    later = np.zeros_like(staged)
    handle = store.gather_step_async(ids, later)
    ids[:] = 0  # the IDs are the store's copy once the call returns
    handle.wait(0)
    np.testing.assert_array_equal(later[:, 0], staged[:, 0])
    handle.wait()
    np.testing.assert_array_equal(later, staged)


def test_gather_step_of_torch_ids_into_a_torch_tensor(store, tables, deepspeed_tokens):
    torch = pytest.importorskip("torch")
    tokens = deepspeed_tokens[:8]
    ids = torch.from_numpy(step_ids(tables, tokens, None, dtype=np.int64))
    out = torch.zeros((8, 2, 24, RECORD_BYTES), dtype=torch.uint8)
    store.gather_step(ids, out)
    expected = np.zeros((8, 2, 24, RECORD_BYTES), dtype=np.uint8)
    store.stage(tokens, None, expected)
    np.testing.assert_array_equal(out.numpy(), expected)


def test_ids_of_the_wrong_shape_or_past_the_table_are_clear_errors(store, tables, deepspeed_tokens):
    ids = step_ids(tables, deepspeed_tokens[:4], None)
    out = np.full((4, 2, 24, RECORD_BYTES), 0x5a, dtype=np.uint8)
    with pytest.raises(ValueError, match=r"^ids must have shape \[tokens, 2, 24\] \(tokens, layers, slots\), got \[4, 48\]$"):
        store.gather_step(ids.reshape(4, 48), out)
    with pytest.raises(ValueError, match=r"got \[4, 1, 24\]"):
        store.gather_step(ids[:, :1], out[:, :1])
    with pytest.raises(ValueError, match=r"^out must have shape \[3, 2, 24, 264\]"):
        store.gather_step(ids[:3], out)
    bad = ids.copy()
    bad[2, 1, 7] = store.row_count(1)
    with pytest.raises(ValueError, match=r"row ID \d+ at \[token 2, layer 1, slot 7\] is past the end of its table"):
        store.gather_step(bad, out)
    with pytest.raises(ValueError, match=r"past the end of its table"):
        store.gather_step_async(bad, out)
    negative = ids.astype(np.int64)
    negative[0, 0, 0] = -3
    with pytest.raises(ValueError, match="negative ID -3"):
        store.gather_step(negative, out)
    assert (out == 0x5a).all(), "a refused step writes nothing"


@pytest.mark.parametrize("form", ["stage", "stage_async", "gather_step", "gather_step_async"])
def test_completion_words_hold_the_sequence_once_each_layer_is_in(store, tables, deepspeed_tokens, form):
    tokens, history = deepspeed_tokens[100:132], deepspeed_tokens[:100]
    out = np.zeros((32, 2, 24, RECORD_BYTES), dtype=np.uint8)
    words = np.zeros(2, dtype=np.uint32)
    if form.startswith("stage"):
        call = getattr(store, form)(tokens, history, out, words=words, sequence=77)
    else:
        call = getattr(store, form)(step_ids(tables, tokens, history), out, words=words, sequence=77)
    if form.endswith("async"):
        call.wait(0)
        assert words[0] == 77
        call.wait()
    assert words.tolist() == [77, 77]
    expected = np.zeros_like(out)
    store.stage(tokens, history, expected)
    np.testing.assert_array_equal(out, expected)


def test_completion_words_are_checked(store, deepspeed_tokens):
    out = np.zeros((2, 2, 24, RECORD_BYTES), dtype=np.uint8)
    tokens = deepspeed_tokens[:2]
    with pytest.raises(ValueError, match="3 words given, the step has 2 layers"):
        store.stage(tokens, None, out, words=np.zeros(3, np.uint32), sequence=1)
    with pytest.raises(ValueError, match="sequence number 0 is not in 1..2147483647"):
        store.stage(tokens, None, out, words=np.zeros(2, np.uint32))
    with pytest.raises(ValueError, match="sequence number .* is not in 1..2147483647"):
        store.stage_async(tokens, None, out, words=np.zeros(2, np.uint32), sequence=2 ** 31)
    with pytest.raises(ValueError, match="words must be a contiguous 1-D uint32 array"):
        store.stage(tokens, None, out, words=np.zeros(2, np.int64), sequence=1)
    with pytest.raises(ValueError, match="give words= too"):
        store.stage(tokens, None, out, sequence=3)


def test_a_dequantized_layer_is_in_out_before_its_word(tables, deepspeed_tokens):
    tokens = deepspeed_tokens[:40]
    with engram_store.Store(tables=[tables["fp8"]], cache_bytes=4 << 20, io_backend="pread",
                            token_map=TOKEN_MAP) as s:
        expected = np.empty((40, 1, 24, 256), dtype=np.float32)
        s.stage(tokens, None, expected)
        out = np.full_like(expected, np.nan)
        words = np.zeros(1, dtype=np.uint32)
        seen = []

        def reader():
            while words[0] != 9:
                pass
            seen.append(out.copy())  # the instant the word changes

        t = threading.Thread(target=reader)
        t.start()
        handle = s.stage_async(tokens, None, out, words=words, sequence=9)
        t.join()
        handle.wait()
        np.testing.assert_array_equal(seen[0], expected)


def test_a_long_history_is_read_only_at_its_end(store, deepspeed_tokens):
    tokens = deepspeed_tokens[5000:5004]
    short = np.empty((4, 2, 24, RECORD_BYTES), dtype=np.uint8)
    store.stage(tokens, deepspeed_tokens[4997:5000], short)
    long = np.empty_like(short)
    history = deepspeed_tokens[:5000].astype(np.int64)
    history[:4900] = -1  # never read: only the history's last tokens are hashed
    store.stage(tokens, history, long)
    np.testing.assert_array_equal(long, short)
    with pytest.raises(ValueError, match=r"^history: negative ID -1 at position 4999$"):
        history[4999] = -1
        store.stage(tokens, history, long)


def test_the_ring_stages_into_buffers_that_never_move(store, tables, deepspeed_tokens):
    registered = []
    ring = store.step_ring(slots=2, max_tokens=8, register=lambda address, nbytes: registered.append((address, nbytes)))
    assert (ring.slots, ring.max_tokens, ring.layers) == (2, 8, 2)
    buffers = [ring.buffer(s) for s in range(2)]
    words = [ring.words(s) for s in range(2)]
    assert buffers[0].shape == (8, 2, 24, RECORD_BYTES) and buffers[0].dtype == np.uint8
    assert words[0].shape == (2,) and words[0].dtype == np.uint32
    assert [a for a, _ in registered[:2]] == [b.ctypes.data for b in buffers]
    assert registered[2][0] == words[0].ctypes.data and len(registered) == 3
    for k in range(5):
        tokens, history = deepspeed_tokens[200 + 8 * k:208 + 8 * k], deepspeed_tokens[:200 + 8 * k]
        if k % 2:
            slot, sequence = ring.start_stage(tokens, history)
        else:
            slot, sequence = ring.start_gather_step(step_ids(tables, tokens, history))
        assert (slot, sequence) == (k % 2, k + 1)
        while not (words[slot] == sequence).all():  # as the GPU would wait
            pass
        expected = np.zeros((8, 2, 24, RECORD_BYTES), dtype=np.uint8)
        store.stage(tokens, history, expected)
        np.testing.assert_array_equal(buffers[slot], expected)
        assert ring.wait(slot).tokens == 8 and ring.done(slot)
        ring.release(slot)
    assert ring.buffer(0).ctypes.data == buffers[0].ctypes.data


def test_ring_buffers_keep_the_ring_alive_and_share_memory_with_torch(store, tables, deepspeed_tokens):
    torch = pytest.importorskip("torch")
    ring = store.step_ring(max_tokens=4)
    buffer = ring.buffer(0)
    tensor = torch.from_numpy(buffer)
    del ring  # the arrays hold it
    assert tensor.data_ptr() == buffer.ctypes.data
    buffer[:] = 0  # still mapped


def test_ring_mistakes_are_clear_errors(store, tables, deepspeed_tokens):
    ring = store.step_ring(slots=1, max_tokens=2)
    with pytest.raises(IndexError, match=r"slot 1 out of range \(the ring has 1 slots\)"):
        ring.buffer(1)
    with pytest.raises(ValueError, match="holds no step"):
        ring.release(0)
    with pytest.raises(ValueError, match="more than the ring's max_tokens 2"):
        ring.start_stage(deepspeed_tokens[:3])
    ids = step_ids(tables, deepspeed_tokens[:2], None)
    with pytest.raises(ValueError, match=r"ids must have shape \[tokens, 2, 24\]"):
        ring.start_gather_step(ids.reshape(2, 48))
    slot, _ = ring.start_gather_step(ids)
    with pytest.raises(OSError, match="all 1 slots hold steps not yet released"):
        ring.start_gather_step(ids)
    ring.wait(slot)
    ring.release(slot)
    with pytest.raises(ValueError, match="released twice"):
        ring.release(slot)
    with pytest.raises(TypeError, match="register= and unregister= must be callables"):
        store.step_ring(max_tokens=1, register=5)

    def refuse(address, nbytes):
        raise MemoryError("no pinned memory left")

    with pytest.raises(MemoryError, match="no pinned memory left"):
        store.step_ring(max_tokens=1, register=refuse)


@pytest.mark.parametrize("step_tokens", [1, 8])
def test_serve_graph_ready_example_sees_each_layers_rows_when_its_word_is_set(tables, step_tokens):
    r = subprocess.run([sys.executable, EXAMPLE, "--tables", *tables["layers"], "--layout", tables["layout"],
                        "--token-map", TOKEN_MAP, "--steps", "40", "--step-tokens", str(step_tokens),
                        "--io-backend", "pread"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"40 steps of {step_tokens} tokens over 2 layers: every layer's rows equal the private store's" in r.stdout
