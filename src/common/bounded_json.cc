#include "src/common/bounded_json.h"

#include <string>

namespace engram {

Status CheckJsonNesting(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return Status::InvalidArgument("JSON nests deeper than " + std::to_string(max_depth) + " levels (at byte " +
                                       std::to_string(i) + ")");
      }
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text is the parser's to reject
    }
  }
  return Status::OK();
}

Result<nlohmann::json> ParseBoundedJson(std::string_view text, int max_depth) {
  ENGRAM_RETURN_IF_ERROR(CheckJsonNesting(text, max_depth));
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number too large for a double throws out_of_range.
    return Status::InvalidArgument(std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace engram
