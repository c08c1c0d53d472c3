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

#include <functional>
#include <span>
#include <string>
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

// Checks `text` in full like ParseBoundedJson, but builds only the top-level
// members named in `keep`; everything else is discarded while it is parsed.
// A whole tree costs over ten times its text in nodes (61.6 MB of table
// metadata took 790 MB), so text whose bulk nobody reads is checked this
// way. Returns an object of the kept members that are present;
// InvalidArgument if the text is not valid JSON or not an object.
// `text`, which must be valid JSON, laid out as nlohmann::json::dump(indent)
// lays out a value (one member or element per line, "key": value, empty
// containers as {} and []), without building the value: memory is that of
// the output. Strings, numbers and member order are kept as written, so for
// text written by dump (sorted keys, canonical numbers) the output is
// exactly dump(indent)'s.
std::string IndentJson(std::string_view text, int indent);
// The same, handed to `write` in pieces of about 64 KiB as it is produced,
// so a large document is written out without being held whole.
void IndentJson(std::string_view text, int indent, const std::function<void(std::string_view)>& write);

Result<nlohmann::json> ParseBoundedJsonMembers(std::string_view text, std::span<const std::string_view> keep,
                                               int max_depth = kMaxJsonDepth);

}  // namespace engram
