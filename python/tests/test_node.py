"""One store per node from Python: Store(node=...) as a client of a real
engram-served process, in this interpreter and in processes started by
torch.multiprocessing (spawn), and the examples/serve_node.py run."""

import hashlib
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import engram_store
from conftest import SEEDS, TOKEN_MAP, expected_rows, tool

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "serve_node.py")


@pytest.fixture
def served(tables, tmp_path):
    """An engram-served of the two generated layers; yields its socket path."""
    socket = str(tmp_path / "node.sock")
    args = [tool("engram-served"), "--socket", socket, "--cache-bytes", "32MiB", "--log-level", "warn"]
    for t in tables["layers"]:
        args += ["--table", t]
    service = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert service.stdout.readline().startswith("engram-served: ready")
    yield socket, service
    if service.poll() is None:
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=60) == 0


def test_a_node_client_gathers_the_rows_a_private_store_gathers(tables, served):
    socket, _ = served
    ids = np.arange(0, 600, 3, dtype=np.uint64)
    with engram_store.Store(tables=tables["layers"], node=socket, client_name="pytest") as client:
        assert client.table_count == 2
        assert client.io_description.startswith("node(")
        out = np.empty((len(ids), client.record_bytes(0)), dtype=np.uint8)
        first = client.gather(0, ids, out)
        assert first.misses == len(ids)
        assert np.array_equal(out, expected_rows(SEEDS[0], ids))
        again = client.gather(0, ids, out)
        assert again.hits == len(ids) and again.misses == 0
        assert np.array_equal(out, expected_rows(SEEDS[0], ids))
        h = client.gather_async(1, ids[:10], out[:10])
        h.wait()
        assert np.array_equal(out[:10], expected_rows(SEEDS[1], ids[:10]))
        stats = client.stats()
        assert sum(s["cache_hits"] for s in stats.values()) >= len(ids)
        assert "engram_node_clients" in client.metrics_text()


def test_node_client_argument_mistakes_raise_and_the_interpreter_lives(tables, served):
    socket, _ = served
    with engram_store.Store(tables=tables["layers"], node=socket) as client:
        out = np.empty((1, client.record_bytes(0)), dtype=np.uint8)
        with pytest.raises(ValueError):
            client.gather(0, np.array([client.row_count(0)], dtype=np.uint64), out)
        with pytest.raises(ValueError):
            client.gather(5, np.array([1], dtype=np.uint64), out)
    with pytest.raises(ValueError):
        engram_store.Store(tables=tables["layers"], client_name="x")  # a name without a node


def test_a_missing_or_stopped_service_is_an_oserror(tables, served, tmp_path):
    with pytest.raises(OSError, match="no engram-served"):
        engram_store.Store(tables=tables["layers"], node=str(tmp_path / "nobody.sock"))
    socket, service = served
    client = engram_store.Store(tables=tables["layers"], node=socket)
    out = np.empty((4, client.record_bytes(0)), dtype=np.uint8)
    client.gather(0, np.arange(4, dtype=np.uint64), out)
    service.send_signal(signal.SIGTERM)
    assert service.wait(timeout=60) == 0
    # The client learns of it when its receiving thread reads the service's
    # last words: until then cached rows may still be served, exactly.
    with pytest.raises(OSError, match="shutting down|closed"):
        for _ in range(500):
            client.gather(0, np.arange(4, dtype=np.uint64), out)
            assert np.array_equal(out, expected_rows(SEEDS[0], np.arange(4)))
            time.sleep(0.01)
    client.close()


def test_a_service_serving_other_tables_refuses_the_client(tables, served):
    socket, _ = served
    with pytest.raises(ValueError, match="does not serve|serves 2 table"):
        engram_store.Store(tables=tables["layers"][:1], node=socket)


def test_a_client_killed_with_stages_in_flight_costs_the_others_nothing(tables, served):
    socket, service = served
    code = (
        "import sys, numpy as np, engram_store\n"
        "store = engram_store.Store(tables=sys.argv[3:], node=sys.argv[1], token_map=sys.argv[2])\n"
        "out = np.empty((512, store.stage_layers(), store.stage_rows_per_token(), store.record_bytes(0)), np.uint8)\n"
        "store.prefetch(0, np.arange(0, 4000, 7, dtype=np.uint64))\n"
        "k = 0\n"
        "while True:\n"
        "    h = store.stage_async(np.arange(k, k + 512, dtype=np.uint32) % 50000, np.empty(0, np.uint32), out)\n"
        "    if k == 0:\n"
        "        print('ready', flush=True)\n"
        "    h.wait()\n"
        "    k += 512\n")
    for _ in range(3):
        victim = subprocess.Popen([sys.executable, "-c", code, socket, TOKEN_MAP, *tables["layers"]],
                                  stdout=subprocess.PIPE, text=True, env=dict(os.environ))
        assert victim.stdout.readline().strip() == "ready"
        time.sleep(0.05)
        victim.kill()
        victim.wait(timeout=30)
    assert service.poll() is None
    with engram_store.Store(tables=tables["layers"], node=socket) as survivor:
        ids = np.arange(0, 300, 1, dtype=np.uint64)
        out = np.empty((len(ids), survivor.record_bytes(0)), dtype=np.uint8)
        survivor.gather(0, ids, out)
        assert np.array_equal(out, expected_rows(SEEDS[0], ids))
        # The victims' read-ahead pins were released with their connections.
        deadline = time.time() + 5
        while survivor.stats()[survivor.table_names[0]]["cache_pinned_rows"] and time.time() < deadline:
            time.sleep(0.05)
        assert survivor.stats()[survivor.table_names[0]]["cache_pinned_rows"] == 0


def _spawned_client(index, socket, layers, results):
    import hashlib

    import numpy as np

    import engram_store

    with engram_store.Store(tables=layers, node=socket, client_name=f"spawned-{index}",
                            token_map=TOKEN_MAP) as client:
        tokens = np.arange(1000 + 64 * index, 1064 + 64 * index, dtype=np.uint32)
        out = np.empty((len(tokens), client.stage_layers(), client.stage_rows_per_token(), client.record_bytes(0)),
                       dtype=np.uint8)
        r = client.stage(tokens, np.empty(0, dtype=np.uint32), out)
        # A digest, not the rows: a queue's pipe holds 64 KiB, and nobody
        # reads it until every process has ended.
        results.put((index, r.rows, hashlib.sha256(out.tobytes()).hexdigest()))


def test_clients_in_torch_spawned_processes_stage_the_private_stores_rows(tables, served):
    import torch.multiprocessing as mp

    socket, _ = served
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.spawn(_spawned_client, args=(socket, tables["layers"], results), nprocs=2, join=True)
    got = dict((i, (rows, data)) for i, rows, data in (results.get() for _ in range(2)))
    with engram_store.Store(tables=tables["layers"], token_map=TOKEN_MAP, cache_bytes=16 << 20) as private:
        for index in range(2):
            tokens = np.arange(1000 + 64 * index, 1064 + 64 * index, dtype=np.uint32)
            want = np.empty((len(tokens), private.stage_layers(), private.stage_rows_per_token(),
                             private.record_bytes(0)), dtype=np.uint8)
            private.stage(tokens, np.empty(0, dtype=np.uint32), want)
            assert got[index][1] == hashlib.sha256(want.tobytes()).hexdigest()


def test_serve_node_example_checks_four_clients_against_a_private_store(tables):
    env = dict(os.environ)
    run = subprocess.run([sys.executable, EXAMPLE, "--clients", "4", "--tables", *tables["layers"], "--build-dir",
                          os.environ["ENGRAM_BUILD_DIR"], "--steps", "2", "--step-tokens", "256"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "every step equal a private store's" in run.stdout
