#include "storage/redis/remote_table_keys.h"

#include <xxhash.h>

#include <cstring>

#include "storage/byte_order.h"

namespace engram::redis {
namespace {

constexpr char kDescriptorMagic[8] = {'E', 'N', 'G', 'R', 'A', 'M', 'R', 'D'};
constexpr uint32_t kDescriptorVersion = 1;
constexpr size_t kFixedBytes = 40;

}  // namespace

std::string FingerprintHex(uint64_t fingerprint) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, fingerprint >>= 4) out[i] = kHex[fingerprint & 15];
  return out;
}

std::string DescriptorKey(std::string_view name) { return "engram:" + std::string(name); }

RemoteTableKeys::RemoteTableKeys(std::string_view name, uint64_t fingerprint)
    : descriptor_(DescriptorKey(name)),
      block_prefix_(descriptor_ + ":" + FingerprintHex(fingerprint) + ":{"),
      progress_(descriptor_ + ":" + FingerprintHex(fingerprint) + ":loaded") {}

void RemoteTableKeys::Block(uint64_t block, std::string* out) const {
  out->assign(block_prefix_);
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + block % 10);
    block /= 10;
  } while (block != 0);
  while (n > 0) out->push_back(digits[--n]);
  out->push_back('}');
}

std::string EncodeDescriptor(const RemoteDescriptor& d) {
  std::string out(kFixedBytes + kTableHeaderBytes + d.metadata.size() + 8, '\0');
  auto* p = reinterpret_cast<std::byte*>(out.data());
  std::memcpy(p, kDescriptorMagic, 8);
  StoreLe64(p + 8, uint64_t{kDescriptorVersion} | (uint64_t{kTableHeaderBytes} << 32));
  StoreLe64(p + 16, d.fingerprint);
  StoreLe64(p + 24, d.block_count);
  StoreLe64(p + 32, d.metadata.size());
  std::memcpy(p + kFixedBytes, d.header.data(), kTableHeaderBytes);
  std::memcpy(p + kFixedBytes + kTableHeaderBytes, d.metadata.data(), d.metadata.size());
  const size_t body = out.size() - 8;
  StoreLe64(p + body, XXH3_64bits(p, body));
  return out;
}

Result<RemoteDescriptor> DecodeDescriptor(std::string_view value, std::string_view where) {
  const std::string at = "descriptor of " + std::string(where);
  const auto* p = reinterpret_cast<const std::byte*>(value.data());
  if (value.size() < kFixedBytes + kTableHeaderBytes + 8 || std::memcmp(p, kDescriptorMagic, 8) != 0) {
    return Status::Corruption(at + ": not an Engram table descriptor (" + std::to_string(value.size()) + " bytes)");
  }
  const uint64_t version_and_header = LoadLe64(p + 8);
  if ((version_and_header & 0xffffffffu) != kDescriptorVersion) {
    return Status::Unsupported(at + ": descriptor version " + std::to_string(version_and_header & 0xffffffffu) +
                               " (this build reads version " + std::to_string(kDescriptorVersion) + ")");
  }
  if ((version_and_header >> 32) != kTableHeaderBytes) return Status::Corruption(at + ": header size is not 256");
  RemoteDescriptor d;
  d.fingerprint = LoadLe64(p + 16);
  d.block_count = LoadLe64(p + 24);
  const uint64_t metadata_bytes = LoadLe64(p + 32);
  if (metadata_bytes > kMaxMetadataBytes || value.size() != kFixedBytes + kTableHeaderBytes + metadata_bytes + 8) {
    return Status::Corruption(at + ": " + std::to_string(value.size()) + " bytes do not hold " +
                              std::to_string(metadata_bytes) + " bytes of metadata");
  }
  const size_t body = value.size() - 8;
  if (XXH3_64bits(p, body) != LoadLe64(p + body)) return Status::Corruption(at + ": checksum mismatch");
  std::memcpy(d.header.data(), p + kFixedBytes, kTableHeaderBytes);
  if (XXH3_64bits(d.header.data(), kTableHeaderBytes) != d.fingerprint) {
    return Status::Corruption(at + ": the fingerprint is not the header's");
  }
  d.metadata.assign(value.data() + kFixedBytes + kTableHeaderBytes, metadata_bytes);
  return d;
}

}  // namespace engram::redis
