#include "src/replay/request_spec.h"

#include <charconv>

namespace engram::replay {

Result<SplitSpec> SplitSpec::Parse(std::string_view text) {
  SplitSpec s;
  std::string_view digits = text;
  if (!text.empty() && (text[0] == 'x' || text[0] == 'X')) {
    s.kind = Kind::kEqualChunks;
    digits.remove_prefix(1);
  }
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 10);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || v == 0)
    return Status::InvalidArgument("split '" + std::string(text) +
                                   "': expected N (tokens per chunk) or xK (K equal chunks), N and K > 0");
  s.value = v;
  return s;
}

std::string SplitSpec::ToString() const {
  return std::string(kind == Kind::kEqualChunks ? "x" : "").append(std::to_string(value));
}

std::vector<size_t> SplitSpec::Boundaries(size_t length) const {
  std::vector<size_t> b;
  if (kind == Kind::kChunkTokens) {
    for (size_t start = 0; start < length; start += value) b.push_back(start);
  } else {
    // torch.chunk: chunks of ceil(length / K) tokens, the last one shorter
    // (this is what reproduces the reference emulator's 12-chunk first request).
    // ceil(length / K) without overflow: (length + K - 1) / K wrapped to a
    // zero chunk (an endless loop) for K near 2^64 (found by
    // tests/fuzz/trace_files_fuzzer: "FILE@x18446744073709551615").
    const size_t chunk = static_cast<size_t>(length / value + (length % value != 0));
    for (size_t start = 0; start < length; start += chunk) b.push_back(start);
  }
  b.push_back(length);
  return b;
}

Result<RequestSpec> RequestSpec::Parse(std::string_view text) {
  RequestSpec r;
  const size_t at = text.rfind('@');
  r.path = std::string(text.substr(0, at));
  if (at != std::string_view::npos) {
    auto split = SplitSpec::Parse(text.substr(at + 1));
    if (!split.ok()) return split.status().WithContext("request '" + std::string(text) + "'");
    r.split = *split;
  }
  if (r.path.empty()) return Status::InvalidArgument("request '" + std::string(text) + "': empty file name");
  return r;
}

}  // namespace engram::replay
