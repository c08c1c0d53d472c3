// engram-inspect: look inside an Engram table file.
//   engram-inspect FILE | info FILE      header fields and metadata
//   engram-inspect verify FILE           check every block checksum (--fingerprint: and the
//                                        shards' fingerprints, for a reference table)
//   engram-inspect dump FILE --rows A,B  record bytes (hex, or --raw to stdout)
// FILE may be a table in a Redis Cluster: redis://HOST:PORT[,...]/NAME
// (storage/redis/remote_table.h); its blocks are fetched and checked alike.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "storage/bounded_json.h"
#include "src/common/logging.h"
#include "src/common/progress_meter.h"
#include "src/common/stdout_written.h"
#include "storage/redis/remote_table.h"
#include "storage/table_file.h"

namespace {

int Fail(const engram::Status& s) {
  std::fprintf(stderr, "engram-inspect: %s\n", s.ToString().c_str());
  return 1;
}

// A table that does not open: exit 2, as for a usage error.
int BadInput(const engram::Status& s) {
  std::fprintf(stderr, "engram-inspect: %s\n", s.ToString().c_str());
  return 2;
}

// 0 once everything printed has reached stdout, else a failure (a full disk
// or a closed pipe must not look like success).
int Flushed() {
  return engram::StdoutWritten() ? 0 : Fail(engram::Status::IOError("write to stdout failed"));
}

std::string Hex64(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

int Info(const engram::TableFile& t, bool json_only, const engram::redis::RemoteTable* remote) {
  // Laid out from the stored (already checked) text, not from a parsed
  // tree: a tree of a large metadata section costs over ten times its text.
  auto print_json = [&](int indent) {
    engram::IndentJson(t.metadata_text(), indent,
                       [](std::string_view piece) { std::fwrite(piece.data(), 1, piece.size(), stdout); });
    std::printf("\n");
  };
  if (json_only) {
    print_json(1);
    return Flushed();
  }
  const engram::TableHeader& h = t.header();
  std::printf("%s%s\n", remote ? "table:           " : "file:            ", t.path().c_str());
  if (remote) {
    std::string masters;
    for (const std::string& m : remote->client->Masters()) masters += (masters.empty() ? "" : ", ") + m;
    std::printf("kind:            in a Redis Cluster (masters %s), fingerprint 0x%s\n", masters.c_str(),
                engram::redis::FingerprintHex(t.fingerprint()).c_str());
  }
  std::printf("format version:  %u\n", h.version);
  if (const engram::ReferenceTable* ref = t.reference()) {
    const engram::ReferenceLayout& l = ref->layout();
    std::printf("kind:            reference table (in place): rows served from %zu safetensors shard(s)\n",
                l.shards().size());
    for (const engram::ReferenceShard& s : l.shards()) {
      std::printf("  shard:         %s (%llu rows, %llu bytes)\n", s.path.c_str(),
                  static_cast<unsigned long long>(s.rows), static_cast<unsigned long long>(s.size));
    }
    std::printf("referenced:      %llu bytes (weight %u + scale %u bytes a row), %llu block checksums\n",
                static_cast<unsigned long long>(l.referenced_bytes()), l.weight_row_bytes(), l.scale_row_bytes(),
                static_cast<unsigned long long>(l.unit_count()));
  }
  std::printf("record_bytes:    %u\n", h.record_bytes);
  if (!t.is_reference()) {
    std::printf("rows_per_block:  %u (block %u bytes, %u-byte XXH3-64 trailer)\n", h.rows_per_block, h.block_size,
                engram::kBlockTrailerBytes);
  }
  std::printf("row_count:       %llu\n", static_cast<unsigned long long>(h.row_count));
  if (const engram::RankShard* r = t.rank_shard()) {
    std::string slots;
    for (uint32_t slot : r->slots) slots += (slots.empty() ? "" : ", ") + std::to_string(slot);
    std::printf("rank_shard:      rank %u of %u (strided), slots [%s] of a %llu-row table, manifest_id %s\n", r->rank,
                r->ranks, slots.c_str(), static_cast<unsigned long long>(r->source_rows),
                Hex64(r->manifest_id).c_str());
  }
  std::printf("block_count:     %llu\n", static_cast<unsigned long long>(h.block_count));
  std::printf("data section:    offset %llu, %llu bytes\n", static_cast<unsigned long long>(h.data_offset),
              static_cast<unsigned long long>(h.data_bytes));
  std::printf("metadata:        offset %llu, %llu bytes, xxh3 %s\n",
              static_cast<unsigned long long>(h.metadata_offset), static_cast<unsigned long long>(h.metadata_bytes),
              Hex64(h.metadata_xxh3).c_str());
  std::printf("checksum_salt:   %s\n", Hex64(h.checksum_salt).c_str());
  std::printf("file_bytes:      %llu\n", static_cast<unsigned long long>(h.file_bytes));
  std::printf("flags:           0x%x\n", h.flags);
  std::printf("metadata JSON:\n");
  print_json(2);
  return Flushed();
}

int Verify(const engram::TableFile& t, bool progress, const engram::redis::RemoteTable* remote) {
  engram::ProgressMeter meter("verify", t.header().data_bytes, progress);
  auto update = [&](uint64_t done, uint64_t) { meter.Update(done * engram::kTableBlockSize); };
  engram::Status s = remote ? engram::redis::VerifyRemoteTable(*remote, update) : t.VerifyAll(update);
  meter.Finish();
  if (!s.ok()) return Fail(s);
  std::printf("OK: %llu blocks, %llu rows verified\n", static_cast<unsigned long long>(t.block_count()),
              static_cast<unsigned long long>(t.row_count()));
  return Flushed();
}

// "5,7,10-12" -> 5 7 10 11 12
engram::Result<std::vector<uint64_t>> ParseRows(const std::vector<std::string>& specs) {
  std::vector<uint64_t> rows;
  for (const std::string& spec : specs) {
    auto num = [&](const std::string& s) -> engram::Result<uint64_t> {
      if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 19) {
        return engram::Status::InvalidArgument("bad row '" + spec + "' (expected N or A-B)");
      }
      return std::stoull(s);
    };
    auto dash = spec.find('-');
    if (dash == std::string::npos) {
      ENGRAM_ASSIGN_OR_RETURN(uint64_t r, num(spec));
      rows.push_back(r);
    } else {
      ENGRAM_ASSIGN_OR_RETURN(uint64_t a, num(spec.substr(0, dash)));
      ENGRAM_ASSIGN_OR_RETURN(uint64_t b, num(spec.substr(dash + 1)));
      if (b < a || b - a >= 1'000'000) return engram::Status::InvalidArgument("bad row range '" + spec + "'");
      for (uint64_t r = a; r <= b; ++r) rows.push_back(r);
    }
  }
  return rows;
}

// A row of a table in a Redis Cluster: its block fetched and checked.
engram::Status ReadRemoteRow(const engram::redis::RemoteTable& remote, uint64_t row, std::span<std::byte> dst) {
  const engram::TableFile& t = *remote.file;
  ENGRAM_RETURN_IF_ERROR(t.CheckRow(row).WithContext(t.path()));
  std::vector<std::byte> block(engram::kTableBlockSize);
  ENGRAM_RETURN_IF_ERROR(engram::redis::ReadRemoteBlocks(remote, t.BlockOfRow(row), block));
  std::memcpy(dst.data(), block.data() + t.RowOffsetInBlock(row), t.record_bytes());
  return engram::Status::OK();
}

int Dump(const engram::TableFile& t, const std::vector<std::string>& specs, bool raw,
         const engram::redis::RemoteTable* remote) {
  auto rows = ParseRows(specs);
  if (!rows.ok()) return Fail(rows.status());
  std::vector<std::byte> rec(t.record_bytes());
  for (uint64_t r : *rows) {
    if (auto s = remote ? ReadRemoteRow(*remote, r, rec) : t.ReadRow(r, rec); !s.ok()) return Fail(s);
    if (raw) {
      if (std::fwrite(rec.data(), 1, rec.size(), stdout) != rec.size()) {
        return Fail(engram::Status::IOError("write to stdout failed"));
      }
      continue;
    }
    if (t.is_reference()) {
      std::printf("row %llu:\n", static_cast<unsigned long long>(r));
    } else {
      std::printf("row %llu (block %llu, offset %u):\n", static_cast<unsigned long long>(r),
                  static_cast<unsigned long long>(t.BlockOfRow(r)), t.RowOffsetInBlock(r));
    }
    for (size_t i = 0; i < rec.size(); i += 32) {
      std::printf("  %04zx:", i);
      for (size_t j = i; j < rec.size() && j < i + 32; ++j) std::printf(" %02x", static_cast<unsigned>(rec[j]));
      std::printf("\n");
    }
  }
  return Flushed();
}

}  // namespace

int main(int argc, char** argv) {
  // "engram-inspect FILE" means "engram-inspect info FILE".
  std::vector<char*> args(argv, argv + argc);
  static char info_word[] = "info";
  if (argc >= 2 && argv[1][0] != '-' && std::strcmp(argv[1], "info") != 0 && std::strcmp(argv[1], "verify") != 0 &&
      std::strcmp(argv[1], "dump") != 0) {
    args.insert(args.begin() + 1, info_word);
  }
  CLI::App app{"Inspect an Engram table file: header, metadata, block checksums, rows."};
  app.require_subcommand(1);
  std::string file;
  bool json_only = false, progress = false, raw = false, hex = false, fingerprint = false;
  std::vector<std::string> row_specs;
  auto* info = app.add_subcommand("info", "print the header fields and the metadata JSON (the default)");
  info->add_option("FILE", file, "table file, or redis://HOST:PORT[,...]/NAME")->required();
  info->add_flag("--metadata-json", json_only, "print only the metadata JSON");
  auto* verify = app.add_subcommand("verify", "check every block checksum; non-zero exit names the first bad block");
  verify->add_option("FILE", file, "table file, or redis://HOST:PORT[,...]/NAME")->required();
  verify->add_flag("--progress", progress, "show a progress bar even when stderr is not a terminal");
  verify->add_flag("--fingerprint", fingerprint,
                   "reference table: also check each shard's fingerprint (size and mtime are always checked)");
  auto* dump = app.add_subcommand("dump", "print the records of the given rows, in the order given");
  dump->add_option("FILE", file, "table file, or redis://HOST:PORT[,...]/NAME")->required();
  dump->add_option("--rows", row_specs, "rows: A,B,C or ranges A-B")->delimiter(',')->required();
  auto* raw_flag = dump->add_flag("--raw", raw, "raw record bytes to stdout");
  dump->add_flag("--hex", hex, "hex dump (the default)")->excludes(raw_flag);
  std::string log_level;
  engram::AddLogLevelOption(app, log_level);
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!engram::ConfigureToolLogging("engram-inspect", log_level)) return 2;

  if (engram::redis::IsRedisUrl(file)) {
    auto remote = engram::redis::OpenRemoteTable(file);
    if (!remote.ok()) return BadInput(remote.status());
    if (*verify) return Verify(*remote->file, progress, &*remote);
    if (*dump) return Dump(*remote->file, row_specs, raw, &*remote);
    return Info(*remote->file, json_only, &*remote);
  }
  engram::ReferenceOpenOptions open_options;
  open_options.check_fingerprints = fingerprint;
  auto table = engram::TableFile::Open(file, open_options);
  // A table that does not open (damaged, a missing or replaced shard) is bad input.
  if (!table.ok()) return BadInput(table.status());
  if (*verify) return Verify(**table, progress, nullptr);
  if (*dump) return Dump(**table, row_specs, raw, nullptr);
  return Info(**table, json_only, nullptr);
}
