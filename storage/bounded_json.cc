#include "storage/bounded_json.h"

#include <algorithm>
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

std::string IndentJson(std::string_view text, int indent) {
  std::string all;
  IndentJson(text, indent, [&](std::string_view piece) { all.append(piece); });
  return all;
}

void IndentJson(std::string_view text, int indent, const std::function<void(std::string_view)>& write) {
  constexpr size_t kPiece = 64u << 10;
  std::string out;
  out.reserve(2 * kPiece);
  int level = 0;
  auto newline = [&](int at) {
    out += '\n';
    out.append(static_cast<size_t>(at) * static_cast<size_t>(indent), ' ');
  };
  // Whitespace outside strings is dropped; the layout is ours.
  auto next_token = [&](size_t i) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
    return i;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
      case ' ': case '\t': case '\n': case '\r':
        break;
      case '"': {
        const size_t start = i++;
        while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
        out.append(text.substr(start, i + 1 - start));
        break;
      }
      case '{': case '[': {
        const size_t j = next_token(i + 1);
        if (j < text.size() && (text[j] == '}' || text[j] == ']')) {  // empty container
          out += c;
          out += text[j];
          i = j;
        } else {
          out += c;
          newline(++level);
        }
        break;
      }
      case '}': case ']':
        newline(--level);
        out += c;
        break;
      case ',':
        out += ',';
        newline(level);
        break;
      case ':':
        out += ": ";
        break;
      default:
        out += c;  // numbers, true, false, null
    }
    if (out.size() >= kPiece) {
      write(out);
      out.clear();
    }
  }
  if (!out.empty()) write(out);
}

Result<nlohmann::json> ParseBoundedJsonMembers(std::string_view text, std::span<const std::string_view> keep,
                                               int max_depth) {
  ENGRAM_RETURN_IF_ERROR(CheckJsonNesting(text, max_depth));
  using json = nlohmann::json;
  // Whether the top-level member being parsed is kept. Inside a member that
  // is not, every container is refused at its start, so the parser creates
  // none of its values (it still checks their syntax).
  bool keeping = false;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::key:
        if (depth == 1) {
          const std::string& k = parsed.get_ref<const std::string&>();
          keeping = std::find(keep.begin(), keep.end(), k) != keep.end();
          return keeping;
        }
        return true;
      case json::parse_event_t::object_start:
        return depth == 0 || keeping;
      case json::parse_event_t::array_start:
        return depth != 0 && keeping;  // a top-level array is no object: never built
      default:
        return true;
    }
  };
  try {
    json members = json::parse(text.begin(), text.end(), callback);
    if (!members.is_object()) return Status::InvalidArgument("not a JSON object");
    return members;
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace engram
