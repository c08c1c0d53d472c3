"""Python's faces of the statistics against the tables they come from.

The module exports the tables of engram/cache_stats.h and engram/counters.h
(CACHE_STATS, REFUSAL_REASONS, TABLE_COUNTERS, GATHER_RESULT_FIELDS). Each
test holds one face a Python user sees -- GatherResult's attributes, the
stats() dict, the Prometheus text -- against them, both ways: nothing in a
table is missing from the face, nothing in the face is outside the tables.
"""

import re

import numpy as np
import pytest

import engram_store
from engram_store import _engram_store as ext
from conftest import RECORD_BYTES

# stats() keys that describe the table rather than count anything.
DESCRIPTIVE_KEYS = {"index", "path", "row_count", "record_bytes", "cache_budget_bytes", "cache_hit_rate"}
# Families of the exposition that are not per-table statistics of the tables.
NOT_STATISTICS = {"engram_build_info", "engram_io_read_latency_seconds", "engram_row_cache_budget_bytes"}


@pytest.fixture
def busy_store(tables):
    """A store whose first table saw hits, misses, evictions, refusals,
    relocations and read-ahead (two rows still pinned)."""
    with engram_store.Store(tables=tables["layers"], cache_bytes=4 << 20, policy="legacy,sets=2,relocate=2",
                            io_backend="pread") as s:
        rng = np.random.default_rng(9)
        ids = np.empty(2000, dtype=np.uint64)
        out = np.empty((len(ids), RECORD_BYTES), dtype=np.uint8)
        for g in range(12):
            ids[:] = rng.integers(0, 12000 if g % 2 else 2000, size=len(ids))
            s.gather(0, ids, out)
        ahead = np.array([1, 2, 3, 11999], dtype=np.uint64)
        s.read_ahead(0, ahead)
        s.wait_for_read_aheads()
        s.release_read_ahead(0, ahead[:2])
        yield s


def stat_keys():
    keys = set()
    for name, _metric, kind in ext.CACHE_STATS:
        keys.add("cache_" + name)
        if kind == "by_reason":
            keys.update(f"cache_{name}_{reason}" for reason in ext.REFUSAL_REASONS)
    keys.update(name for name, _metric in ext.TABLE_COUNTERS)
    return keys


def families(text):
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def sample(text, series):
    m = re.search(r"^" + re.escape(series) + r" (\S+)$", text, re.M)
    assert m, f"{series} is not in the exposition"
    return float(m.group(1))


def test_the_exported_tables_hold_the_read_ahead_memory_and_refusal_statistics():
    cache = {name for name, _metric, _kind in ext.CACHE_STATS}
    assert {"relocations", "pinned_rows", "pinned_inserts", "pinned_refusals", "memory_bytes", "refusals"} <= cache
    assert set(ext.REFUSAL_REASONS) == {"lost_admission", "all_pinned"}
    assert {"hits", "misses", "refusals", "wait_nanoseconds"} <= set(ext.GATHER_RESULT_FIELDS)


def test_gather_result_has_every_field_of_the_table_and_no_other(store):
    ids = np.array([5, 17, 5, 900], dtype=np.uint64)
    out = np.empty((len(ids), RECORD_BYTES), dtype=np.uint8)
    r = store.gather(0, ids, out)
    public = {a for a in dir(r) if not a.startswith("_") and not callable(getattr(r, a))}
    assert public == set(ext.GATHER_RESULT_FIELDS)
    assert (r.rows, r.distinct_rows, r.misses) == (4, 3, 3)
    for name in ext.GATHER_RESULT_FIELDS:
        assert isinstance(getattr(r, name), int), name
        assert getattr(type(r), name).__doc__, f"{name} has no documentation"
    h = store.gather_async(0, ids, out).wait()
    assert {a for a in dir(h) if not a.startswith("_") and not callable(getattr(h, a))} == public


def test_stats_has_every_statistic_of_the_tables_and_no_other(busy_store):
    for table, stats in busy_store.stats().items():
        assert set(stats) - DESCRIPTIVE_KEYS == stat_keys(), table
        by_reason = sum(stats["cache_refusals_" + reason] for reason in ext.REFUSAL_REASONS)
        assert stats["cache_refusals"] == by_reason
    layer = busy_store.stats()["layer1"]
    assert layer["cache_relocations"] > 0
    assert layer["cache_refusals_lost_admission"] > 0
    assert layer["cache_pinned_rows"] == 2
    assert layer["cache_pinned_inserts"] >= 2
    assert layer["cache_memory_bytes"] > layer["cache_overhead_bytes"] > 0


def test_the_exposition_has_every_statistic_of_the_tables_with_the_stats_value(busy_store):
    text = busy_store.metrics_text()
    stats = busy_store.stats()["layer1"]
    exposed = families(text)
    expected = {}
    for name, metric, kind in ext.CACHE_STATS:
        expected[metric] = "gauge" if kind == "gauge" else "counter"
        if kind == "by_reason":
            for reason in ext.REFUSAL_REASONS:
                series = f'{metric}{{table="layer1",reason="{reason}"}}'
                assert sample(text, series) == stats[f"cache_{name}_{reason}"], series
        else:
            assert sample(text, f'{metric}{{table="layer1"}}') == stats["cache_" + name], metric
    for name, metric in ext.TABLE_COUNTERS:
        expected[metric] = "counter"
        value = sample(text, f'{metric}{{table="layer1"}}')
        if metric.endswith("_seconds_total"):
            assert value == pytest.approx(stats[name] * 1e-9, abs=1e-6), metric
        else:
            assert value == stats[name], metric
    for metric, kind in expected.items():
        assert exposed.get(metric) == kind, metric
    assert set(exposed) - set(expected) == NOT_STATISTICS
