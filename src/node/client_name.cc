#include "src/node/client_name.h"

#include <cstdint>

namespace engram::node {
namespace {

// The length of the UTF-8 sequence starting at s[i] and its code point, or 0
// if it is not a well-formed, shortest-form, non-surrogate sequence.
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  size_t n;
  uint32_t cp;
  if (b0 < 0x80) {
    *code_point = b0;
    return 1;
  } else if ((b0 & 0xe0) == 0xc0) {
    n = 2;
    cp = b0 & 0x1f;
  } else if ((b0 & 0xf0) == 0xe0) {
    n = 3;
    cp = b0 & 0x0f;
  } else if ((b0 & 0xf8) == 0xf0) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static constexpr uint32_t kShortest[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kShortest[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  *code_point = cp;
  return n;
}

}  // namespace

Status CheckClientName(std::string_view name) {
  if (name.size() > kMaxClientNameBytes) {
    return Status::InvalidArgument("node: the client name is " + std::to_string(name.size()) +
                                   " bytes long; at most " + std::to_string(kMaxClientNameBytes) + " are allowed");
  }
  for (size_t i = 0; i < name.size();) {
    uint32_t cp = 0;
    const size_t n = DecodeUtf8(name, i, &cp);
    if (n == 0) {
      return Status::InvalidArgument("node: the client name is not valid UTF-8 (at byte " + std::to_string(i) + ")");
    }
    if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
      return Status::InvalidArgument("node: the client name holds a control character (at byte " +
                                     std::to_string(i) + ")");
    }
    i += n;
  }
  return Status::OK();
}

}  // namespace engram::node
