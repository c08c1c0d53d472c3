// EngramHashLayout <-> nlohmann::json, for internal code that already holds a
// parsed JSON object (a table's metadata embeds the layout of its layer).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "engram/hasher.h"

namespace engram {

// `j` is a layout document (with "layers") or one layer object; see
// EngramHashLayout::FromJson. The result is validated.
Result<EngramHashLayout> LayoutFromJson(const nlohmann::json& j, uint32_t layer_index = 0);
// One layer object, multipliers as decimal strings.
nlohmann::json LayoutToJson(const EngramHashLayout& layout);

}  // namespace engram
