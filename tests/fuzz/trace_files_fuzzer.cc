// Fuzz target: the user-provided trace and token files and request specs of
// engram-replay / engram-hash (src/replay/trace_files.*, request_spec.*,
// gather_trace.*, TokenMap::FromFile in src/ngram/).
//
// Input: one control byte, then the file's bytes. The same bytes are read as
// a row trace (text, one decimal row ID per line), as a token file and as a
// token map (little-endian uint32); the first line is also parsed as a
// `--request FILE[@SPLIT]` spec whose split cuts the tokens into gathers,
// hashed with a small fixed layout (through the token map when the control
// byte's bit 0 is set). The store's trace format (src/store/trace_writer.h)
// has no reader in this tree, so there is nothing of it to fuzz.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engram/hasher.h"
#include "src/replay/gather_trace.h"
#include "src/replay/request_spec.h"
#include "src/replay/trace_files.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {
namespace {

constexpr char kLayout[] =
    R"({"layer_id":0,"orders":[2,3],"heads":2,"pad_id":0,"multipliers":["1","3","5"],)"
    R"("primes":[[2,3],[5,7]],"offsets":[[0,2],[5,10]],"total_rows":17})";

}  // namespace

int FuzzTraceFiles(const uint8_t* data, size_t size) {
  static MemFile file("engram-fuzz-trace");
  static const EngramHashLayout layout = EngramHashLayout::FromJson(kLayout).value();
  if (size < 1) return 0;
  const uint8_t ctrl = data[0];
  ++data;
  --size;
  file.Set(data, size);

  // Row trace: accepted only if every line is a decimal ID; must round-trip.
  auto rows = replay::ReadRowTrace(file.path());
  if (rows.ok()) {
    replay::GatherTrace trace = replay::TraceFromRows(*rows, "fuzz");
    FUZZ_CHECK(trace.gathers() == rows->size() && trace.requests() == 1);
    FUZZ_CHECK(replay::WriteRowTrace(file.path(), *rows).ok());
    auto again = replay::ReadRowTrace(file.path());
    FUZZ_CHECK(again.ok() && *again == *rows);
    file.Set(data, size);
  } else {
    FUZZ_CHECK(!rows.status().message().empty());
  }

  auto tokens = replay::ReadTokenFile(file.path());
  FUZZ_CHECK(tokens.ok() == (size % 4 == 0));
  auto map = TokenMap::FromFile(file.path());
  FUZZ_CHECK(map.ok() == (size % 4 == 0 && size > 0));

  // The first line as a request spec.
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string_view line = text.substr(0, std::min(text.find('\n'), size_t{256}));
  auto spec = replay::RequestSpec::Parse(line);
  if (!spec.ok() || !tokens.ok()) return 0;
  FUZZ_CHECK(!spec->path.empty());
  auto split = replay::SplitSpec::Parse(spec->split.ToString());
  FUZZ_CHECK(split.ok() && split->kind == spec->split.kind && split->value == spec->split.value);
  const std::vector<uint32_t>& t = *tokens;
  const std::vector<size_t> bounds = spec->split.Boundaries(t.size());
  FUZZ_CHECK(!bounds.empty() && bounds.front() == (t.empty() ? t.size() : 0) && bounds.back() == t.size());
  for (size_t i = 1; i < bounds.size(); ++i) FUZZ_CHECK(bounds[i] > bounds[i - 1]);  // no empty chunks

  std::shared_ptr<const TokenMap> token_map;
  if ((ctrl & 1) && map.ok()) token_map = std::make_shared<TokenMap>(std::move(map).value());
  auto hasher = NgramHasher::Create(layout, token_map);
  FUZZ_CHECK(hasher.ok());
  std::vector<std::vector<uint32_t>> requests{t};
  std::vector<replay::SplitSpec> splits{spec->split};
  std::vector<std::string> names{spec->path};
  auto trace = replay::BuildTraceFromTokens(*hasher, requests, splits, names);
  if (!trace.ok()) {
    FUZZ_CHECK(token_map != nullptr && trace.status().code() == StatusCode::kOutOfRange);
    return 0;
  }
  FUZZ_CHECK(trace->gathers() == bounds.size() - 1 && trace->requests() == 1);
  for (uint64_t r : trace->rows) FUZZ_CHECK(r < layout.total_rows);
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzTraceFiles)
