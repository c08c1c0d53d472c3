"""engram_store: Engram Store for Python serving runtimes.

A pybind11 binding of Engram Store's C++ API (include/engram/). One process
opens a ``Store`` over its Engram tables (one table per Engram layer) and, per
forward step, either gathers rows it has hashed itself or lets the store do the
whole step::

    import numpy as np, engram_store

    with engram_store.Store(tables=["layer1.engram", "layer14.engram"],
                            cache_bytes=8 << 30, token_map="token-map.u32") as store:
        rb = store.record_bytes(0)
        ids = np.array([5, 17, 5], dtype=np.uint64)
        out = np.empty((len(ids), rb), dtype=np.uint8)       # or a (pinned) torch uint8 tensor
        r = store.gather(0, ids, out)                        # GIL released; out written in place
        print(r.hits, r.misses, r.wait_nanoseconds)

        step = np.empty((len(tokens), 2, 24, rb), dtype=np.uint8)
        pending = store.stage_async(tokens, history, step)   # step k+1 stages while step k computes
        ...
        pending.wait()                                       # or: await pending

Buffers
    ``row_ids`` and ``tokens``: any integer array -- numpy, a torch CPU tensor,
    anything with the buffer protocol or ``__dlpack__`` -- in any layout; arrays
    that are not contiguous uint64/int64 are converted once (IDs are small next
    to the rows). Negative IDs are a ``ValueError``.

    ``out``: a caller-owned, writable, **C-contiguous** array (numpy, or a torch
    CPU tensor, pinned or not) of exactly the documented dtype and shape. Rows
    are written into it in place, never through a temporary. A non-contiguous,
    read-only, wrongly typed or wrongly shaped ``out`` is refused with a
    ``ValueError`` (it is never copied).

    The asynchronous forms keep ``row_ids`` and ``out`` alive until the work has
    completed; dropping a handle waits for its gather (and a float stage's
    dequantization into ``out``). Their ``out`` must be a numpy array (or
    another buffer-protocol object), not a torch tensor: holding a tensor does
    not pin its memory (``Tensor.resize_()`` reallocates it under the pending
    writes), so a tensor is a ``TypeError`` there. Allocate the buffer with
    numpy and view it as ``torch.from_numpy(buffer)``.

    Zero rows (or tokens) is a valid, empty gather or stage.

Threads
    Every call releases the GIL while the store works or waits (a node
    client's calls to its service included), so other Python threads run
    during a gather; any number of threads may use one Store.

Errors
    ``ValueError``: a bad argument (dtype, shape, size, read-only out, unknown
    table, a row ID past the end, a token outside the token map).
    ``TypeError``: an argument of the wrong kind (a table that is neither an
    index nor a name, ``layers`` given as a str, bools as tokens or row IDs).
    ``OSError``: the operating system failed a read (``FileNotFoundError`` for a
    missing file), or a node client's service is missing or gone.
    ``TimeoutError`` (a subclass of ``OSError``): a node client's service did
    not answer within its deadline. ``CorruptionError`` (a subclass of
    ``OSError``): a block failed its checksum. Each carries the store's status text as its message
    and its status code name as ``.code``; a failed gather's exception also has
    ``.failed_positions``, the positions of ``row_ids`` whose rows the output
    does not hold (their bytes are unspecified; every other row was written
    and verified).

Logging
    The store's log lines go to stderr, never stdout, at warning level unless
    the ``SPDLOG_LEVEL`` environment variable (spdlog's syntax, e.g. ``info``)
    says otherwise; ``set_log_level(level)`` changes the level at any time
    (a ``logging`` module level such as ``logging.INFO``, or a name: "debug",
    "info", "warning", "error", "critical", "off"), and ``get_log_level()``
    names it. They do not go through the ``logging`` module.

API
    ``Store(tables=None, *, cache_bytes=1 GiB, policy="default", io_backend="auto",
    metrics_listen=None, token_map=None, direct_io=True, completion_threads=2, io_rings=1,
    manifest=None, rank=None, hot_set=None, hot_set_interval=0.0, node=None, client_name=None,
    node_open_timeout=None, node_call_timeout=None)``
        A context manager; ``close()``. ``tables`` are table file paths; a table
        is then named by its index or its name (the file's stem). Every other
        argument is keyword-only (passed by position, a ``TypeError``).
        ``manifest=`` (a path, or a list of paths, one per layer) and
        ``rank=r``: open rank r's tables of layers converted by
        ``engram-convert --ranks R OUT.json``; each is checked to be that
        rank's file of its manifest (fingerprint, manifest_id, rank) and named
        by the manifest's ``name``. They come after ``tables`` (both may be
        given). ``rank`` is required with ``manifest`` and refused without.
        ``io_rings``: io_uring rings, each with its own thread, sharing the 128
        reads in flight; more than one for a drive faster than one ring thread
        (PCIe Gen4/5 NVMe), on a host with the cores for them.
        ``token_map`` (a token-map.u32 path or an integer array; None = raw token
        IDs) is used by ``stage``.
        ``hot_set`` (a path; None = off): warm start. The store saves each
        table's resident rows there at ``close()`` (and every
        ``hot_set_interval`` seconds; 0 = only at close), atomically, and at
        open reads them back into the caches in the background (open does not
        wait; ``wait_for_warm_up()`` does). A hot set of another table, policy
        or cache size, or a corrupt one, is ignored with one warning.
        ``node`` (a Unix socket path; None = off, a store of this process's
        own; ``""`` is a ``ValueError``): one store per node. The store is
        then a client of the ``engram-served`` serving that socket: it maps
        the service's row cache read-only and serves hits itself (no system
        call), and sends misses, read-aheads and stats to the service.
        ``tables``/``manifest``/``rank`` must be what the service serves.
        ``cache_bytes``, ``policy``, ``io_backend``, ``direct_io``,
        ``completion_threads``, ``io_rings``, ``metrics_listen``, ``hot_set``
        and ``hot_set_interval`` are the service's (``engram-served``'s
        options): a client leaves them out, and any value but the default is
        a ``ValueError`` naming the argument. ``client_name`` labels this
        client's series in the service's ``/metrics`` (default: the process
        ID; at most 128 bytes of UTF-8, no control characters). If the
        service is missing, gone or restarting, calls raise ``OSError`` (the
        store reconnects by itself once it is back).
        ``node_open_timeout`` (seconds; None = 5) bounds opening the client,
        ``node_call_timeout`` (seconds; None = 30) each call that waits for
        the service (a gather's misses, a read-ahead release, the waits,
        stats, metrics); each is in (0, 3600]. A service that does not answer
        in time (stopped, wedged) makes the open or a gather raise
        ``TimeoutError`` (a gather's ``.failed_positions``: the rows it
        missed, which the service owed). The client keeps its session: once the service
        answers again, so does the store. Calls that raise nothing return at
        the deadline (``stats()`` and ``metrics_text()`` then without the
        service's figures).
    ``record_bytes(table)``, ``row_count(table)``, ``stats()`` (a dict per table
    name: every counter of engram/counters.h, and ``cache_<name>`` for every
    statistic of engram/cache_stats.h, refusals also per reason as
    ``cache_refusals_<reason>``), ``metrics_text()`` (Prometheus text),
    ``metadata_json(table)``.
    ``gather(table, row_ids, out) -> GatherResult`` with ``out`` uint8
    ``[len(row_ids), record_bytes]``.
    ``gather_async(table, row_ids, out) -> GatherHandle``: ``wait()`` (GIL
    released) or ``await handle``.
    ``prefetch(table, row_ids)`` (alias ``read_ahead``): disk read-ahead; the rows
    are pinned in the cache until a gather uses them or
    ``release_read_ahead(table, row_ids)``. ``wait_for_read_aheads()``.
    ``wait_for_cache_memory()``: blocks (GIL released) until the cache memory
    committed in the background after opening is in place, so that the first
    gathers do not run beside that commit; gathers never need it.
    ``wait_for_warm_up()``: blocks (GIL released) until the warm start
    (``hot_set``) has read back the saved rows; gathers never need it.
    ``stage(tokens, history, out, *, layers=None) -> StageResult`` and
    ``stage_async(...) -> StageHandle`` (returns at once: the step is hashed
    and gathered on the store's staging thread, steps in issue order): hashes
    the step's ``tokens`` (after
    ``history``, the request's earlier tokens) with every layer's hash layout
    (embedded in each table), dedups across the step and gathers into ``out``
    laid out ``[tokens, layers, rows_per_token, record_bytes]`` (uint8, raw
    records; the default) or ``[tokens, layers, rows_per_token, values]``
    (float16 or float32: fp8 e4m3 weights times their ue8m0 scales, for a
    table whose records are such). ``layers``: table indexes or names (default:
    every table, in order). Layers are gathered in that order, and a
    ``StageHandle`` answers per layer: ``ready(layer)`` (never blocks) and
    ``wait(layer) -> StageLayerResult`` (GIL released; returns once that
    layer's rows are in ``out``, or raises its failure), so a runtime can run
    layer 0 while later layers are still read. ``wait()`` waits for all;
    ``StageResult.layers`` holds each layer's result, whose
    ``wait_nanoseconds`` runs from the start of the stage to that layer's
    readiness.
        A rank's store (``Store(manifest=..., rank=r)``: rank tables written
        by ``engram-convert --ranks R``) hashes, caches and reads only the
        rank's slots, and ``out`` is ``[tokens, layers, len(slots_of_rank),
        record]`` (``stage_rows_per_token()`` slots); an ``out`` shaped for
        another rank is a ``ValueError`` naming both shapes. ``out[:, :, j]``
        is slot ``slots_of_rank[j]`` (ascending; the manifest's
        ``rank_files[r]["slots"]``). After an all-gather of every rank's
        ``out``, the model's ``[tokens, layers, 24, record]`` is::

            full[:, :, s] = part[slot_to_rank[s]][:, :, slot_index_in_rank[s]]

        with the manifest's ``slot_to_rank`` and ``slot_index_in_rank`` (for
        the strided assignment, ``s % R`` and ``s // R``);
        examples/serve_ranks.py does it with ``torch.distributed``.
    ``Hasher(layout_path, layer=0, token_map=None, slots=None).row_ids(tokens, history=None)``
        The row IDs of ``engram-hash --layer``: uint64 ``[len(tokens),
        rows_per_token]`` (24 for V4.1). ``slots``: a rank's slots (ascending
        ``order_index * heads + head``, e.g. ``strided_rank_slots(R, r)``);
        the IDs are then ``[len(tokens), len(slots)]`` into that rank's table
        (its slots' rows packed in slot order): the full ID minus the slot's
        full-table offset plus the sum of the primes of the rank's earlier
        slots. ``table_rows``: the rows those IDs index.
    ``strided_rank_slots(ranks, rank, slot_count=24)``: the slots ``s`` with
    ``s % ranks == rank``, ascending (what a rank table of ``engram-convert
    --ranks`` holds).
"""

import asyncio as _asyncio
import numbers as _numbers
import os as _os

from ._engram_store import (  # noqa: F401
    CorruptionError,
    GatherHandle,
    GatherResult,
    StageHandle,
    StageLayerResult,
    StageResult,
    StepRing,
    _cxx_gather_seconds,
    strided_rank_slots,
    _cxx_hash_gather_seconds,
)
from ._engram_store import Hasher as _Hasher
from ._engram_store import Store as _Store
from ._engram_store import _log_level, _set_log_level

__all__ = [
    "CorruptionError",
    "GatherHandle",
    "GatherResult",
    "Hasher",
    "StageHandle",
    "StageLayerResult",
    "StageResult",
    "StepRing",
    "Store",
    "get_log_level",
    "set_log_level",
    "strided_rank_slots",
]

# spdlog's level names by the lowest logging-module level each lets through
# (spdlog's trace is below logging.DEBUG).
_SPDLOG_LEVELS = ((5, "trace"), (10, "debug"), (20, "info"), (30, "warning"), (40, "error"), (50, "critical"))
_LEVEL_NAMES = {name for _, name in _SPDLOG_LEVELS} | {"warn", "off"}


def set_log_level(level):
    """Sets which of the store's log lines (on stderr) are written.

    ``level``: a ``logging`` module level (``logging.DEBUG``, ``logging.INFO``,
    ``logging.WARNING``, ``logging.ERROR``, ``logging.CRITICAL``; a line is
    written if its level is at least ``level``) or a name: "trace", "debug",
    "info", "warning" (or "warn"), "error", "critical", "off".
    """
    if isinstance(level, bool) or not isinstance(level, (int, str)):
        raise TypeError(f"log level must be a logging level (int) or a name (str), not {type(level).__name__}")
    if isinstance(level, str):
        name = level.lower()
        if name not in _LEVEL_NAMES:
            raise ValueError(f"unknown log level {level!r} ({', '.join(sorted(_LEVEL_NAMES))})")
    elif level < 0:
        raise ValueError(f"log level {level} is negative")
    else:
        name = next((n for threshold, n in _SPDLOG_LEVELS if level <= threshold), "off")
    _set_log_level(name)


def get_log_level():
    """The current level's name: "trace", "debug", "info", "warning", "error", "critical" or "off"."""
    return _log_level()


def _path_or_array(value):
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        return _os.fsdecode(value)
    return value


def _rank_arguments(manifest, rank):
    """Store's manifest= (a path or a list of paths, one per layer) and rank= (an int, required with manifests)."""
    if manifest is None:
        manifests = []
    elif isinstance(manifest, (str, bytes)) or hasattr(manifest, "__fspath__"):
        manifests = [_os.fsdecode(manifest)]
    else:
        manifests = [_os.fsdecode(m) for m in manifest]
    if rank is None:
        if manifests:
            raise ValueError("manifest= needs rank=: the rank (0..R-1) whose rank tables to open")
        return manifests, -1
    if isinstance(rank, bool) or not hasattr(rank, "__index__"):
        raise TypeError(f"rank must be an integer, not {type(rank).__name__}")
    rank = rank.__index__()
    if not manifests:
        raise ValueError(f"rank={rank} given without manifest=: a rank opens rank tables by their manifests")
    if not 0 <= rank < 2**31:
        raise ValueError(f"rank {rank} is negative or too large")
    return manifests, rank


def _seconds(argument, value):
    """A deadline in seconds: None, or a real number (not a bool); its range is checked by the binding."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, _numbers.Real):
        raise TypeError(f"{argument}= must be a number of seconds, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{argument}= must be a number of seconds in (0, 3600], got {value!r}") from None


class Store(_Store):
    __doc__ = _Store.__doc__

    def __init__(self, tables=None, *, cache_bytes=1 << 30, policy="default", io_backend="auto", metrics_listen=None,
                 token_map=None, direct_io=True, completion_threads=2, io_rings=1, manifest=None, rank=None,
                 hot_set=None, hot_set_interval=0.0, node=None, client_name=None, node_open_timeout=None,
                 node_call_timeout=None):
        if isinstance(tables, (str, bytes)) or hasattr(tables, "__fspath__"):
            raise ValueError("tables must be a list of table paths")
        manifests, rank = _rank_arguments(manifest, rank)
        super().__init__([_os.fsdecode(t) for t in (tables or [])], cache_bytes=cache_bytes, policy=policy,
                         io_backend=io_backend, metrics_listen=metrics_listen, token_map=_path_or_array(token_map),
                         direct_io=direct_io, completion_threads=completion_threads, io_rings=io_rings,
                         manifests=manifests, rank=rank,
                         hot_set=None if hot_set is None else _os.fsdecode(hot_set), hot_set_interval=hot_set_interval,
                         node=None if node is None else _os.fsdecode(node),
                         client_name=None if client_name is None else str(client_name),
                         node_open_timeout=_seconds("node_open_timeout", node_open_timeout),
                         node_call_timeout=_seconds("node_call_timeout", node_call_timeout))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _slot(value):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"slots must be integers, not {type(value).__name__}")
    value = value.__index__()
    if value < 0:
        raise ValueError(f"slot {value} is negative")
    return value


class Hasher(_Hasher):
    __doc__ = _Hasher.__doc__

    def __init__(self, layout_path, layer=0, token_map=None, slots=None):
        super().__init__(_os.fsdecode(layout_path), layer, _path_or_array(token_map),
                         [] if slots is None else [_slot(s) for s in slots])


def _await(handle):
    """``await handle``: resumes when the store has finished, without a thread."""
    fd = handle._completion_fd()
    if fd >= 0:
        loop = _asyncio.get_running_loop()
        future = loop.create_future()

        def ready():
            if not future.done():
                future.set_result(None)

        loop.add_reader(fd, ready)
        try:
            yield from future.__await__()
        finally:
            loop.remove_reader(fd)
    return handle.wait()


GatherHandle.__await__ = _await
StageHandle.__await__ = _await
