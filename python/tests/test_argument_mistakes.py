"""Ordinary argument mistakes raise a clear exception naming the argument.

The mistakes that could crash the interpreter run in a subprocess: a crash
there fails the test instead of ending the session.
"""

import json

import numpy as np
import pytest

import engram_store
from conftest import LAYOUT_V41, RECORD_BYTES, TOKEN_MAP, run_python

# Prints "<exception type>: <message>" for each mistake, in order.
MISTAKES = r"""
import json, sys
import numpy as np, torch, engram_store
tables = json.loads(sys.argv[1])
s = engram_store.Store(tables=tables, cache_bytes=1 << 20, io_backend="pread")
ids = np.arange(3, dtype=np.uint64)
out = np.empty((3, 264), dtype=np.uint8)
step = np.empty((2, 2, 24, 264), dtype=np.uint8)
mistakes = [
    lambda: s.gather(ids, 0, out),                       # row IDs and table swapped
    lambda: s.gather(torch.tensor([0, 1]), ids, out),    # a tensor as the table
    lambda: s.row_count(np.array([0, 0])),
    lambda: s.stage([1, 2], None, step, layers=[np.array([0, 1])]),
    lambda: s.gather_async(ids, 0, out),
]
for mistake in mistakes:
    try:
        mistake()
        print("no error")
    except Exception as e:
        print(f"{type(e).__name__}: {e}")
"""


def test_a_table_argument_that_is_not_an_index_is_a_type_error_not_a_crash(tables):
    pytest.importorskip("torch")
    r = run_python(MISTAKES, json.dumps(tables["layers"]))
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
    lines = r.stdout.splitlines()
    assert len(lines) == 5, r.stdout
    expected = "TypeError: table must be a table index (int) or name (str), not "
    assert lines[0].startswith(expected + "numpy.ndarray"), lines[0]
    assert lines[1].startswith(expected + "Tensor"), lines[1]
    assert lines[2].startswith(expected + "numpy.ndarray"), lines[2]
    assert lines[3].startswith(expected + "numpy.ndarray"), lines[3]
    assert lines[4].startswith(expected + "numpy.ndarray"), lines[4]


def test_a_bool_table_is_a_type_error(store):
    with pytest.raises(TypeError, match="not bool"):
        store.row_count(True)


def test_an_integer_scalar_array_is_still_a_table_index(store):
    assert store.row_count(np.array(1)) == store.row_count(1)  # a 0-d array
    assert store.row_count(np.int64(0)) == store.row_count(0)


def test_a_table_index_too_large_for_any_integer_is_out_of_range(store):
    with pytest.raises(ValueError, match=r"^table index 1180591620717411303424 out of range \(the store has 2 tables\)$"):
        store.record_bytes(2 ** 70)
    with pytest.raises(ValueError, match=r"^table index -1180591620717411303424 out of range"):
        store.row_count(-2 ** 70)


def test_a_token_too_large_for_any_integer_names_the_argument_and_position(store):
    out = np.empty((2, 2, 24, RECORD_BYTES), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"^tokens: token 1180591620717411303424 at position 1 is not a uint32$"):
        store.stage([5, 2 ** 70], None, out)
    with pytest.raises(ValueError, match=r"^history: token -1180591620717411303424 at position 0 is not a uint32$"):
        store.stage([5, 6], [-2 ** 70], out)
    hasher = engram_store.Hasher(LAYOUT_V41, 0, TOKEN_MAP)
    with pytest.raises(ValueError, match=r"^tokens: token 1180591620717411303424 at position 2 is not a uint32$"):
        hasher.row_ids([1, 2, 2 ** 70])


def test_a_str_as_layers_is_a_type_error_not_a_list_of_characters(store):
    out = np.empty((1, 1, 24, RECORD_BYTES), dtype=np.uint8)
    with pytest.raises(TypeError, match=r'^layers must be a sequence of table indexes or names \(e.g. \["layer1"\]\), not str$'):
        store.stage([5], None, out, layers="layer1")
    with pytest.raises(TypeError, match="^layers must be a sequence .* not int$"):
        store.stage([5], None, out, layers=0)
    store.stage([5], None, out, layers=["layer1"])  # the intended call


def test_a_bad_history_token_is_reported_at_its_position_in_history(store):
    hasher = engram_store.Hasher(LAYOUT_V41, 0, TOKEN_MAP)
    assert hasher.history_tokens >= 2
    # The bad token is the second-to-last of the history, which the step's
    # first n-grams reach back to.
    history = [7, 8, 9, 10, 200000, 11]
    expected = r"history token 200000 at position 4 is outside the token map"
    with pytest.raises(ValueError, match=expected):
        hasher.row_ids([5], history=history)
    with pytest.raises(ValueError, match=expected):
        store.stage([5], history, np.empty((1, 2, 24, RECORD_BYTES), dtype=np.uint8))


def test_bools_are_not_tokens_or_row_ids(store):
    out = np.empty((1, 2, 24, RECORD_BYTES), dtype=np.uint8)
    with pytest.raises(TypeError, match=r"^tokens must hold ints, not bools \(True at position 0\)$"):
        store.stage([True], None, out)
    with pytest.raises(TypeError, match=r"^history must hold ints, not bools \(False at position 1\)$"):
        store.stage([5], [3, False], out)
    with pytest.raises(TypeError, match=r"^tokens must hold ints, not bools \(True at position 0\)$"):
        store.stage([np.True_], None, out)
    with pytest.raises(TypeError, match=r"^tokens must hold integers, not bools"):
        store.stage(np.array([True]), None, out)
    with pytest.raises(TypeError, match=r"^row_ids must hold integers, not bools"):
        store.gather(0, np.array([True, False]), np.empty((2, RECORD_BYTES), dtype=np.uint8))
    hasher = engram_store.Hasher(LAYOUT_V41, 0, TOKEN_MAP)
    with pytest.raises(TypeError, match="not bools"):
        hasher.row_ids([True])


def test_a_torch_bool_tensor_is_a_type_error(store):
    torch = pytest.importorskip("torch")
    out = np.empty((1, 2, 24, RECORD_BYTES), dtype=np.uint8)
    with pytest.raises(TypeError, match="^tokens: Tensor cannot be borrowed through DLPack"):
        store.stage(torch.tensor([True]), None, out)


def test_a_str_as_tokens_is_a_type_error(store):
    with pytest.raises(TypeError, match="^tokens must be an integer array or a sequence of ints, not str$"):
        store.stage("12", None, np.empty((2, 2, 24, RECORD_BYTES), dtype=np.uint8))


def test_every_store_argument_after_tables_is_keyword_only(tables):
    with pytest.raises(TypeError):
        engram_store.Store(tables["layers"], 1 << 20)
    # The binding's own Store, which the package's passes them to by keyword.
    with pytest.raises(TypeError):
        engram_store._engram_store.Store(tables["layers"], 1 << 20)
    with engram_store.Store(tables["layers"], cache_bytes=1 << 20, io_backend="pread") as s:
        assert s.table_count == 2
