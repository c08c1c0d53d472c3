#include "storage/embedded_hash_layout.h"

#include "storage/bounded_json.h"
#include "storage/file_util.h"
#include "storage/input_files.h"
#include "storage/layout_json.h"

namespace engram {

using nlohmann::json;

namespace {

Status Bad(const std::string& what) { return Status::InvalidArgument("hash layout: " + what); }

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
  ENGRAM_ASSIGN_OR_RETURN(std::string text, fileutil::ReadRegularFile(path, kMaxLayoutFileBytes, "hash layout file",
                                                [&](int fd) { RecordInputFile(fd, path, "a hash layout file"); }));
  auto doc = ParseBoundedJson(text);
  if (!doc.ok()) return doc.status().WithContext(path);
  auto r = SelectLayerHashLayout(*doc, layer_id);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

Status ValidateHashLayout(const json& layer, uint64_t row_count) {
  // The hasher's parser is the one definition of a valid layout: a table
  // accepts exactly the layouts a runtime can build a hasher from.
  // A "layers" member would make the parser read a whole layout document
  // and check one of its layers instead of this object.
  if (layer.is_object() && layer.contains("layers")) return Bad("a layer object must not contain \"layers\"");
  auto parsed = LayoutFromJson(layer);
  if (!parsed.ok()) return parsed.status();
  if (parsed->total_rows != row_count) {
    return Bad("total_rows " + std::to_string(parsed->total_rows) + " does not match the table's " +
               std::to_string(row_count) + " rows");
  }
  return Status::OK();
}

}  // namespace engram
