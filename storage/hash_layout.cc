#include "storage/hash_layout.h"

#include <fstream>
#include <sstream>

namespace engram {

using nlohmann::json;

namespace {

Status Bad(const std::string& what) { return Status::InvalidArgument("hash layout: " + what); }

bool IsUnsigned(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); }

// A multiplier: a positive int64 as a decimal string (the layout file's form,
// since JSON readers may lose precision above 2^53) or as an integer.
bool ValidMultiplier(const json& v) {
  if (IsUnsigned(v)) return v.get<uint64_t>() > 0 && v.get<uint64_t>() <= uint64_t{INT64_MAX};
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s.size() > 19) return false;
  uint64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + static_cast<uint64_t>(c - '0');
  }
  return x > 0 && x <= uint64_t{INT64_MAX};
}

}  // namespace

Result<json> SelectLayerHashLayout(const json& doc, int64_t layer_id) {
  if (!doc.is_object() || !doc.contains("layers") || !doc["layers"].is_array()) {
    return Bad("the layout file has no \"layers\" array");
  }
  std::string available;
  for (const json& layer : doc["layers"]) {
    if (!layer.is_object() || !layer.contains("layer_id") || !layer["layer_id"].is_number_integer()) continue;
    int64_t id = layer["layer_id"].get<int64_t>();
    if (id == layer_id) {
      json out = layer;
      for (auto it = doc.begin(); it != doc.end(); ++it) {
        if (it.key() == "layers" || it.key() == "format") continue;
        if (!out.contains(it.key())) out[it.key()] = it.value();
      }
      if (doc.contains("format")) out["layout_file_format"] = doc["format"];
      return out;
    }
    if (!available.empty()) available += ", ";
    available += std::to_string(id);
  }
  return Bad("no layer with layer_id " + std::to_string(layer_id) + " (available: " + available + ")");
}

Result<json> LoadLayerHashLayout(const std::string& path, int64_t layer_id) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open hash layout file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  json doc = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::InvalidArgument(path + ": not valid JSON");
  auto r = SelectLayerHashLayout(doc, layer_id);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

Status ValidateHashLayout(const json& layer, uint64_t row_count) {
  if (!layer.is_object()) return Bad("not a JSON object");
  for (const char* key : {"orders", "heads", "pad_id", "multipliers", "primes", "offsets", "total_rows"}) {
    if (!layer.contains(key)) return Bad(std::string("missing field \"") + key + "\"");
  }
  const json& orders = layer["orders"];
  if (!orders.is_array() || orders.empty()) return Bad("\"orders\" must be a non-empty array");
  uint64_t max_order = 0;
  for (const json& o : orders) {
    if (!IsUnsigned(o) || o.get<uint64_t>() < 1 || o.get<uint64_t>() > 64) {
      return Bad("\"orders\" entries must be integers in [1, 64]");
    }
    max_order = std::max(max_order, o.get<uint64_t>());
  }
  if (!IsUnsigned(layer["heads"]) || layer["heads"].get<uint64_t>() == 0 || layer["heads"].get<uint64_t>() > 4096) {
    return Bad("\"heads\" must be an integer in [1, 4096]");
  }
  uint64_t heads = layer["heads"].get<uint64_t>();
  if (!IsUnsigned(layer["pad_id"])) return Bad("\"pad_id\" must be a non-negative integer");
  const json& mult = layer["multipliers"];
  if (!mult.is_array() || mult.size() < max_order) {
    return Bad("\"multipliers\" must be an array of at least " + std::to_string(max_order) + " entries");
  }
  for (size_t k = 0; k < mult.size(); ++k) {
    if (!ValidMultiplier(mult[k])) {
      return Bad("multipliers[" + std::to_string(k) + "] is not a positive int64 (decimal string or integer)");
    }
  }
  if (!IsUnsigned(layer["total_rows"])) return Bad("\"total_rows\" must be a non-negative integer");
  uint64_t total = layer["total_rows"].get<uint64_t>();
  const json& primes = layer["primes"];
  const json& offsets = layer["offsets"];
  if (!primes.is_array() || primes.size() != orders.size() || !offsets.is_array() ||
      offsets.size() != orders.size()) {
    return Bad("\"primes\" and \"offsets\" must have one row per order (" + std::to_string(orders.size()) + ")");
  }
  for (size_t o = 0; o < orders.size(); ++o) {
    if (!primes[o].is_array() || primes[o].size() != heads || !offsets[o].is_array() ||
        offsets[o].size() != heads) {
      return Bad("primes[" + std::to_string(o) + "] and offsets[" + std::to_string(o) + "] must have " +
                 std::to_string(heads) + " entries (one per head)");
    }
    for (size_t h = 0; h < heads; ++h) {
      const json& p = primes[o][h];
      const json& off = offsets[o][h];
      std::string at = "[" + std::to_string(o) + "][" + std::to_string(h) + "]";
      if (!IsUnsigned(p) || p.get<uint64_t>() == 0) return Bad("primes" + at + " must be a positive integer");
      if (!IsUnsigned(off)) return Bad("offsets" + at + " must be a non-negative integer");
      uint64_t end = 0;
      if (__builtin_add_overflow(off.get<uint64_t>(), p.get<uint64_t>(), &end) || end > total) {
        return Bad("offsets" + at + " + primes" + at + " exceeds total_rows " + std::to_string(total));
      }
    }
  }
  if (total != row_count) {
    return Bad("total_rows " + std::to_string(total) + " does not match the table's " + std::to_string(row_count) +
               " rows");
  }
  return Status::OK();
}

}  // namespace engram
