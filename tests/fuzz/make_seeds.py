#!/usr/bin/env python3
"""Writes the seed corpora tests/fuzz/corpus/<target>/ (small, deterministic).

Each seed follows its harness's input convention (see the comment at the top
of tests/fuzz/<target>.cc): usually one control byte, then the bytes.
Run from anywhere: python3 tests/fuzz/make_seeds.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- table_file_fuzzer: ctrl, 256-byte header, metadata -------------------
def table_header(record_bytes, rows, salt=0x1234):
    rpb = 4088 // record_bytes
    blocks = (rows + rpb - 1) // rpb
    h = bytearray(256)
    h[0:8] = b"ENGRAMTB"
    struct.pack_into("<IIIII", h, 8, 1, 4096, record_bytes, rpb, 0)
    struct.pack_into("<QQQQQ", h, 32, rows, blocks, 4096, blocks * 4096, 4096 + blocks * 4096)
    struct.pack_into("<Q", h, 96, salt)
    return bytes(h)  # metadata size/hash, file_bytes and header checksum: fixed by the harness (ctrl 7)


meta = json.dumps({"generator": {"kind": "engram-gen", "seed": 7}, "record_bytes": 264}).encode()
write("table_file_fuzzer", "gen-1000-rows", b"\x07" + table_header(264, 1000) + meta)
write("table_file_fuzzer", "one-row-4088", b"\x07" + table_header(4088, 1) + b"{}")
write("table_file_fuzzer", "zero-rows", b"\x07" + table_header(1, 0) + b'{"a":1}')
write("table_file_fuzzer", "raw-no-fixups", b"\x00" + table_header(264, 15) + meta)
with open(os.path.join(FIXTURES, "engram-hash", "layout-v41.json")) as f:
    doc = json.load(f)
layer = dict(doc["layers"][0])
for k, v in doc.items():
    if k not in ("layers", "format") and k not in layer:
        layer[k] = v
layer["layout_file_format"] = doc["format"]
small = {k: layer[k] for k in ("layer_id", "orders", "heads", "pad_id", "multipliers", "primes", "offsets", "total_rows")}
write("table_file_fuzzer", "v41-layer1-layout",
      b"\x07" + table_header(264, layer["total_rows"]) + json.dumps({"hash_layout": small}).encode())
# Rank 1 of 5 of that layer (engram-convert --ranks 5): its slots' rows, the full layout.
heads = small["heads"]
slots = [s for s in range(len(small["orders"]) * heads) if s % 5 == 1]
rank_rows = sum(small["primes"][s // heads][s % heads] for s in slots)
shard = {"ranks": 5, "rank": 1, "slots": slots, "assignment": "strided", "manifest_id": "0x00000000cafef00d",
         "source_rows": small["total_rows"]}
write("table_file_fuzzer", "v41-layer1-rank1-of-5",
      b"\x07" + table_header(264, rank_rows) + json.dumps({"hash_layout": small, "rank_shard": shard}).encode())

# --- safetensors_header_fuzzer: ctrl (bit 0: fix length; >>1: KiB of data) --
def safetensors(header, data_kib):
    j = json.dumps(header, separators=(",", ":")).encode()
    return bytes([1 | (data_kib << 1)]) + struct.pack("<Q", len(j)) + j


write("safetensors_header_fuzzer", "weight-scale", safetensors({
    "engram.w": {"dtype": "F8_E4M3", "shape": [4, 256], "data_offsets": [0, 1024]},
    "engram.s": {"dtype": "U8", "shape": [4, 8], "data_offsets": [1024, 1056]}}, 2))
write("safetensors_header_fuzzer", "metadata-bf16", safetensors({
    "__metadata__": {"format": "pt"},
    "a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
    "b": {"dtype": "F32", "shape": [], "data_offsets": [12, 16]},
    "c": {"dtype": "I64", "shape": [0, 5], "data_offsets": [16, 16]}}, 1))
write("safetensors_header_fuzzer", "empty", safetensors({}, 0))

# --- npy_header_fuzzer: ctrl (bit 0: fix length; >>1: KiB of data) -------
def npy(descr, shape, data_kib, version=1, fortran=False):
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", shape)
    pre = 10 if version == 1 else 12
    pad = (-(pre + len(d) + 1)) % 64
    d = (d + " " * pad + "\n").encode()
    length = struct.pack("<H", len(d)) if version == 1 else struct.pack("<I", len(d))
    return bytes([1 | (data_kib << 1)]) + b"\x93NUMPY" + bytes([version, 0]) + length + d


write("npy_header_fuzzer", "u1-4x256", npy("|u1", "(4, 256)", 1))
write("npy_header_fuzzer", "f4-2x128", npy("<f4", "(2, 128)", 1))
write("npy_header_fuzzer", "v2-f2", npy("<f2", "(512,)", 1, version=2))
write("npy_header_fuzzer", "void264-0", npy("|V264", "(0, 1)", 0))
write("npy_header_fuzzer", "fortran", npy("<f4", "(16, 16)", 1, fortran=True))
write("npy_header_fuzzer", "big-endian", npy(">f4", "(256,)", 1))

# --- hash_layout_fuzzer: ctrl (layer index, validation row count), JSON -----
with open(os.path.join(FIXTURES, "engram-hash", "layout-v41.json"), "rb") as f:
    v41 = f.read()
write("hash_layout_fuzzer", "v41-doc-layer0", b"\x01" + v41)
write("hash_layout_fuzzer", "v41-doc-layer1", b"\x02" + v41)
write("hash_layout_fuzzer", "v41-layer1-object", b"\x00" + json.dumps(small).encode())
tiny = {"layer_id": 0, "orders": [2, 3], "heads": 2, "pad_id": 0, "multipliers": ["1", "3", "5"],
        "primes": [[2, 3], [5, 7]], "offsets": [[0, 2], [5, 10]], "total_rows": 17}
write("hash_layout_fuzzer", "tiny", b"\x00" + json.dumps(tiny).encode())
write("hash_layout_fuzzer", "tiny-int-multipliers", b"\x80" + json.dumps(dict(tiny, multipliers=[1, 3, 5])).encode())

# --- trace_files_fuzzer: ctrl (bit 0: use the bytes as a token map), bytes --
write("trace_files_fuzzer", "row-trace", b"\x00" + b"1\n2\n3\n18446744073709551615\n0")
write("trace_files_fuzzer", "row-trace-crlf", b"\x00" + b"7\r\n8\r\n")
write("trace_files_fuzzer", "request-chunks", b"\x00" + b"a@4\n" + struct.pack("<12I", *range(12)))
write("trace_files_fuzzer", "request-equal", b"\x01" + b"r@x3" + struct.pack("<8I", 5, 1, 0, 3, 2, 4, 9, 1))
write("trace_files_fuzzer", "request-plain", b"\x00" + b"file" + struct.pack("<3I", 1, 2, 3))
req = os.path.join(FIXTURES, "traces", "deepspeed")
for name in sorted(os.listdir(req))[:1]:
    with open(os.path.join(req, name), "rb") as f:
        write("trace_files_fuzzer", "fixture-" + name, b"\x00" + b"q@x2" + f.read(256))

# --- http_request_fuzzer: raw bytes --------------------------------------
H = "http_request_fuzzer"
write(H, "get-metrics", b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nAccept: */*\r\n\r\n")
write(H, "head-healthz", b"HEAD /healthz HTTP/1.0\r\n\r\n")
write(H, "get-query", b"GET /metrics?name[]=x HTTP/1.1\r\nConnection: close\r\n\r\n")
write(H, "post-body", b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
write(H, "chunked", b"GET /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
write(H, "listen-v4", b"127.0.0.1:9464")
write(H, "listen-v6", b"[::1]:0")

# --- reference_table_fuzzer: ctrl (bit 0: also open as a file), record_bytes
# LE16, row_count LE32, block_count LE32, metadata JSON ----------------------
import json as _json


def reference(ctrl, shards, weight=256, scale=8):
    fields = [{"name": "weight", "dtype": "F8_E4M3", "offset": 0, "bytes": weight, "row_shape": [weight]}]
    if scale:
        fields.append({"name": "scale", "dtype": "F8_E8M0", "offset": weight, "bytes": scale, "row_shape": [scale]})
    entries, rows, units = [], 0, 0

    def span(off, n):
        return 0 if n == 0 else (off + n - 1) // 4096 - off // 4096 + 1
    for i, (n, woff) in enumerate(shards):
        soff = woff + n * weight + 4
        e = {"file": "s%d.safetensors" % i, "size": soff + n * scale + 100, "mtime_ns": 1700000000000000000 + i,
             "fingerprint": "0x%016x" % (0x1234 + i), "rows": n, "weight_tensor": "engram.w",
             "weight_offset": woff}
        units += span(woff, n * weight)
        if scale:
            e["scale_offset"] = soff
            units += span(soff, n * scale)
        entries.append(e)
        rows += n
    meta = {"format": "engram-reference/1", "record": {"bytes": weight + scale, "fields": fields}, "rows": rows,
            "source": {"kind": "safetensors", "in_place": True, "shards": entries}}
    text = _json.dumps(meta, separators=(",", ":")).encode()
    return struct.pack("<BHII", ctrl, weight + scale, rows, units) + text


R = "reference_table_fuzzer"
write(R, "v41-three-shards", reference(1, [(700, 197), (1, 100), (950, 8)]))
write(R, "no-scale", reference(0, [(40, 3)], weight=64, scale=0))
write(R, "aligned", reference(1, [(16, 4096)]))


# --- rank_manifest_fuzzer: a manifest's JSON ---------------------------------
def rank_manifest(ranks, primes):
    """A manifest of a 2-order, 2-head layer split over `ranks` ranks, as engram-convert --ranks writes it."""
    flat = [p for row in primes for p in row]
    offsets, total = [], 0
    for row in primes:
        offsets.append([])
        for p in row:
            offsets[-1].append(total)
            total += p
    layout = {"layer_id": 1, "orders": [2, 3], "heads": 2, "pad_id": 0,
              "multipliers": ["1000003", "1000033", "1000037"], "primes": primes, "offsets": offsets,
              "total_rows": total}
    files = []
    for r in range(ranks):
        slots = [s for s in range(4) if s % ranks == r]
        files.append({"rank": r, "file": "m.rank%d-of-%d.engram" % (r, ranks), "fingerprint": "0x%016x" % (0xabc0 + r),
                      "slots": slots, "rows": sum(flat[s] for s in slots)})
    m = {"format": "engram-rank-manifest/1", "manifest_id": "0x00000000cafef00d", "name": "m", "ranks": ranks,
         "slot_count": 4, "assignment": "strided", "slot_to_rank": [s % ranks for s in range(4)],
         "slot_index_in_rank": [s // ranks for s in range(4)], "source_rows": total, "record_bytes": 264,
         "hash_layout": layout, "rank_files": files}
    return _json.dumps(m).encode()


M = "rank_manifest_fuzzer"
write(M, "two-ranks", rank_manifest(2, [[1249, 1259], [1277, 1279]]))
write(M, "three-ranks", rank_manifest(3, [[11, 13], [17, 19]]))


# --- node_message_fuzzer: ctrl (kind = ctrl % 7), then the payload ---------
def string(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def u64s(values):
    return struct.pack("<I", len(values)) + b"".join(struct.pack("<Q", v) for v in values)


N = "node_message_fuzzer"
hello = struct.pack("<I", 1) + string("rank3") + struct.pack("<iI", -1, 2)
hello += string("") + string("/data/layer1.engram") + string("")
hello += string("l14") + string("") + string("/data/l14.json")
write(N, "hello", bytes([0]) + hello)
write(N, "gather", bytes([2]) + struct.pack("<I", 1) + u64s([5, 9, 1 << 40]))
write(N, "hits", bytes([3]) + struct.pack("<I", 0) + u64s([1, 2, 3]) + bytes(64))
write(N, "error", bytes([5]) + struct.pack("<I", 10) + string("engram-served is shutting down"))
# A gather's answer to a request of 2 rows (control >> 3) of 8 bytes; control
# 20: kind 20 % 7 = 6. Its end, one row failed; and a part of both rows, the
# second failed.
fields = 12  # ENGRAM_GATHER_RESULT's fields
done = struct.pack("<I", 0) + string("") + bytes(8 * fields) + u64s([1])
write(N, "gather-done", bytes([20]) + done)
write(N, "gather-part", bytes([20]) + struct.pack("<QI", 0, 2) + u64s([1]) + bytes(16))
# The receiver's checks (control 0xf0..0xf3): a client name, a byte stream
# as the service frames it, a welcome against its memory, row IDs against a
# table.
write(N, "name-utf8", bytes([0xF0]) + "rank-3 \u03bb".encode())
write(N, "name-not-utf8", bytes([0xF0]) + b"rank\xff\xfe")
write(N, "name-control", bytes([0xF0]) + b"line\nbreak")
magic = 0x4D524745
def frame(kind, payload, claimed=None):
    n = len(payload) if claimed is None else claimed
    return struct.pack("<IHHQII", magic, kind, 0, 1, n, 0) + payload
write(N, "stream", bytes([0xF1]) + frame(1, hello) + frame(4, struct.pack("<I", 0) + u64s([1, 2])))
write(N, "stream-oversized", bytes([0xF1]) + frame(1, b"", claimed=1 << 20))
geometry = struct.pack("<IIQQIIIIQQ", 0x33435345, 4, 1, 0, 1, 264, 0, 0, 128, 4 * 264)
welcome = struct.pack("<QQ", 1234, 4 << 20) + string("io_uring") + struct.pack("<II", 0, 1)
welcome += string("t") + string("/data/t.engram") + struct.pack("<QIQ", 1000, 264, 1 << 20) + string("{}")
welcome += geometry + struct.pack("<QQ", 0, 2 << 20)
write(N, "welcome-checked", bytes([0xF2]) + struct.pack("<Q", 4 << 20) + welcome)
write(N, "rows-twice", bytes([0xF3]) + struct.pack("<Q", 1001) + struct.pack("<I", 0) + u64s([5, 9, 5]))
write(N, "rows-past-end", bytes([0xF3]) + struct.pack("<Q", 100) + struct.pack("<I", 0) + u64s([5, 1 << 62]))
