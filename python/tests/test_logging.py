"""The store's log lines: stderr only, warning level by default in Python,
SPDLOG_LEVEL and engram_store.set_log_level choose the level."""

import json
import logging
import os

import pytest

import engram_store
from conftest import run_python

# Opens a Store, printing nothing itself; argv[2], if given, is passed to
# set_log_level first (as an int when it is one).
OPEN_A_STORE = r"""
import json, sys
import engram_store
if len(sys.argv) > 2:
    level = sys.argv[2]
    engram_store.set_log_level(int(level) if level.lstrip("-").isdigit() else level)
engram_store.Store(tables=json.loads(sys.argv[1]), cache_bytes=1 << 20, io_backend="pread").close()
"""

# An info line every Store open logs.
INFO_LINE = "store: I/O backend"


def open_a_store(tables, *level, spdlog_level=None):
    env = {k: v for k, v in os.environ.items() if k != "SPDLOG_LEVEL"}
    if spdlog_level is not None:
        env["SPDLOG_LEVEL"] = spdlog_level
    r = run_python(OPEN_A_STORE, json.dumps(tables["layers"]), *level, env=env)
    assert r.returncode == 0, r.stderr
    return r


def test_opening_a_store_prints_nothing_to_stdout(tables):
    for spdlog_level in (None, "info", "debug", "trace"):
        assert open_a_store(tables, spdlog_level=spdlog_level).stdout == ""


def test_the_default_level_in_python_is_warning(tables):
    assert INFO_LINE not in open_a_store(tables).stderr


def test_spdlog_level_chooses_the_level(tables):
    assert INFO_LINE in open_a_store(tables, spdlog_level="info").stderr
    assert INFO_LINE not in open_a_store(tables, spdlog_level="warn").stderr
    assert INFO_LINE not in open_a_store(tables, spdlog_level="off").stderr
    assert INFO_LINE in open_a_store(tables, spdlog_level="engram_store=debug").stderr


def test_set_log_level_chooses_the_level_by_name_or_logging_level(tables):
    assert INFO_LINE in open_a_store(tables, "info").stderr
    assert INFO_LINE in open_a_store(tables, str(logging.DEBUG)).stderr
    assert INFO_LINE not in open_a_store(tables, str(logging.WARNING)).stderr
    assert INFO_LINE not in open_a_store(tables, "error").stderr
    # An explicit call beats the environment.
    assert INFO_LINE not in open_a_store(tables, "off", spdlog_level="info").stderr
    assert INFO_LINE in open_a_store(tables, "INFO", spdlog_level="off").stderr


@pytest.fixture
def restore_log_level():
    before = engram_store.get_log_level()
    yield
    engram_store.set_log_level(before)


def test_set_log_level_maps_logging_levels_to_the_nearest_that_lets_them_through(restore_log_level):
    for level, name in [(logging.DEBUG, "debug"), (logging.INFO, "info"), (logging.WARNING, "warning"),
                        (logging.ERROR, "error"), (logging.CRITICAL, "critical"), (logging.NOTSET, "trace"),
                        (15, "info"), (25, "warning"), (60, "off"),
                        ("debug", "debug"), ("info", "info"), ("warning", "warning"), ("warn", "warning"),
                        ("error", "error"), ("off", "off"), ("Critical", "critical")]:
        engram_store.set_log_level(level)
        assert engram_store.get_log_level() == name, level


def test_set_log_level_refuses_what_is_not_a_level(restore_log_level):
    with pytest.raises(ValueError, match="unknown log level 'verbose'"):
        engram_store.set_log_level("verbose")
    with pytest.raises(ValueError, match="negative"):
        engram_store.set_log_level(-1)
    with pytest.raises(TypeError):
        engram_store.set_log_level(True)
    with pytest.raises(TypeError):
        engram_store.set_log_level(10.0)
