// Fuzz target: the hash layout JSON (EngramHashLayout::FromJson in
// include/engram/hasher.h, src/ngram/) and the table-metadata layout checks
// (SelectLayerHashLayout / ValidateHashLayout in storage/embedded_hash_layout.*).
//
// Input: one control byte (layer index and the row count to validate
// against), then the JSON text. An accepted layout must round-trip through
// ToJson, build a hasher, and hash a few tokens to row IDs inside its rows.
#include <cstring>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engram/hasher.h"
#include "storage/embedded_hash_layout.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {

int FuzzHashLayout(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t ctrl = data[0];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  auto layout = EngramHashLayout::FromJson(text, ctrl & 3);
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded()) {
    auto layer = SelectLayerHashLayout(doc, static_cast<int64_t>(ctrl & 15) - 1);
    const nlohmann::json& candidate = layer.ok() ? *layer : doc;
    uint64_t rows = layout.ok() ? layout->total_rows : 0;
    if (ctrl & 0x80) rows += 1;
    Status s = ValidateHashLayout(candidate, rows);
    (void)s;
  }
  if (!layout.ok()) {
    FUZZ_CHECK(!layout.status().message().empty());
    return 0;
  }
  const EngramHashLayout& l = *layout;
  FUZZ_CHECK(l.Validate().ok());
  auto again = EngramHashLayout::FromJson(l.ToJson());
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == l);
  // The embedded form must pass the table check against its own row count
  // (one parser for both since the table check moved onto the hasher's; the
  // table check used to refuse negative multipliers the hasher accepts).
  nlohmann::json embedded = nlohmann::json::parse(l.ToJson());
  FUZZ_CHECK(ValidateHashLayout(embedded, l.total_rows).ok());
  FUZZ_CHECK(!ValidateHashLayout(embedded, l.total_rows + 1).ok());

  auto hasher = NgramHasher::Create(l);
  FUZZ_CHECK(hasher.ok());
  std::vector<uint32_t> tokens;
  for (size_t i = 0; i + 4 <= text.size() && tokens.size() < 16; i += 4) {
    uint32_t t;
    std::memcpy(&t, text.data() + i, 4);
    tokens.push_back(t);
  }
  if (tokens.empty()) tokens.push_back(ctrl);
  auto rows = hasher->Hash(tokens);
  FUZZ_CHECK(rows.ok());
  FUZZ_CHECK(rows->size() == tokens.size() * l.rows_per_token());
  for (uint64_t r : *rows) FUZZ_CHECK(r < l.total_rows);
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzHashLayout)
