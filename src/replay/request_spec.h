// `--request FILE[@SPLIT]`: which token file is one request and how it is cut
// into prefill chunks (each chunk is one gather).
//   FILE          chunks of 4096 tokens (the runtime's default prefill chunk)
//   FILE@N        chunks of N tokens
//   FILE@xK       K (nearly) equal chunks, as torch.chunk: ceil(L/K) tokens
//                 each, the last one shorter (fewer than K chunks if L is small)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engram/status.h"

namespace engram::replay {

struct SplitSpec {
  enum class Kind : uint8_t { kChunkTokens, kEqualChunks };
  Kind kind = Kind::kChunkTokens;
  uint64_t value = 4096;  // tokens per chunk, or number of chunks

  static Result<SplitSpec> Parse(std::string_view text);  // "4096" or "x12"
  std::string ToString() const;                           // round-trips through Parse
  // Start offsets of the chunks of a request of `length` tokens, followed by
  // `length`. There are no empty chunks: they would be gathers of nothing.
  std::vector<size_t> Boundaries(size_t length) const;
};

struct RequestSpec {
  std::string path;
  SplitSpec split;

  // "FILE" or "FILE@SPLIT"; the last '@' separates the split.
  static Result<RequestSpec> Parse(std::string_view text);
};

}  // namespace engram::replay
