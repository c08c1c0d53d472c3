// The Engram hash layout of one layer, as embedded in a table's metadata
// ("hash_layout"), so a runtime can turn token n-grams into row IDs of this
// table from the table file alone (plus the tokenizer's compressed-token map,
// identified by its digest).
//
// Source: a layout file such as tests/fixtures/engram-hash/layout-v41.json
// (format "engram-hash-layout/1"): global fields plus one object per layer.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engram/status.h"

namespace engram {

// A layout file is a few KiB (one layer is a few hundred primes); a larger
// file than this is not one.
inline constexpr uint64_t kMaxLayoutFileBytes = 64ull << 20;

// Reads `path` (a regular file of at most kMaxLayoutFileBytes) and returns the object for the layer whose layer_id is
// `layer_id`, merged with the file's global fields (everything but "layers"),
// plus "layout_file_format". InvalidArgument names the available layer IDs if
// there is no such layer.
Result<nlohmann::json> LoadLayerHashLayout(const std::string& path, int64_t layer_id);

// Same, from an already parsed layout document.
Result<nlohmann::json> SelectLayerHashLayout(const nlohmann::json& layout_file, int64_t layer_id);

// Checks that an embedded layer layout is usable with a table of `row_count`
// rows: it must parse as an EngramHashLayout (include/engram/hasher.h: the
// same parser and checks a runtime's hasher uses -- layer_id, orders, heads,
// pad_id, multipliers as decimal strings or integers, primes that are prime,
// offsets that are their exclusive prefix sum, total_rows their sum), and
// total_rows must equal row_count. Errors name the field.
Status ValidateHashLayout(const nlohmann::json& layer, uint64_t row_count);

}  // namespace engram
