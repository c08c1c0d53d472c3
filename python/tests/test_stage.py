"""Store.stage against separate Hasher + gather calls, raw and dequantized."""

import numpy as np
import pytest

import engram_store
from conftest import RECORD_BYTES, TOKEN_MAP


def separate(store, tables, tokens, history):
    """What a runtime did without stage: hash each layer, gather each layer."""
    layers = []
    for index, path in enumerate(tables["layers"]):
        hasher = engram_store.Hasher(tables["layout"], index, TOKEN_MAP)
        ids = hasher.row_ids(tokens, history=history)
        out = np.empty((ids.size, RECORD_BYTES), dtype=np.uint8)
        store.gather(index, ids.reshape(-1), out)
        layers.append(out.reshape(len(tokens), 24, RECORD_BYTES))
    return np.stack(layers, axis=1)


def test_stage_equals_separate_hash_and_gather(store, tables, deepspeed_tokens):
    history, tokens = deepspeed_tokens[:700], deepspeed_tokens[700:1500]
    out = np.zeros((len(tokens), 2, 24, RECORD_BYTES), dtype=np.uint8)
    r = store.stage(tokens, history, out)
    assert r.tokens == 800 and r.rows == 800 * 48
    assert r.distinct_rows < r.rows  # repeated n-grams fetched once
    np.testing.assert_array_equal(out, separate(store, tables, tokens, history))


def test_stage_of_one_layer_by_name_and_into_torch(store, tables, deepspeed_tokens):
    torch = pytest.importorskip("torch")
    tokens = torch.from_numpy(deepspeed_tokens[:300].astype(np.int64))
    out = torch.zeros((300, 1, 24, RECORD_BYTES), dtype=torch.uint8)
    store.stage(tokens, None, out, layers=["layer14"])
    np.testing.assert_array_equal(out.numpy()[:, 0], separate(store, tables, deepspeed_tokens[:300], None)[:, 1])


def test_stage_async_equals_stage(store, deepspeed_tokens):
    tokens = deepspeed_tokens[2000:2256]
    a = np.empty((256, 2, 24, RECORD_BYTES), dtype=np.uint8)
    b = np.empty_like(a)
    handle = store.stage_async(tokens, deepspeed_tokens[:2000], a)
    store.stage(tokens, deepspeed_tokens[:2000], b)
    handle.wait()
    np.testing.assert_array_equal(a, b)


def e4m3_table():
    v = np.arange(256)
    sign = np.where(v >> 7, -1.0, 1.0)
    exponent, mantissa = (v >> 3) & 15, v & 7
    value = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6, (1 + mantissa / 8.0) * 2.0 ** (exponent - 7.0))
    value = np.where((exponent == 15) & (mantissa == 7), np.nan, value)
    return sign * value


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_dequantized_stage_equals_fp8_times_scale(tables, deepspeed_tokens, dtype):
    tokens = deepspeed_tokens[:200]
    with engram_store.Store(tables=[tables["fp8"]], cache_bytes=4 << 20, io_backend="pread",
                            token_map=TOKEN_MAP) as s:
        raw = np.empty((200, 1, 24, RECORD_BYTES), dtype=np.uint8)
        s.stage(tokens, None, raw)
        values = np.empty((200, 1, 24, 256), dtype=dtype)
        s.stage(tokens, None, values)
    weight = e4m3_table()[raw[..., :256]]
    scale = 2.0 ** (raw[..., 256:].astype(np.float64) - 127)
    with np.errstate(over="ignore"):  # large scales overflow float16 to inf, on both sides
        expected = (weight.reshape(200, 1, 24, 8, 32) * scale[..., None]).reshape(200, 1, 24, 256).astype(dtype)
    np.testing.assert_array_equal(values, expected)
