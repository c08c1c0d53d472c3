#include "storage/safetensors_header.h"

#include <algorithm>
#include <functional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "storage/bounded_json.h"
#include "storage/byte_order.h"
#include "storage/file_util.h"

namespace engram {

using nlohmann::json;

namespace {

Status Bad(const std::string& m) { return Status::Corruption("safetensors header: " + m); }

bool IsU64(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); }

// Checks one tensor entry. A dtype this build does not know (a sub-byte or
// future type) is an error only for a tensor the caller `wanted`: for the
// others only the data_offsets are checked (in bounds, begin <= end), since
// their size cannot be derived from their shape, and element_bytes stays 0.
Result<TensorInfo> ParseTensor(const std::string& name, const json& v, uint64_t data_start, uint64_t file_size,
                               bool wanted) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) return Bad(where + " is not a JSON object");
  if (!v.contains("dtype") || !v["dtype"].is_string()) return Bad(where + " has no string \"dtype\"");
  if (!v.contains("shape") || !v["shape"].is_array()) return Bad(where + " has no \"shape\" array");
  if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) {
    return Bad(where + " has no \"data_offsets\" [begin, end] pair");
  }
  TensorInfo t;
  t.name = name;
  t.dtype = v["dtype"].get<std::string>();
  t.element_bytes = SafetensorsDtypeBytes(t.dtype);
  if (t.element_bytes == 0 && wanted) {
    return Status::Unsupported("safetensors header: tensor '" + name + "' has unsupported dtype '" + t.dtype + "'");
  }
  for (const json& d : v["shape"]) {
    if (!IsU64(d)) return Bad(where + " has a shape entry that is not a non-negative integer");
    t.shape.push_back(d.get<uint64_t>());
  }
  const json& off = v["data_offsets"];
  if (!IsU64(off[0]) || !IsU64(off[1])) return Bad(where + " data_offsets are not non-negative integers");
  uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end) return Bad(where + " data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
  uint64_t bytes = end - begin;
  if (t.element_bytes != 0) {
    const std::optional<uint64_t> data_bytes = TensorDataBytes(t.element_bytes, t.shape);
    if (!data_bytes) return Bad(where + " shape " + ShapeToString(t.shape) + " of " + t.dtype + " overflows 64 bits");
    bytes = *data_bytes;
  }
  if (end - begin != bytes) {
    return Bad(where + " shape " + ShapeToString(t.shape) + " of " + t.dtype + " needs " + std::to_string(bytes) +
               " bytes but data_offsets span " + std::to_string(end - begin));
  }
  uint64_t data_size = file_size - data_start;
  if (end > data_size) {
    return Bad(where + " data_offsets end " + std::to_string(end) + " is past the end of the data (" +
               std::to_string(data_size) + " bytes; file truncated?)");
  }
  t.data_offset = data_start + begin;
  t.data_bytes = bytes;
  return t;
}

}  // namespace

uint32_t SafetensorsDtypeBytes(const std::string& d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E4M3" || d == "F8_E5M2" || d == "F8_E8M0" ||
      d == "F8_E4M3FNUZ" || d == "F8_E5M2FNUZ") {
    return 1;
  }
  if (d == "U16" || d == "I16" || d == "F16" || d == "BF16") return 2;
  if (d == "U32" || d == "I32" || d == "F32") return 4;
  if (d == "U64" || d == "I64" || d == "F64" || d == "C64") return 8;
  return 0;
}

const TensorInfo* SafetensorsHeader::Find(const std::string& name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Result<uint64_t> SafetensorsHeaderLength(std::span<const std::byte> first8, uint64_t file_size) {
  if (first8.size() < 8 || file_size < 8) {
    return Bad("file is " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");
  }
  uint64_t n = LoadLe64(first8.data());
  if (n > kSafetensorsMaxHeaderBytes) {
    return Bad("header length " + std::to_string(n) + " exceeds the " + std::to_string(kSafetensorsMaxHeaderBytes) +
               "-byte limit");
  }
  if (n > file_size - 8) {
    return Bad("header length " + std::to_string(n) + " is past the end of the " + std::to_string(file_size) +
               "-byte file");
  }
  if (n < 2) return Bad("header length " + std::to_string(n) + " is too short for a JSON object");
  return n;
}

namespace {

// Thrown from the parser callback to stop at the first bad entry.
struct StopParsing {};

// Where a tensor's data lies, for the overlap check of tensors not kept.
struct Extent {
  uint64_t begin, end;
  uint64_t ordinal;  // position among the header's tensors (file order)
};

// Streams the header's top-level members through `member(key, value)`
// without building the whole document: nlohmann's parser callback hands
// over each member once it is complete, and returning false discards it,
// so only one tensor entry exists at a time however large the header is.
// The first error of `member` stops the parse and is returned as is; the
// JSON's own errors are InvalidArgument.
Status ForEachMember(std::string_view text, const std::function<Status(const std::string&, const json&)>& member) {
  ENGRAM_RETURN_IF_ERROR(CheckJsonNesting(text));
  std::string key;
  Status failed = Status::OK();
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (depth != 1) return true;
    switch (event) {
      case json::parse_event_t::key:
        key = parsed.get<std::string>();
        return true;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
      case json::parse_event_t::value:
        failed = member(key, parsed);
        if (!failed.ok()) throw StopParsing{};
        return false;  // done with it: not kept in the document
      default:
        return true;
    }
  };
  try {
    json rest = json::parse(text.begin(), text.end(), callback);
    if (!rest.is_object()) return Status::InvalidArgument("JSON is not an object");
  } catch (const StopParsing&) {
    return failed;
  } catch (const json::exception& e) {
    // Not only parse_error: a number too large for a double throws out_of_range.
    return Status::InvalidArgument(std::string("not valid JSON: ") + e.what());
  }
  return Status::OK();
}

}  // namespace

Result<SafetensorsHeader> ParseSafetensorsHeader(std::span<const std::byte> prefix, uint64_t file_size,
                                                 std::span<const std::string> names) {
  ENGRAM_ASSIGN_OR_RETURN(uint64_t n, SafetensorsHeaderLength(prefix, file_size));
  if (prefix.size() < 8 + n) return Status::InvalidArgument("safetensors header: buffer holds fewer than 8 + N bytes");
  const char* text = reinterpret_cast<const char*>(prefix.data() + 8);
  if (text[0] != '{') return Bad("JSON does not start with '{'");
  const std::string_view json_text(text, n);

  SafetensorsHeader h;
  h.header_bytes = n;
  h.data_start = 8 + n;
  const bool keep_all = names.empty();
  std::vector<Extent> extents;  // of every tensor, kept or not
  Status parsed = ForEachMember(json_text, [&](const std::string& key, const json& value) -> Status {
    if (key == "__metadata__") {
      if (!value.is_object()) return Bad("__metadata__ is not an object");
      for (auto m = value.begin(); m != value.end(); ++m) {
        if (!m.value().is_string()) return Bad("__metadata__ value '" + m.key() + "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      return Status::OK();
    }
    const bool wanted = keep_all || std::find(names.begin(), names.end(), key) != names.end();
    ENGRAM_ASSIGN_OR_RETURN(TensorInfo t, ParseTensor(key, value, h.data_start, file_size, wanted));
    extents.push_back({t.data_offset, t.data_offset + t.data_bytes, h.tensor_count});
    ++h.tensor_count;
    if (h.some_names.size() < SafetensorsHeader::kSomeNames) h.some_names.push_back(key);
    if (wanted) h.tensors.push_back(std::move(t));
    return Status::OK();
  });
  if (!parsed.ok()) return parsed.code() == StatusCode::kInvalidArgument ? Bad(parsed.message()) : parsed;

  // A kept tensor must be named once (a parsed tree used to keep whichever
  // entry came last, unchecked against the others).
  std::vector<const std::string*> kept_names;
  for (const TensorInfo& t : h.tensors) kept_names.push_back(&t.name);
  std::sort(kept_names.begin(), kept_names.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
  for (size_t i = 1; i < kept_names.size(); ++i) {
    if (*kept_names[i] == *kept_names[i - 1]) return Bad("tensor '" + *kept_names[i] + "' appears twice");
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.data_offset < b.data_offset; });
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].begin < extents[i - 1].end) {
      // Names are not kept for every tensor: find the two by position.
      const uint64_t a = extents[i - 1].ordinal, b = extents[i].ordinal;
      std::string name_a, name_b;
      uint64_t ordinal = 0;
      (void)ForEachMember(json_text, [&](const std::string& key, const json&) -> Status {
        if (key == "__metadata__") return Status::OK();
        if (ordinal == a) name_a = key;
        if (ordinal == b) name_b = key;
        ++ordinal;
        return Status::OK();
      });
      return Bad("tensors '" + name_a + "' and '" + name_b + "' overlap");
    }
  }
  return h;
}

Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path, std::span<const std::string> names) {
  ENGRAM_ASSIGN_OR_RETURN(int raw_fd, fileutil::OpenReadOnly(path));
  fileutil::ScopedFd fd(raw_fd);
  ENGRAM_ASSIGN_OR_RETURN(uint64_t size, fileutil::FileSize(fd.get(), path));
  std::byte first8[8] = {};
  if (size >= 8) ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd.get(), first8, 0, path));
  auto n = SafetensorsHeaderLength(first8, size);
  if (!n.ok()) return n.status().WithContext(path);
  std::vector<std::byte> prefix(8 + *n);
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd.get(), prefix, 0, path));
  auto h = ParseSafetensorsHeader(prefix, size, names);
  if (!h.ok()) return h.status().WithContext(path);
  return h;
}

}  // namespace engram
