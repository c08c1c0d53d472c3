#include "bench/in_place_benchmark.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "engram/store.h"
#include "storage/file_util.h"
#include "storage/reference_writer.h"
#include "storage/table_converter.h"

namespace engram::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One V4.1-shaped shard of random bytes, streamed: JSON header, weight,
// a BF16 tensor, scale.
Status WriteShard(const std::string& path, uint64_t rows, uint64_t seed) {
  const uint64_t w = rows * 256, s = rows * 8;
  nlohmann::json h = {
      {"__metadata__", {{"format", "pt"}}},
      {"engram.weight", {{"dtype", "F8_E4M3"}, {"shape", {rows, 256}}, {"data_offsets", {0, w}}}},
      {"attn.bf16", {{"dtype", "BF16"}, {"shape", {4}}, {"data_offsets", {w, w + 8}}}},
      {"engram.scale", {{"dtype", "F8_E8M0"}, {"shape", {rows, 8}}, {"data_offsets", {w + 8, w + 8 + s}}}}};
  const std::string json = h.dump();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::FromErrno("create " + path, errno);
  uint64_t n = json.size();
  bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(json.data(), 1, json.size(), f) == json.size();
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> buf(1 << 16);
  for (uint64_t left = w + 8 + s; ok && left > 0;) {
    for (auto& x : buf) x = rng();
    const uint64_t take = std::min<uint64_t>(left, buf.size() * 8);
    ok = std::fwrite(buf.data(), 1, take, f) == take;
    left -= take;
  }
  if (std::fclose(f) != 0 || !ok) return Status::IOError("write " + path);
  return Status::OK();
}

// Every kind gets a row cache of c.cache_bytes: a kind holding the scales in
// memory gets their bytes on top (they come out of its budget).
StoreOptions Options(const InPlaceBenchConfig& c, const std::string& path, double scale_share) {
  StoreOptions o;
  o.tables.push_back({path, "t", 0});
  o.cache_bytes = c.cache_bytes + (scale_share > 0 ? c.rows * 8 : 0);
  o.io_backend = c.io_backend;
  o.in_place_scale_share = scale_share;
  return o;
}

}  // namespace

Result<InPlaceBenchReport> RunInPlaceBenchmark(const InPlaceBenchConfig& c, const ProgressLog& log) {
  if (c.rows == 0 || c.shards == 0 || c.rows_per_gather == 0 || c.opens == 0 || !(c.seconds > 0)) {
    return Status::InvalidArgument("inplace: rows, shards, rows-per-gather, opens and seconds must be positive");
  }
  std::error_code ec;
  std::filesystem::create_directories(c.dir, ec);
  if (ec) return Status::InvalidArgument("inplace: cannot create " + c.dir + ": " + ec.message());
  InPlaceBenchReport report;
  std::vector<std::string> shards;
  for (uint32_t i = 0; i < c.shards; ++i) {
    const uint64_t rows = c.rows / c.shards + (i < c.rows % c.shards ? 1 : 0);
    const std::string p = c.dir + "/model-" + std::to_string(i) + "-of-" + std::to_string(c.shards) + ".safetensors";
    shards.push_back(p);
    ENGRAM_RETURN_IF_ERROR(WriteShard(p, rows, c.seed + i));
    report.shard_bytes += std::filesystem::file_size(p);
  }
  const std::string converted = c.dir + "/converted.engram", reference = c.dir + "/in-place.engram";
  ENGRAM_ASSIGN_OR_RETURN(ConvertSpec spec, SafetensorsConvertSpec(shards, "engram.weight", "engram.scale"));
  ConvertOptions copt;
  auto t0 = Clock::now();
  ENGRAM_RETURN_IF_ERROR(ConvertToTable(spec, converted, copt).status());
  report.convert_seconds = Since(t0);
  t0 = Clock::now();
  ENGRAM_RETURN_IF_ERROR(WriteReferenceTable(spec, reference, copt).status());
  report.reference_seconds = Since(t0);
  report.converted_bytes = std::filesystem::file_size(converted);
  report.reference_bytes = std::filesystem::file_size(reference);
  if (log) log("inplace: shards, converted and in-place tables written in " + c.dir);

  struct Kind {
    std::string name, path;
    double share;
  };
  const std::vector<Kind> kinds = {
      {"converted", converted, 0.0}, {"in_place_scales_held", reference, 1.0}, {"in_place_scales_read", reference, 0.0}};
  for (const Kind& k : kinds) report.kinds.push_back({k.name});

  // Open time: the median of `opens` fresh stores.
  for (size_t i = 0; i < kinds.size(); ++i) {
    std::vector<double> ms;
    for (uint32_t n = 0; n < c.opens; ++n) {
      for (const auto& s : shards) fileutil::DropFromPageCache(s);
      fileutil::DropFromPageCache(kinds[i].path);
      auto t = Clock::now();
      auto store = Store::Open(Options(c, kinds[i].path, kinds[i].share));
      if (!store.ok()) return store.status();
      ms.push_back(Since(t) * 1e3);
      if (report.io_description.empty()) report.io_description = (*store)->io_description();
      report.record_bytes = (*store)->record_bytes(0);
    }
    std::sort(ms.begin(), ms.end());
    report.kinds[i].open_ms = ms[ms.size() / 2];
  }

  // Miss path: one store per kind, open together; the kinds take turns in
  // slices of ~20 ms so that a busy host's load falls on them alike. The
  // caches are far smaller than the table, so nearly every row misses
  // (the misses are counted).
  std::vector<std::unique_ptr<Store>> stores;
  for (const Kind& k : kinds) {
    auto store = Store::Open(Options(c, k.path, k.share));
    if (!store.ok()) return store.status();
    stores.push_back(std::move(store).value());
  }
  std::mt19937_64 rng(c.seed);
  constexpr double kSlice = 0.02;
  std::vector<uint64_t> ids(c.rows_per_gather);
  std::vector<std::byte> dst(ids.size() * report.record_bytes);
  const uint64_t slices = std::max<uint64_t>(1, static_cast<uint64_t>(c.seconds / kSlice));
  for (uint64_t n = 0; n < slices; ++n) {
    for (size_t j = 0; j < kinds.size(); ++j) {
      const size_t i = (j + n) % kinds.size();  // each kind leads in turn
      InPlaceKind& r = report.kinds[i];
      const auto start = Clock::now();
      double elapsed = 0;
      while (elapsed < kSlice) {
        for (auto& id : ids) id = rng() % c.rows;
        GatherResult g = stores[i]->Gather(0, ids, dst.data(), report.record_bytes);
        if (!g.status.ok()) return g.status;
        r.rows += g.rows;
        r.misses += g.misses;
        elapsed = Since(start);
      }
      r.seconds += elapsed;
    }
    if (log && (n + 1) % 50 == 0) log("inplace: " + std::to_string(n + 1) + " of " + std::to_string(slices) + " slices");
  }
  for (size_t i = 0; i < kinds.size(); ++i) {
    TableStats s = stores[i]->Stats(0);
    report.kinds[i].io_reads = s.io_reads;
    report.kinds[i].io_bytes = s.io_bytes;
  }
  return report;
}

}  // namespace engram::bench
