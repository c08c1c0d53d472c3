// JSON parsing for text from files (table metadata, layout files,
// safetensors headers) with a nesting limit.
//
// Why: nlohmann::json parses deep nesting fine, but copying, dumping and
// comparing a value recurse once per level, so a hostile file of 100,000
// nested brackets (well under any size limit) overflows the stack of
// whatever touches it later (engram-inspect's `info` did). Nothing in our
// formats nests deeper than a few levels, so text that does is refused up
// front, before a value exists.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "engram/status.h"

namespace engram {

inline constexpr int kMaxJsonDepth = 64;

// OK if no array or object in `text` nests deeper than max_depth (brackets
// inside strings do not count). Linear, no allocation.
Status CheckJsonNesting(std::string_view text, int max_depth = kMaxJsonDepth);

// Parses `text` after CheckJsonNesting. InvalidArgument names the problem
// ("nests deeper than 64 levels", or the parser's message).
Result<nlohmann::json> ParseBoundedJson(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace engram
