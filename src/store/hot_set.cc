#include "src/store/hot_set.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <span>

#include "storage/block_hash.h"
#include "storage/byte_order.h"
#include "storage/file_util.h"

namespace engram {
namespace {

constexpr char kMagic[8] = {'E', 'N', 'G', 'R', 'A', 'M', 'H', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kTableHeaderBytes = 8 + 8 + 4 + 4 + 8 + 8;
constexpr size_t kRowBytes = 12;

void Put(std::string& out, uint64_t v, int n) {
  std::byte b[8];
  StoreLe(b, v, n);
  out.append(reinterpret_cast<const char*>(b), n);
}

// Bounds-checked reads from the decoded bytes.
class Reader {
 public:
  Reader(const std::string& s, size_t end) : p_(reinterpret_cast<const std::byte*>(s.data())), end_(end) {}
  bool Has(uint64_t n) const { return n <= end_ - pos_; }
  uint64_t Get(int n) {
    const uint64_t v = LoadLe(p_ + pos_, n);
    pos_ += n;
    return v;
  }
  std::string Text(size_t n) {
    std::string t(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return t;
  }
  size_t pos() const { return pos_; }

 private:
  const std::byte* p_;
  size_t end_;
  size_t pos_ = 0;
};

}  // namespace

std::string EncodeHotSet(const std::vector<HotSetTable>& tables) {
  std::string out(kMagic, sizeof kMagic);
  Put(out, kVersion, 4);
  Put(out, tables.size(), 4);
  for (const HotSetTable& t : tables) {
    Put(out, t.fingerprint, 8);
    Put(out, t.row_count, 8);
    Put(out, t.record_bytes, 4);
    Put(out, t.policy.size(), 4);
    Put(out, t.capacity_rows, 8);
    Put(out, t.rows.size(), 8);
    out += t.policy;
    for (const HotSetRow& r : t.rows) {
      Put(out, r.row_id, 8);
      Put(out, r.estimate, 4);
    }
  }
  Put(out, BlockHash(out.data(), out.size(), 0), 8);
  return out;
}

Result<std::vector<HotSetTable>> DecodeHotSet(const std::string& bytes) {
  auto corrupt = [](const std::string& why) { return Status::Corruption("hot set: " + why); };
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return corrupt("not a hot-set file (bad magic)");
  }
  if (bytes.size() < sizeof kMagic + 8 + 8) return corrupt("truncated (" + std::to_string(bytes.size()) + " B)");
  const size_t body = bytes.size() - 8;
  if (LoadLe64(reinterpret_cast<const std::byte*>(bytes.data()) + body) != BlockHash(bytes.data(), body, 0)) {
    return corrupt("checksum mismatch (truncated or corrupt)");
  }
  Reader in(bytes, body);
  in.Text(sizeof kMagic);
  const uint32_t version = uint32_t(in.Get(4));
  if (version != kVersion) return corrupt("unknown version " + std::to_string(version));
  const uint32_t count = uint32_t(in.Get(4));
  std::vector<HotSetTable> tables;
  for (uint32_t i = 0; i < count; ++i) {
    if (!in.Has(kTableHeaderBytes)) return corrupt("table entry " + std::to_string(i) + " runs past the end");
    HotSetTable t;
    t.fingerprint = in.Get(8);
    t.row_count = in.Get(8);
    t.record_bytes = uint32_t(in.Get(4));
    const uint32_t policy_bytes = uint32_t(in.Get(4));
    t.capacity_rows = in.Get(8);
    const uint64_t rows = in.Get(8);
    if (!in.Has(policy_bytes) || rows > (body - in.pos() - policy_bytes) / kRowBytes) {
      return corrupt("table entry " + std::to_string(i) + " runs past the end");
    }
    t.policy = in.Text(policy_bytes);
    t.rows.resize(rows);
    for (HotSetRow& r : t.rows) {
      r.row_id = in.Get(8);
      r.estimate = uint32_t(in.Get(4));
      if (r.row_id >= t.row_count) return corrupt("row " + std::to_string(r.row_id) + " is out of range");
    }
    tables.push_back(std::move(t));
  }
  if (in.pos() != body) return corrupt("trailing bytes after the last table entry");
  return tables;
}

Status WriteHotSetFile(const std::string& path, const std::vector<HotSetTable>& tables) {
  return fileutil::WriteFileAtomically(path, EncodeHotSet(tables), "hot_set_path").WithContext("hot set");
}

Result<std::vector<HotSetTable>> ReadHotSetFile(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  const bool found = ::stat(path.c_str(), &st) == 0;
  if (!found && errno == ENOENT) return Status::NotFound("hot set: no file " + path);
  if (found && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Status::OutOfRange("hot set " + path + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                              std::to_string(max_bytes) + " bytes a hot set of these caches can hold");
  }
  ENGRAM_ASSIGN_OR_RETURN(std::string bytes, fileutil::ReadRegularFile(path, max_bytes, "hot set"));
  return DecodeHotSet(bytes);
}

Result<std::vector<HotSetEntryHead>> ReadHotSetHeads(const std::string& path) {
  auto corrupt = [](const std::string& why) { return Status::Corruption("hot set: " + why); };
  ENGRAM_ASSIGN_OR_RETURN(int raw, fileutil::OpenReadOnly(path));
  fileutil::ScopedFd fd(raw);
  ENGRAM_ASSIGN_OR_RETURN(uint64_t size, fileutil::FileSize(fd.get(), path));
  if (size < sizeof kMagic + 8 + 8) return corrupt("truncated (" + std::to_string(size) + " B)");
  const uint64_t body = size - 8;  // the checksum follows the entries
  std::byte head[sizeof kMagic + 8];
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd.get(), head, 0, path));
  if (std::memcmp(head, kMagic, sizeof kMagic) != 0) return corrupt("not a hot-set file (bad magic)");
  const uint32_t version = static_cast<uint32_t>(LoadLe(head + sizeof kMagic, 4));
  if (version != kVersion) return corrupt("unknown version " + std::to_string(version));
  const uint32_t count = static_cast<uint32_t>(LoadLe(head + sizeof kMagic + 4, 4));
  std::vector<HotSetEntryHead> entries;
  uint64_t pos = sizeof head;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string past_end = "table entry " + std::to_string(i) + " runs past the end";
    if (body - pos < kTableHeaderBytes) return corrupt(past_end);
    std::byte fixed[kTableHeaderBytes];
    ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd.get(), fixed, pos, path));
    pos += kTableHeaderBytes;
    HotSetEntryHead e;
    e.table.fingerprint = LoadLe(fixed, 8);
    e.table.row_count = LoadLe(fixed + 8, 8);
    e.table.record_bytes = static_cast<uint32_t>(LoadLe(fixed + 16, 4));
    const uint32_t policy_bytes = static_cast<uint32_t>(LoadLe(fixed + 20, 4));
    e.table.capacity_rows = LoadLe(fixed + 24, 8);
    e.rows = LoadLe(fixed + 32, 8);
    if (policy_bytes > body - pos || e.rows > (body - pos - policy_bytes) / kRowBytes) return corrupt(past_end);
    e.table.policy.resize(policy_bytes);
    ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(
        fd.get(), std::as_writable_bytes(std::span(e.table.policy.data(), policy_bytes)), pos, path));
    pos += policy_bytes + e.rows * kRowBytes;
    entries.push_back(std::move(e));
  }
  if (pos != body) return corrupt("trailing bytes after the last table entry");
  return entries;
}

std::string HotSetMismatch(const HotSetTable& saved, uint64_t row_count, uint32_t record_bytes,
                           const std::string& policy, uint64_t capacity_rows) {
  if (saved.row_count != row_count) {
    return "saved for " + std::to_string(saved.row_count) + " rows, the table has " + std::to_string(row_count);
  }
  if (saved.record_bytes != record_bytes) {
    return "saved for " + std::to_string(saved.record_bytes) + "-B rows, the table has " +
           std::to_string(record_bytes) + "-B rows";
  }
  if (saved.policy != policy) return "saved under policy '" + saved.policy + "', the cache runs '" + policy + "'";
  if (saved.capacity_rows != capacity_rows) {
    return "saved from a cache of " + std::to_string(saved.capacity_rows) + " rows, this cache holds " +
           std::to_string(capacity_rows);
  }
  return "";
}

}  // namespace engram
