#include "storage/table_generator.h"


#include "storage/row_generator.h"
#include "storage/table_writer.h"

namespace engram {

Status GenerateTable(const std::string& path, const GenerateTableOptions& options,
                     const std::function<void(uint64_t, uint64_t)>& progress) {
  if (options.rows == 0) return Status::InvalidArgument("generate table: zero rows");
  TableWriterOptions w;
  w.record_bytes = options.record_bytes;
  w.metadata = options.metadata.is_object() ? options.metadata : nlohmann::json::object();
  w.metadata["generator"] = {{"kind", "engram-gen"}, {"seed", options.seed}};
  w.sync = options.sync;
  if (options.checksum_salt) w.checksum_salt = *options.checksum_salt;
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
