#include "storage/safetensors_header.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "src/common/bounded_json.h"
#include "storage/byte_order.h"
#include "storage/file_util.h"

namespace engram {

using nlohmann::json;

namespace {

Status Bad(const std::string& m) { return Status::Corruption("safetensors header: " + m); }

bool IsU64(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); }

Result<TensorInfo> ParseTensor(const std::string& name, const json& v, uint64_t data_start, uint64_t file_size) {
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
  if (t.element_bytes == 0) {
    return Status::Unsupported("safetensors header: tensor '" + name + "' has unsupported dtype '" + t.dtype + "'");
  }
  for (const json& d : v["shape"]) {
    if (!IsU64(d)) return Bad(where + " has a shape entry that is not a non-negative integer");
    t.shape.push_back(d.get<uint64_t>());
  }
  const std::optional<uint64_t> data_bytes = TensorDataBytes(t.element_bytes, t.shape);
  if (!data_bytes) return Bad(where + " shape " + ShapeToString(t.shape) + " of " + t.dtype + " overflows 64 bits");
  const uint64_t bytes = *data_bytes;
  const json& off = v["data_offsets"];
  if (!IsU64(off[0]) || !IsU64(off[1])) return Bad(where + " data_offsets are not non-negative integers");
  uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end) return Bad(where + " data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
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

Result<SafetensorsHeader> ParseSafetensorsHeader(std::span<const std::byte> prefix, uint64_t file_size) {
  ENGRAM_ASSIGN_OR_RETURN(uint64_t n, SafetensorsHeaderLength(prefix, file_size));
  if (prefix.size() < 8 + n) return Status::InvalidArgument("safetensors header: buffer holds fewer than 8 + N bytes");
  const char* text = reinterpret_cast<const char*>(prefix.data() + 8);
  if (text[0] != '{') return Bad("JSON does not start with '{'");
  auto parsed = ParseBoundedJson(std::string_view(text, n));
  if (!parsed.ok()) return Bad(parsed.status().message());
  const json doc = std::move(parsed).value();
  if (!doc.is_object()) return Bad("JSON is not an object");

  SafetensorsHeader h;
  h.header_bytes = n;
  h.data_start = 8 + n;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return Bad("__metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) return Bad("__metadata__ value '" + m.key() + "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    ENGRAM_ASSIGN_OR_RETURN(TensorInfo t, ParseTensor(it.key(), it.value(), h.data_start, file_size));
    h.tensors.push_back(std::move(t));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.data_offset < b.data_offset; });
  for (size_t i = 1; i < h.tensors.size(); ++i) {
    const TensorInfo& prev = h.tensors[i - 1];
    if (h.tensors[i].data_offset < prev.data_offset + prev.data_bytes) {
      return Bad("tensors '" + prev.name + "' and '" + h.tensors[i].name + "' overlap");
    }
  }
  return h;
}

Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  ENGRAM_ASSIGN_OR_RETURN(int raw_fd, fileutil::OpenReadOnly(path));
  fileutil::ScopedFd fd(raw_fd);
  ENGRAM_ASSIGN_OR_RETURN(uint64_t size, fileutil::FileSize(fd.get(), path));
  std::byte first8[8] = {};
  if (size >= 8) ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd.get(), first8, 0, path));
  auto n = SafetensorsHeaderLength(first8, size);
  if (!n.ok()) return n.status().WithContext(path);
  std::vector<std::byte> prefix(8 + *n);
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd.get(), prefix, 0, path));
  auto h = ParseSafetensorsHeader(prefix, size);
  if (!h.ok()) return h.status().WithContext(path);
  return h;
}

}  // namespace engram
