#include "src/tablegen/table_generator.h"

#include <sys/statvfs.h>

#include <filesystem>

#include "src/tablegen/row_generator.h"
#include "storage/table_format.h"
#include "storage/table_writer.h"

namespace engram {

std::optional<uint64_t> GeneratorSeed(const nlohmann::json& metadata) {
  if (!metadata.is_object()) return std::nullopt;
  const auto generator = metadata.find("generator");
  if (generator == metadata.end() || !generator->is_object()) return std::nullopt;
  const auto seed = generator->find("seed");
  if (seed == generator->end() || !seed->is_number_unsigned()) return std::nullopt;
  return seed->get<uint64_t>();
}

Status GenerateTable(const std::string& path, const GenerateTableOptions& options,
                     const std::function<void(uint64_t, uint64_t)>& progress) {
  ENGRAM_RETURN_IF_ERROR(CheckTableHasRows(options.rows));
  TableWriterOptions w;
  w.record_bytes = options.record_bytes;
  w.metadata = options.metadata.is_object() ? options.metadata : nlohmann::json::object();
  w.metadata["generator"] = {{"kind", "engram-gen"}, {"seed", options.seed}};
  w.sync = options.sync;
  if (options.checksum_salt) w.checksum_salt = *options.checksum_salt;
  // The writer checks the table's size only when it writes the header, at
  // the end: check it before generating anything, so an impossible size
  // (overflowing 64 bits) or one the disk cannot hold fails in a moment, not
  // after hours of writing or a full disk.
  ENGRAM_ASSIGN_OR_RETURN(TableHeader planned,
                          MakeTableHeader(options.record_bytes, options.rows, w.metadata.dump().size(), 0, 0));
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) == 0) {
    const unsigned __int128 free_bytes = static_cast<unsigned __int128>(fs.f_bavail) * fs.f_frsize;
    if (planned.file_bytes > free_bytes) {
      return Status::ResourceExhausted("generate table: " + path + " would take " + std::to_string(planned.file_bytes) +
                                       " bytes; " + dir.string() + " has " +
                                       std::to_string(static_cast<uint64_t>(free_bytes)) + " free");
    }
  }
  ENGRAM_ASSIGN_OR_RETURN(auto writer, TableWriter::Create(path, std::move(w)));
  // Generate straight into the writer's block buffers (no extra copy); the
  // writer hands full buffers to its background thread.
  const uint64_t total = options.rows * options.record_bytes;
  for (uint64_t r = 0; r < options.rows;) {
    std::span<std::byte> slots = writer->RecordSlots(options.rows - r);
    const uint64_t n = slots.size() / options.record_bytes;
    GenerateRows(options.seed, r, n, options.record_bytes, slots);
    ENGRAM_RETURN_IF_ERROR(writer->CommitRecords(n));
    r += n;
    if (progress && (r % 65536 < n || r == options.rows)) progress(r * options.record_bytes, total);
  }
  return writer->Finish();
}

}  // namespace engram
