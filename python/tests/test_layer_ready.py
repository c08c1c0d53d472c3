"""stage_async per layer: ready(layer) and wait(layer) on real tables."""

import json
import shutil

import numpy as np
import pytest

import engram_store
from conftest import RECORD_BYTES, TOKEN_MAP, run_python
from test_async import CLOSE_WHILE_STAGING


def cold_store(tables):
    return engram_store.Store(tables=tables["layers"], cache_bytes=8 << 20, io_backend="pread", token_map=TOKEN_MAP)


def test_wait_layer_returns_once_that_layers_rows_are_in_out(tables, deepspeed_tokens):
    history, tokens = deepspeed_tokens[:700], deepspeed_tokens[700:1500]
    expected = np.empty((len(tokens), 2, 24, RECORD_BYTES), dtype=np.uint8)
    with cold_store(tables) as s:
        s.stage(tokens, history, expected)
    with cold_store(tables) as s:  # cold again: every layer misses
        out = np.zeros_like(expected)
        handle = s.stage_async(tokens, history, out)
        first = handle.wait(0)
        assert isinstance(first, engram_store.StageLayerResult)
        assert handle.ready(0)
        np.testing.assert_array_equal(out[:, 0], expected[:, 0])
        assert first.rows == len(tokens) * 24 and first.misses > 0
        assert first.hits + first.misses == first.distinct_rows
        second = handle.wait(1)
        np.testing.assert_array_equal(out[:, 1], expected[:, 1])
        assert second.wait_nanoseconds > 0
        step = handle.wait()
        np.testing.assert_array_equal(out, expected)
        assert [layer.misses for layer in step.layers] == [first.misses, second.misses]
        assert step.misses == first.misses + second.misses
        assert step.wait_nanoseconds == max(first.wait_nanoseconds, second.wait_nanoseconds)
        assert handle.ready(1)
        assert handle.wait(1).misses == second.misses  # after wait(): the step's own figure


def test_layers_follow_the_order_given(store, deepspeed_tokens):
    tokens = deepspeed_tokens[:300]
    both = np.empty((300, 2, 24, RECORD_BYTES), dtype=np.uint8)
    store.stage(tokens, None, both)
    out = np.empty_like(both)
    handle = store.stage_async(tokens, None, out, layers=[1, 0])
    handle.wait(0)
    np.testing.assert_array_equal(out[:, 0], both[:, 1])  # position 0 is table 1
    handle.wait()
    np.testing.assert_array_equal(out[:, 1], both[:, 0])


def test_a_layer_out_of_range_is_an_index_error(store):
    handle = store.stage_async(np.arange(4, dtype=np.uint32), None, np.empty((4, 2, 24, RECORD_BYTES), np.uint8))
    for bad in (2, -1, 2**70):
        with pytest.raises(IndexError, match="out of range"):
            handle.wait(bad)
        with pytest.raises(IndexError, match="out of range"):
            handle.ready(bad)
    for bad in ("0", True, 0.0):
        with pytest.raises(TypeError, match="layer must be an int"):
            handle.wait(bad)
    handle.wait()
    with pytest.raises(IndexError):
        handle.wait(2)


def test_wait_layer_raises_the_steps_bad_token(store):
    out = np.full((2, 2, 24, RECORD_BYTES), 7, dtype=np.uint8)
    handle = store.stage_async(np.array([5, 4000000000], dtype=np.uint64), None, out)
    with pytest.raises(ValueError, match="token"):
        handle.wait(1)
    assert handle.ready(0)  # failed counts as settled
    with pytest.raises(ValueError, match="token"):
        handle.wait()
    assert (out == 7).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_wait_layer_dequantizes_that_layer(tables, deepspeed_tokens, dtype, tmp_path):
    tokens = deepspeed_tokens[:150]
    second = tmp_path / "fp8-second-layer.engram"
    shutil.copyfile(tables["fp8"], second)
    with engram_store.Store(tables=[tables["fp8"], str(second)], cache_bytes=4 << 20, io_backend="pread",
                            token_map=TOKEN_MAP) as s:
        expected = np.empty((150, 2, 24, 256), dtype=dtype)
        s.stage(tokens, None, expected)
        out = np.zeros_like(expected)
        handle = s.stage_async(tokens, None, out)
        handle.wait(1)
        np.testing.assert_array_equal(out[:, 1], expected[:, 1])
        handle.wait()
        np.testing.assert_array_equal(out, expected)


# test_async's close-vs-stage_async race, each step now waited for per layer
# (the later layer's start on the stager's starter thread races close too).
DROPPED_STEP = "s.stage_async(tokens, None, out)  # dropped: waits for its step"
assert DROPPED_STEP in CLOSE_WHILE_STAGING
CLOSE_WHILE_WAITING_PER_LAYER = CLOSE_WHILE_STAGING.replace(
    DROPPED_STEP, "h = s.stage_async(tokens, None, out); h.ready(len(tables) - 1); h.wait(0)  # the rest dropped")


def test_close_racing_per_layer_waits_is_safe(tables):
    iterations = 200
    r = run_python(CLOSE_WHILE_WAITING_PER_LAYER, json.dumps(tables["layers"]), TOKEN_MAP, iterations, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"
    assert r.stdout.split() == [str(iterations)]
