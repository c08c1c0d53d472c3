// The node protocol's messages: what each carries, and its encoding with
// WireWriter / WireReader (wire.h). A Decode function fails with
// InvalidArgument on any payload that is not exactly one well-formed message
// within its limits: the service disconnects a client that sends one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engram/status.h"
#include "engram/store.h"
#include "src/cache/shared_cache_geometry.h"
#include "src/node/wire.h"

namespace engram::node {

// Rows one gather or read-ahead message may carry: a client splits larger
// ones. 65,536 row IDs are 512 KiB; a gather's answer carries its rows, so
// a gather message carries at most RowsPerMessage(record) of them.
inline constexpr uint32_t kMaxRowsPerMessage = 1u << 16;
// The rows of one gather's answer: 16 MiB (65,536 rows of a V4.1 record of
// 264 B fit in 17 MiB, so those messages are bounded by the row count).
inline constexpr uint64_t kMaxAnswerRowBytes = uint64_t{16} << 20;
inline constexpr uint32_t RowsPerMessage(uint32_t record_bytes) {
  const uint64_t by_bytes = record_bytes == 0 ? kMaxRowsPerMessage : kMaxAnswerRowBytes / record_bytes;
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(kMaxRowsPerMessage, by_bytes)));
}
inline constexpr uint32_t kMaxTables = 4096;

struct HelloTable {
  std::string name;      // as the client's options name it (may be empty: the default)
  std::string path;      // the table file, or empty when given by manifest
  std::string manifest;  // the rank manifest, or empty
};
struct Hello {
  uint32_t protocol_version = kProtocolVersion;
  std::string client_name;
  int32_t rank = -1;
  std::vector<HelloTable> tables;
};

struct WelcomeTable {
  std::string name;
  std::string path;
  uint64_t row_count = 0;
  uint32_t record_bytes = 0;
  uint64_t cache_budget_bytes = 0;
  std::string metadata_json;
  cache::SharedCacheGeometry geometry{};
  uint64_t index_offset = 0;  // in the cache memory
  uint64_t slab_offset = 0;
};
struct Welcome {
  uint64_t service_pid = 0;
  uint64_t memory_bytes = 0;  // the cache memory's size (sent as a descriptor beside the message)
  std::string io_description;
  uint16_t metrics_port = 0;
  std::vector<WelcomeTable> tables;
};

// kGather, kReadAhead, kRelease.
struct RowsRequest {
  uint32_t table = 0;
  std::vector<uint64_t> row_ids;
};

// What a client counts of its own gathers, reported with its hits: the
// service's per-client metrics.
struct ClientCounters {
  uint64_t gathers = 0;
  uint64_t failed_gathers = 0;
  uint64_t rows = 0;
  uint64_t hits = 0;    // distinct rows served from the shared cache by the client
  uint64_t misses = 0;  // distinct rows sent to the service
  uint64_t wait_nanoseconds = 0;
  uint64_t cache_nanoseconds = 0;
  uint64_t disk_nanoseconds = 0;

  ClientCounters& operator+=(const ClientCounters& o) {
    gathers += o.gathers;
    failed_gathers += o.failed_gathers;
    rows += o.rows;
    hits += o.hits;
    misses += o.misses;
    wait_nanoseconds += o.wait_nanoseconds;
    cache_nanoseconds += o.cache_nanoseconds;
    disk_nanoseconds += o.disk_nanoseconds;
    return *this;
  }
};
inline constexpr uint64_t ClientCounters::*kClientCounterFields[] = {
    &ClientCounters::gathers,          &ClientCounters::failed_gathers,    &ClientCounters::rows,
    &ClientCounters::hits,             &ClientCounters::misses,            &ClientCounters::wait_nanoseconds,
    &ClientCounters::cache_nanoseconds, &ClientCounters::disk_nanoseconds,
};
static_assert(sizeof(ClientCounters) == sizeof(kClientCounterFields) / sizeof(kClientCounterFields[0]) * 8,
              "every counter is in kClientCounterFields");

struct HitsReport {
  uint32_t table = 0;
  std::vector<uint64_t> row_ids;  // rows the client served from the cache, for the policy
  ClientCounters counters;        // cumulative, all tables
};

std::vector<uint8_t> Encode(const Hello& m);
Result<Hello> DecodeHello(std::span<const uint8_t> payload);
std::vector<uint8_t> Encode(const Welcome& m);
Result<Welcome> DecodeWelcome(std::span<const uint8_t> payload);
std::vector<uint8_t> Encode(const RowsRequest& m);
Result<RowsRequest> DecodeRowsRequest(std::span<const uint8_t> payload);
std::vector<uint8_t> Encode(const HitsReport& m);
Result<HitsReport> DecodeHitsReport(std::span<const uint8_t> payload);
// kError: a status.
std::vector<uint8_t> EncodeStatus(const Status& s);
Status DecodeStatus(std::span<const uint8_t> payload);
// A gather's answer streams: each unit of its rows, as soon as the unit is
// read, is a kGatherPart (which rows, which of them failed, then their
// bytes), so a client copies rows while the rest are read and the service
// holds no whole answer; once every part is out, kGatherDone carries the
// result (its failed positions index the request's rows).
struct GatherPart {
  uint64_t first = 0;                 // the request's position of the part's first row
  uint32_t count = 0;                 // rows in the part
  std::vector<uint64_t> failed;       // positions in the part whose rows failed (their bytes are zeros)
  const uint8_t* rows = nullptr;      // count * record_bytes, in the payload
};
// The part's fields; its rows follow as the message's tail (OutgoingMessage's
// tail, so they are not copied into the writer).
void EncodeGatherPart(uint64_t first, uint32_t count, std::span<const uint64_t> failed, WireWriter* w);
// A part of a request of `request_rows` rows of record_bytes each.
Result<GatherPart> DecodeGatherPart(std::span<const uint8_t> payload, size_t request_rows, uint32_t record_bytes);
void EncodeGatherResult(const GatherResult& r, WireWriter* w);
// kGatherDone: the result of a request of n_rows rows.
Status DecodeGatherDone(std::span<const uint8_t> payload, size_t n_rows, GatherResult* out);
std::vector<uint8_t> Encode(const TableStats& s);
Result<TableStats> DecodeTableStats(std::span<const uint8_t> payload);
// A table index (kStats).
std::vector<uint8_t> EncodeU32(uint32_t v);
Result<uint32_t> DecodeU32(std::span<const uint8_t> payload);

// The checks a receiver makes of a decoded message before it acts on it.
//
// A request's row IDs: every one below row_count and, when `distinct` (a
// gather's rows), none twice; else OutOfRange / InvalidArgument naming the
// row and the table.
Status CheckRowIds(std::span<const uint64_t> ids, uint64_t row_count, bool distinct, const std::string& table);
// A welcome against the memory the client mapped (`mapped_bytes`): each
// table's records and cache rows the same size, its cache valid and inside
// the memory. Rows are copied with those sizes and at those offsets.
Status CheckWelcome(const Welcome& w, uint64_t mapped_bytes);


}  // namespace engram::node
