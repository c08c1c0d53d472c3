#include "src/replay/trace_files.h"

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>

#include "storage/file_util.h"

namespace engram::replay {
namespace {

using File = std::unique_ptr<FILE, int (*)(FILE*)>;

// Traces are read whole; beyond this a file is not a trace of a test or a
// benchmark (or belongs to a streaming reader this is not).
constexpr uint64_t kMaxTraceFileBytes = 4ull << 30;

Result<std::string> ReadAll(const std::string& path, const char* what) {
  return fileutil::ReadRegularFile(path, kMaxTraceFileBytes, what);
}

}  // namespace

static_assert(std::endian::native == std::endian::little, "trace files are little-endian");

Result<std::vector<uint32_t>> ReadTokenFile(const std::string& path) {
  ENGRAM_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path, "token file"));
  if (bytes.size() % 4 != 0)
    return Status::Corruption("token file " + path + ": size " + std::to_string(bytes.size()) +
                              " bytes is not a multiple of 4 (little-endian uint32 token IDs)");
  std::vector<uint32_t> tokens(bytes.size() / 4);
  // An empty file has no buffers: memcpy(nullptr, nullptr, 0) is undefined
  // behaviour (found by tests/fuzz/trace_files_fuzzer).
  if (!bytes.empty()) std::memcpy(tokens.data(), bytes.data(), bytes.size());
  return tokens;
}

Status WriteU64File(const std::string& path, std::span<const uint64_t> values) {
  File f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return Status::FromErrno("output " + path, errno);
  if (std::fwrite(values.data(), 8, values.size(), f.get()) != values.size())
    return Status::FromErrno("write " + path, errno);
  if (std::fclose(f.release()) != 0) return Status::FromErrno("close " + path, errno);
  return Status::OK();
}

Result<std::vector<uint64_t>> ReadRowTrace(const std::string& path) {
  ENGRAM_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path, "row trace"));
  std::vector<uint64_t> rows;
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  size_t line = 1;
  while (p < end) {
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', end - p));
    if (!eol) eol = end;
    const char* last = eol;
    if (last > p && last[-1] == '\r') --last;
    uint64_t id = 0;
    auto [stop, ec] = std::from_chars(p, last, id, 10);
    if (p == last || ec != std::errc() || stop != last)
      return Status::Corruption("row trace " + path + " line " + std::to_string(line) + ": '" +
                                std::string(p, std::min<size_t>(last - p, 40)) + "' is not a decimal row ID");
    rows.push_back(id);
    p = eol + 1;
    ++line;
  }
  return rows;
}

Status WriteRowTrace(const std::string& path, std::span<const uint64_t> rows) {
  File f(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!f) return Status::FromErrno("row trace " + path, errno);
  char buf[32];
  for (uint64_t id : rows) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf) - 1, id);
    *end++ = '\n';
    if (std::fwrite(buf, 1, end - buf, f.get()) != size_t(end - buf)) return Status::FromErrno("write " + path, errno);
  }
  if (std::fclose(f.release()) != 0) return Status::FromErrno("close " + path, errno);
  return Status::OK();
}

}  // namespace engram::replay
