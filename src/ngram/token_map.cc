#include <bit>
#include <cstring>

#include "engram/hasher.h"
#include "storage/file_util.h"
#include "storage/input_files.h"

namespace engram {

namespace {

// 2^28 entries: more than any tokenizer's vocabulary, and a bound on what a
// wrong path (a table file, say) can make the reader allocate.
constexpr uint64_t kMaxTokenMapBytes = 1ull << 30;

}  // namespace

Result<TokenMap> TokenMap::FromFile(const std::string& path) {
  ENGRAM_ASSIGN_OR_RETURN(std::string bytes, fileutil::ReadRegularFile(path, kMaxTokenMapBytes, "token map",
                                                [&](int fd) { RecordInputFile(fd, path, "a token map"); }));
  if (bytes.empty() || bytes.size() % 4 != 0)
    return Status::Corruption("token map " + path + ": size " + std::to_string(bytes.size()) +
                              " bytes is not a non-zero multiple of 4 (little-endian uint32 entries)");
  static_assert(std::endian::native == std::endian::little, "token maps are little-endian");
  std::vector<uint32_t> ids(bytes.size() / 4);
  std::memcpy(ids.data(), bytes.data(), bytes.size());
  return TokenMap(std::move(ids));
}

}  // namespace engram
