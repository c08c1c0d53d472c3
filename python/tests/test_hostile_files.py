"""Files that are not what they claim (a device, a FIFO, a directory) as a
hash layout or a token map raise a clear exception at once: never a read
without end, a hang, or an allocation of the file's claimed size.

Each runs in a subprocess with a timeout, so that a hang fails the test
instead of blocking the session."""

import json
import os

import pytest

from conftest import LAYOUT_V41, TOKEN_MAP, run_python

# Prints "<exception type>: <message>" for the call in argv[1] (a Python
# expression over engram_store, json and the paths in argv[2:]).
TRY = r"""
import json, sys
import engram_store
paths = sys.argv[2:]
try:
    eval(sys.argv[1])
    print("no error")
except Exception as e:
    print(f"{type(e).__name__}: {e}")
"""

CLEAR_ERRORS = ("OSError", "FileNotFoundError", "IsADirectoryError", "ValueError", "CorruptionError")


def outcome(call, *paths):
    r = run_python(TRY, call, *paths, timeout=20)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"
    return r.stdout.strip()


def assert_clear_error(result, path, words):
    kind, _, message = result.partition(": ")
    assert kind in CLEAR_ERRORS, result
    assert path in message, result
    assert any(w in message.lower() for w in words), result


@pytest.fixture
def fifo(tmp_path):
    path = str(tmp_path / "fifo")
    os.mkfifo(path)
    return path


def test_dev_zero_as_a_hash_layout_raises_at_once():
    assert_clear_error(outcome("engram_store.Hasher(paths[0])", "/dev/zero"), "/dev/zero",
                       ("regular file", "device", "too large", "size"))


def test_dev_zero_as_a_token_map_raises_at_once():
    assert_clear_error(outcome("engram_store.Hasher(paths[0], 0, paths[1])", LAYOUT_V41, "/dev/zero"), "/dev/zero",
                       ("regular file", "device", "too large", "size"))


def test_a_fifo_as_a_hash_layout_raises_instead_of_hanging(fifo):
    assert_clear_error(outcome("engram_store.Hasher(paths[0])", fifo), fifo, ("regular file", "fifo", "pipe"))


def test_a_fifo_as_a_token_map_raises_instead_of_hanging(fifo, tables):
    assert_clear_error(outcome("engram_store.Hasher(paths[0], 0, paths[1])", LAYOUT_V41, fifo), fifo,
                       ("regular file", "fifo", "pipe"))
    call = "engram_store.Store(tables=json.loads(paths[0]), io_backend='pread', token_map=paths[1])"
    assert_clear_error(outcome(call, json.dumps(tables["layers"]), fifo), fifo, ("regular file", "fifo", "pipe"))


def test_a_directory_as_a_hash_layout_or_token_map_is_named_a_directory(tmp_path, tables):
    d = str(tmp_path)
    words = ("directory", "regular file")
    assert_clear_error(outcome("engram_store.Hasher(paths[0])", d), d, words)
    result = outcome("engram_store.Hasher(paths[0], 0, paths[1])", LAYOUT_V41, d)
    assert "9223372036854775807" not in result
    assert_clear_error(result, d, words)
    call = "engram_store.Store(tables=json.loads(paths[0]), io_backend='pread', token_map=paths[1])"
    assert_clear_error(outcome(call, json.dumps(tables["layers"]), d), d, words)


def test_the_token_map_fixture_still_loads():
    # The readers' checks refuse special files, not the real thing.
    assert outcome("engram_store.Hasher(paths[0], 0, paths[1])", LAYOUT_V41, TOKEN_MAP) == "no error"
