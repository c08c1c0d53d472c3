"""Fixtures: real Engram tables on disk, written by the project's own tools.

Two V4.1-shaped layers (the layout of tests/fixtures/engram-hash/layout-v41.json
with its primes scaled down: engram_store.scaled_tables) written by engram-gen, whose rows the C++ row generator reproduces (engram-gen
--emit-rows); and one layer of fp8 e4m3 weights with ue8m0 scales converted
from a safetensors file by engram-convert, for dequantized staging.
"""

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from engram_store.scaled_tables import write_generated_tables

BUILD_DIR = os.environ.get("ENGRAM_BUILD_DIR", "")
FIXTURE_DIR = os.environ.get("ENGRAM_FIXTURE_DIR", os.path.join(os.path.dirname(__file__), "../../tests/fixtures"))
HASH_DIR = os.path.join(FIXTURE_DIR, "engram-hash")
LAYOUT_V41 = os.path.join(HASH_DIR, "layout-v41.json")
TOKEN_MAP = os.path.join(HASH_DIR, "token-map.u32")
RECORD_BYTES = 264
ROWS_PER_BLOCK = 4088 // RECORD_BYTES
SEEDS = (11, 12)


def tool(name):
    path = os.path.join(BUILD_DIR, name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: set ENGRAM_BUILD_DIR to a build with the tools (ctest does)")
    return path


def expected_rows(seed, row_ids):
    """Rows as the C++ row generator makes them (engram-gen --emit-rows)."""
    ids = [int(r) for r in np.asarray(row_ids).reshape(-1)]
    out = subprocess.run([tool("engram-gen"), "--seed", str(seed), "--record-bytes", str(RECORD_BYTES),
                          "--emit-rows", *map(str, ids)], check=True, capture_output=True).stdout
    return np.frombuffer(out, dtype=np.uint8).reshape(len(ids), RECORD_BYTES)


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, (dtype, array) in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


@pytest.fixture(scope="session")
def tables(tmp_path_factory):
    """Paths of the two generated layers, their layout file and the fp8 table."""
    d = tmp_path_factory.mktemp("tables")
    paths, layout_path = write_generated_tables(tool("engram-gen"), LAYOUT_V41, str(d), 12000, seeds=SEEDS,
                                                record_bytes=RECORD_BYTES)
    with open(layout_path) as f:
        layout = json.load(f)
    # fp8 weights and ue8m0 scales for layer 1's rows; no NaN encodings.
    rows = layout["layers"][0]["total_rows"]
    rng = np.random.default_rng(5)
    weight = rng.integers(0, 0x7e, size=(rows, 256), dtype=np.uint8) | (rng.integers(0, 2, (rows, 256), dtype=np.uint8) << 7)
    scale = rng.integers(110, 140, size=(rows, 8), dtype=np.uint8)
    st = d / "fp8.safetensors"
    write_safetensors(st, {"w": ("F8_E4M3", weight), "s": ("F8_E8M0", scale)})
    fp8 = d / "fp8.engram"
    subprocess.run([tool("engram-convert"), "--safetensors", str(st), "--weight", "w", "--scale", "s", "--layout",
                    str(layout_path), "--layer", str(layout["layers"][0]["layer_id"]), str(fp8)], check=True)
    return {"layers": paths, "layout": layout_path, "fp8": str(fp8), "dir": d}


@pytest.fixture
def store(tables):
    import engram_store
    s = engram_store.Store(tables=tables["layers"], cache_bytes=8 << 20, io_backend="pread", token_map=TOKEN_MAP)
    yield s
    s.close()


@pytest.fixture(scope="session")
def deepspeed_tokens():
    return np.fromfile(os.path.join(FIXTURE_DIR, "traces", "deepspeed", "req1.u32"), dtype="<u4")


def run_python(code, *args, timeout=120, env=None):
    """Runs `code` in a fresh interpreter (this one's executable and
    PYTHONPATH), so that a crash or a hang fails one test instead of killing
    or blocking the whole session. args become sys.argv[1:]."""
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)
