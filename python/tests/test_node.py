"""One store per node from Python: Store(node=...) as a client of a real
engram-served process, in this interpreter and in processes started by
torch.multiprocessing (spawn), and the examples/serve_node.py run."""

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import engram_store
from conftest import SEEDS, TOKEN_MAP, expected_rows, run_python, tool

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
        service.send_signal(signal.SIGCONT)  # a test may have stopped it
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=60) == 0


def wait_until_stopped(pid, timeout=10.0):
    """A signal is delivered when its target next runs: wait until every thread of the process is stopped."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                continue
        if states and all(s in ("T", "t") for s in states):
            return
        time.sleep(0.002)
    raise AssertionError(f"process {pid} did not stop")


@contextlib.contextmanager
def stopped(service):
    """The service stopped (SIGSTOP) for the block, and running again after it, however it ends."""
    service.send_signal(signal.SIGSTOP)
    wait_until_stopped(service.pid)
    try:
        yield
    finally:
        service.send_signal(signal.SIGCONT)


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


def test_an_empty_node_path_is_a_value_error_not_a_private_store(tables):
    with pytest.raises(ValueError, match="node= is an empty socket path"):
        engram_store.Store(tables=tables["layers"], node="")


def test_a_client_refuses_the_services_arguments_by_their_python_names(tables, tmp_path):
    nobody = str(tmp_path / "nobody.sock")  # refused before any connection is tried
    for argument, value in [("cache_bytes", 1 << 20), ("policy", "legacy"), ("io_backend", "pread"),
                            ("direct_io", False), ("completion_threads", 3), ("io_rings", 2),
                            ("metrics_listen", "127.0.0.1:0"), ("hot_set", str(tmp_path / "hot.set")),
                            ("hot_set_interval", 1.0)]:
        with pytest.raises(ValueError, match=f"^Store\\(node=...\\): {argument}= is engram-served's to set"):
            engram_store.Store(tables=tables["layers"], node=nobody, **{argument: value})
    # Their Python defaults are the service's defaults: given explicitly, they
    # are not refused, and the open goes on to find nobody there.
    with pytest.raises(OSError, match="no engram-served"):
        engram_store.Store(tables=tables["layers"], node=nobody, cache_bytes=1 << 30, policy="default",
                           io_backend="auto", direct_io=True, completion_threads=2, io_rings=1, metrics_listen=None,
                           hot_set=None, hot_set_interval=0.0)


def test_node_deadlines_are_seconds_in_range_and_only_for_a_client(tables, tmp_path):
    nobody = str(tmp_path / "nobody.sock")
    for argument in ("node_open_timeout", "node_call_timeout"):
        for bad in (0, -1, 3600.5, float("nan"), float("inf"), 10**400):
            with pytest.raises(ValueError, match=f"{argument}= must be a number of seconds in \\(0, 3600\\]"):
                engram_store.Store(tables=tables["layers"], node=nobody, **{argument: bad})
        for wrong in ("1", True, [1]):
            with pytest.raises(TypeError, match=argument):
                engram_store.Store(tables=tables["layers"], node=nobody, **{argument: wrong})
        with pytest.raises(ValueError, match=f"{argument}= is for a client of a node service: give node= too"):
            engram_store.Store(tables=tables["layers"], **{argument: 1.0})
        for good in (3600, 0.001, np.float32(2.5)):
            with pytest.raises(OSError, match="no engram-served"):
                engram_store.Store(tables=tables["layers"], node=nobody, **{argument: good})


def test_opening_a_client_of_a_stopped_service_times_out_at_the_open_deadline(tables, served):
    socket, service = served
    with stopped(service):
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="within 300 ms") as raised:
            engram_store.Store(tables=tables["layers"], node=socket, node_open_timeout=0.3)
        waited = time.monotonic() - start
    assert 0.29 <= waited < 10
    assert isinstance(raised.value, OSError) and raised.value.code == "Deadline exceeded"
    # Running again, the service takes clients as before.
    with engram_store.Store(tables=tables["layers"], node=socket, node_open_timeout=10) as client:
        out = np.empty((4, client.record_bytes(0)), dtype=np.uint8)
        client.gather(0, np.arange(4, dtype=np.uint64), out)
        assert np.array_equal(out, expected_rows(SEEDS[0], np.arange(4)))


def test_a_miss_the_stopped_service_leaves_unanswered_times_out_and_the_session_outlives_it(tables, served):
    socket, service = served
    ids = np.arange(100, 150, dtype=np.uint64)
    with engram_store.Store(tables=tables["layers"], node=socket, node_call_timeout=0.3) as client:
        out = np.empty((len(ids), client.record_bytes(0)), dtype=np.uint8)
        with stopped(service):
            start = time.monotonic()
            with pytest.raises(TimeoutError, match="did not answer within 300 ms") as raised:
                client.gather(0, ids, out)
            waited = time.monotonic() - start
        assert 0.29 <= waited < 10
        assert raised.value.code == "Deadline exceeded"
        assert raised.value.failed_positions == list(range(len(ids)))
        # No reconnection: the same session serves the rows once the service
        # runs (a busy machine may hold it past 300 ms a few times more).
        for _ in range(20):
            try:
                r = client.gather(0, ids, out)
                break
            except TimeoutError:
                continue
        # (The service read the rows for the expired request too: they may
        # be hits now.)
        assert r.hits + r.misses == len(ids)
        assert np.array_equal(out, expected_rows(SEEDS[0], ids))


def test_calls_that_wait_for_the_service_release_the_gil(tables, served):
    socket, service = served
    ids = np.arange(10, dtype=np.uint64)
    calls = {
        "stats": lambda c: c.stats(),
        "metrics_text": lambda c: c.metrics_text(),
        "wait_for_read_aheads": lambda c: c.wait_for_read_aheads(),
        "release_read_ahead": lambda c: c.release_read_ahead(0, ids),
    }
    with engram_store.Store(tables=tables["layers"], node=socket, node_call_timeout=0.3) as client:
        client.stats()
        windows = {}

        def run(name):
            start = time.monotonic()
            try:
                calls[name](client)
            except TimeoutError:
                # Only stats() has figures to say are missing; the waits
                # and the release return at the deadline.
                assert name == "stats", name
                timed_out.append(name)
            windows[name] = (start, time.monotonic())

        # Each call waits on its own thread while this one ticks, which it
        # can only do while no call holds the GIL.
        ticks = []
        timed_out = []
        with stopped(service):
            threads = [threading.Thread(target=run, args=(name,)) for name in calls]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                ticks.append(time.monotonic())
                time.sleep(0.005)
            for t in threads:
                t.join()
    assert windows.keys() == calls.keys()
    assert timed_out == ["stats"], "stats() of a stopped service must raise TimeoutError"
    for name, (start, end) in windows.items():
        assert end - start >= 0.29, name  # it did wait for the stopped service
        assert sum(start < t < end for t in ticks) >= 10, name


# Opens a private store (whose open logs at info: proof the log is captured),
# then a node client that gathers, reads ahead and asks for stats, and closes
# it between two markers on stderr.
QUIET_CLOSE = r"""
import json, sys
import numpy as np, engram_store
engram_store.set_log_level("debug")
tables = json.loads(sys.argv[2])
engram_store.Store(tables=tables, cache_bytes=1 << 20, io_backend="pread").close()
client = engram_store.Store(tables=tables, node=sys.argv[1], client_name="quiet")
out = np.empty((64, client.record_bytes(0)), dtype=np.uint8)
client.gather(0, np.arange(64, dtype=np.uint64), out)
client.read_ahead(1, np.arange(64, dtype=np.uint64))
client.wait_for_read_aheads()
client.stats()
sys.stderr.write("CLOSING\n")
sys.stderr.flush()
client.close()
sys.stderr.write("CLOSED\n")
sys.stderr.flush()
"""


def test_a_normal_close_of_a_client_logs_nothing_above_debug(tables, served):
    socket, _ = served
    r = run_python(QUIET_CLOSE, socket, json.dumps(tables["layers"]))
    assert r.returncode == 0, r.stderr
    opened, closing = r.stderr.split("CLOSING\n")
    assert re.search(r"\[engram_store\] \[info\] store: I/O backend", opened), opened
    assert "CLOSED\n" in closing
    levels = re.findall(r"\[engram_store\] \[(\w+)\]", closing)
    assert set(levels) <= {"trace", "debug"}, closing
