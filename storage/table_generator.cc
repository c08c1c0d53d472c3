#include "storage/table_generator.h"

#include <algorithm>
#include <vector>

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
  ENGRAM_ASSIGN_OR_RETURN(auto writer, TableWriter::Create(path, std::move(w)));
  // ~8 MiB batches: large sequential writes, bounded memory.
  const uint64_t batch_rows = std::max<uint64_t>(1, (8u << 20) / options.record_bytes);
  std::vector<std::byte> buf;
  const uint64_t total = options.rows * options.record_bytes;
  for (uint64_t r = 0; r < options.rows; r += batch_rows) {
    const uint64_t n = std::min(batch_rows, options.rows - r);
    buf.resize(n * options.record_bytes);
    GenerateRows(options.seed, r, n, options.record_bytes, buf);
    ENGRAM_RETURN_IF_ERROR(writer->AppendRecords(buf));
    if (progress) progress((r + n) * options.record_bytes, total);
  }
  return writer->Finish();
}

}  // namespace engram
