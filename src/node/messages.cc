#include "src/node/messages.h"

#include <algorithm>
#include <type_traits>

namespace engram::node {
namespace {

Status Malformed(const char* what) {
  return Status::InvalidArgument(std::string("node protocol: a malformed ") + what + " message");
}

static_assert(std::is_trivially_copyable_v<cache::SharedCacheGeometry>);
static_assert(std::is_trivially_copyable_v<RowCacheStats>);
static_assert(std::is_trivially_copyable_v<ClientCounters>);

constexpr StatusCode kLastStatusCode = StatusCode::kDeadlineExceeded;

}  // namespace

std::vector<uint8_t> Encode(const Hello& m) {
  WireWriter w;
  w.U32(m.protocol_version);
  w.Str(m.client_name);
  w.I32(m.rank);
  w.U32(static_cast<uint32_t>(m.tables.size()));
  for (const HelloTable& t : m.tables) {
    w.Str(t.name);
    w.Str(t.path);
    w.Str(t.manifest);
  }
  return std::move(w.bytes());
}

Result<Hello> DecodeHello(std::span<const uint8_t> payload) {
  WireReader r(payload);
  Hello m;
  m.protocol_version = r.U32();
  if (!r.failed() && m.protocol_version != kProtocolVersion) {
    return Status::InvalidArgument("node protocol: the client speaks version " +
                                   std::to_string(m.protocol_version) + ", this service " +
                                   std::to_string(kProtocolVersion) + " (client and service of different builds)");
  }
  m.client_name = r.Str(4096);
  m.rank = r.I32();
  const uint32_t n = r.U32();
  if (n > kMaxTables) return Malformed("hello");
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    HelloTable t;
    t.name = r.Str(4096);
    t.path = r.Str(4096);
    t.manifest = r.Str(4096);
    m.tables.push_back(std::move(t));
  }
  if (!r.Done()) return Malformed("hello");
  return m;
}

std::vector<uint8_t> Encode(const Welcome& m) {
  WireWriter w;
  w.U64(m.service_pid);
  w.U64(m.memory_bytes);
  w.Str(m.io_description);
  w.U32(m.metrics_port);
  w.U32(static_cast<uint32_t>(m.tables.size()));
  for (const WelcomeTable& t : m.tables) {
    w.Str(t.name);
    w.Str(t.path);
    w.U64(t.row_count);
    w.U32(t.record_bytes);
    w.U64(t.cache_budget_bytes);
    w.Str(t.metadata_json);
    w.Raw(&t.geometry, sizeof(t.geometry));
    w.U64(t.index_offset);
    w.U64(t.slab_offset);
  }
  return std::move(w.bytes());
}

Result<Welcome> DecodeWelcome(std::span<const uint8_t> payload) {
  WireReader r(payload);
  Welcome m;
  m.service_pid = r.U64();
  m.memory_bytes = r.U64();
  m.io_description = r.Str();
  const uint32_t port = r.U32();
  if (port > 0xffff) return Malformed("welcome");
  m.metrics_port = static_cast<uint16_t>(port);
  const uint32_t n = r.U32();
  if (n > kMaxTables) return Malformed("welcome");
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    WelcomeTable t;
    t.name = r.Str(4096);
    t.path = r.Str(4096);
    t.row_count = r.U64();
    t.record_bytes = r.U32();
    t.cache_budget_bytes = r.U64();
    t.metadata_json = r.Str(16u << 20);
    if (const uint8_t* g = r.Raw(sizeof(t.geometry))) std::memcpy(&t.geometry, g, sizeof(t.geometry));
    t.index_offset = r.U64();
    t.slab_offset = r.U64();
    m.tables.push_back(std::move(t));
  }
  if (!r.Done()) return Malformed("welcome");
  return m;
}

std::vector<uint8_t> Encode(const RowsRequest& m) {
  WireWriter w;
  w.U32(m.table);
  w.U64s(m.row_ids);
  return std::move(w.bytes());
}

Result<RowsRequest> DecodeRowsRequest(std::span<const uint8_t> payload) {
  WireReader r(payload);
  RowsRequest m;
  m.table = r.U32();
  m.row_ids = r.U64s(kMaxRowsPerMessage);
  if (!r.Done()) {
    return Status::InvalidArgument("node protocol: a malformed row request (at most " +
                                   std::to_string(kMaxRowsPerMessage) + " rows per message)");
  }
  return m;
}

std::vector<uint8_t> Encode(const HitsReport& m) {
  WireWriter w;
  w.U32(m.table);
  w.U64s(m.row_ids);
  w.Raw(&m.counters, sizeof(m.counters));
  return std::move(w.bytes());
}

Result<HitsReport> DecodeHitsReport(std::span<const uint8_t> payload) {
  WireReader r(payload);
  HitsReport m;
  m.table = r.U32();
  m.row_ids = r.U64s(kMaxRowsPerMessage);
  if (const uint8_t* c = r.Raw(sizeof(m.counters))) std::memcpy(&m.counters, c, sizeof(m.counters));
  if (!r.Done()) return Malformed("hits");
  return m;
}

std::vector<uint8_t> EncodeStatus(const Status& s) {
  WireWriter w;
  w.U32(static_cast<uint32_t>(s.code()));
  w.Str(s.message());
  return std::move(w.bytes());
}

Status DecodeStatus(std::span<const uint8_t> payload) {
  WireReader r(payload);
  const uint32_t code = r.U32();
  std::string message = r.Str();
  if (!r.Done() || code == 0 || code > static_cast<uint32_t>(kLastStatusCode)) {
    return Status::Internal("node protocol: a malformed error message from the service");
  }
  return Status(static_cast<StatusCode>(code), std::move(message));
}

void EncodeGatherResult(const GatherResult& r, WireWriter* w) {
  w->U32(static_cast<uint32_t>(r.status.code()));
  w->Str(r.status.message());
  for (const GatherResultFieldInfo& f : kGatherResultFields) w->U64(r.*f.member);
  std::vector<uint64_t> failed(r.failed_positions.begin(), r.failed_positions.end());
  w->U64s(failed);
}

Status DecodeGatherDone(std::span<const uint8_t> payload, size_t n_rows, GatherResult* out) {
  WireReader r(payload);
  const uint32_t code = r.U32();
  std::string message = r.Str();
  for (const GatherResultFieldInfo& f : kGatherResultFields) out->*f.member = r.U64();
  std::vector<uint64_t> failed = r.U64s(kMaxRowsPerMessage);
  if (!r.Done() || code > static_cast<uint32_t>(kLastStatusCode)) return Malformed("gather result");
  for (uint64_t p : failed) {
    if (p >= n_rows) return Malformed("gather result");
  }
  out->status = code == 0 ? Status::OK() : Status(static_cast<StatusCode>(code), std::move(message));
  out->failed_positions.assign(failed.begin(), failed.end());
  return Status::OK();
}

void EncodeGatherPart(uint64_t first, uint32_t count, std::span<const uint64_t> failed, WireWriter* w) {
  w->U64(first);
  w->U32(count);
  w->U64s(failed);
}

Result<GatherPart> DecodeGatherPart(std::span<const uint8_t> payload, size_t request_rows, uint32_t record_bytes) {
  WireReader r(payload);
  GatherPart part;
  part.first = r.U64();
  part.count = r.U32();
  part.failed = r.U64s(kMaxRowsPerMessage);
  if (r.failed() || part.first > request_rows || part.count > request_rows - part.first) {
    return Malformed("gather part");
  }
  part.rows = r.Raw(size_t{part.count} * record_bytes);
  if (!r.Done()) return Malformed("gather part");
  for (uint64_t p : part.failed) {
    if (p >= part.count) return Malformed("gather part");
  }
  return part;
}

std::vector<uint8_t> Encode(const TableStats& s) {
  WireWriter w;
  w.Str(s.name);
  w.Str(s.path);
  w.U64(s.row_count);
  w.U32(s.record_bytes);
  w.U64(s.cache_budget_bytes);
  w.Raw(&s.cache, sizeof(s.cache));
  for (const TableCounterInfo& c : kTableCounters) w.U64(s.*c.member);
  return std::move(w.bytes());
}

Result<TableStats> DecodeTableStats(std::span<const uint8_t> payload) {
  WireReader r(payload);
  TableStats s;
  s.name = r.Str(4096);
  s.path = r.Str(4096);
  s.row_count = r.U64();
  s.record_bytes = r.U32();
  s.cache_budget_bytes = r.U64();
  if (const uint8_t* c = r.Raw(sizeof(s.cache))) std::memcpy(&s.cache, c, sizeof(s.cache));
  for (const TableCounterInfo& c : kTableCounters) s.*c.member = r.U64();
  if (!r.Done()) return Malformed("stats");
  return s;
}

std::vector<uint8_t> EncodeU32(uint32_t v) {
  WireWriter w;
  w.U32(v);
  return std::move(w.bytes());
}

Result<uint32_t> DecodeU32(std::span<const uint8_t> payload) {
  WireReader r(payload);
  const uint32_t v = r.U32();
  if (!r.Done()) return Malformed("table index");
  return v;
}

Status CheckRowIds(std::span<const uint64_t> ids, uint64_t row_count, bool distinct, const std::string& table) {
  for (uint64_t id : ids) {
    if (id >= row_count) {
      return Status::OutOfRange("node protocol: row " + std::to_string(id) + " is past the end of table " + table +
                                " (" + std::to_string(row_count) + " rows)");
    }
  }
  if (distinct && ids.size() > 1) {
    std::vector<uint64_t> sorted(ids.begin(), ids.end());
    std::sort(sorted.begin(), sorted.end());
    auto twice = std::adjacent_find(sorted.begin(), sorted.end());
    if (twice != sorted.end()) {
      return Status::InvalidArgument("node protocol: row " + std::to_string(*twice) +
                                     " is asked for twice in one request (a request's rows are distinct)");
    }
  }
  return Status::OK();
}

Status CheckWelcome(const Welcome& w, uint64_t mapped_bytes) {
  for (const WelcomeTable& t : w.tables) {
    if (t.record_bytes == 0 || t.row_count == 0 || t.geometry.row_bytes != t.record_bytes) {
      return Status::Internal("node: the service describes table " + t.name + " inconsistently (records of " +
                              std::to_string(t.record_bytes) + " B, " + std::to_string(t.row_count) +
                              " rows, cache rows of " + std::to_string(t.geometry.row_bytes) + " B)");
    }
    std::string why;
    if (!t.geometry.Valid(&why)) return Status::Internal("node: table " + t.name + "'s cache: " + why);
    if (t.index_offset > mapped_bytes || t.slab_offset > mapped_bytes ||
        t.geometry.index_bytes > mapped_bytes - t.index_offset ||
        t.geometry.slab_bytes > mapped_bytes - t.slab_offset) {
      return Status::Internal("node: table " + t.name + "'s cache lies outside the shared memory");
    }
  }
  return Status::OK();
}

}  // namespace engram::node
