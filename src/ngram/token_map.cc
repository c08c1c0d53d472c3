#include <cerrno>
#include <bit>
#include <cstdio>
#include <memory>

#include "engram/hasher.h"

namespace engram {

Result<TokenMap> TokenMap::FromFile(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::FromErrno("token map " + path, errno);
  if (std::fseek(f.get(), 0, SEEK_END) != 0) return Status::FromErrno("token map " + path, errno);
  const long size = std::ftell(f.get());
  if (size < 0) return Status::FromErrno("token map " + path, errno);
  if (size == 0 || size % 4 != 0)
    return Status::Corruption("token map " + path + ": size " + std::to_string(size) +
                              " bytes is not a non-zero multiple of 4 (little-endian uint32 entries)");
  std::rewind(f.get());
  std::vector<uint32_t> ids(static_cast<size_t>(size) / 4);
  if (std::fread(ids.data(), 4, ids.size(), f.get()) != ids.size())
    return Status::IOError("token map " + path + ": short read");
  static_assert(std::endian::native == std::endian::little, "token maps are little-endian");
  return TokenMap(std::move(ids));
}

}  // namespace engram
