// Conversion of checkpoint tensors (safetensors or .npy) into an Engram table.
//
// A table row is one row (dimension 0) of the weight tensor, optionally
// followed by the same row of a scale tensor: for DeepSeek V4.1,
// weight[rows, 256] F8_E4M3 + scale[rows, 8] UE8M0 -> 264-byte records, so a
// row and its scales come back in one read. Other weights (BF16, F16, F32,
// ...) are copied as stored. Several shards are concatenated in order.
//
// Streaming: each shard is read in chunks of about options.chunk_bytes, so
// memory stays bounded whatever the tensor size.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engram/status.h"
#include "storage/input_files.h"
#include "storage/table_format.h"
#include "storage/table_writer.h"
#include "storage/tensor_info.h"

namespace engram {

// One tensor in one file.
struct TensorSlice {
  std::string path;
  TensorInfo tensor;
};

struct ConvertSpec {
  std::string source_kind;          // "safetensors" or "npy" (recorded in metadata)
  std::vector<TensorSlice> weight;  // one per shard, rows appended in this order
  std::vector<TensorSlice> scale;   // empty, or one per weight shard with the same row count
};

struct ConvertOptions {
  // A layer layout from LoadLayerHashLayout, embedded as metadata "hash_layout"
  // after checking it against the converted row count.
  std::optional<nlohmann::json> hash_layout;
  size_t chunk_bytes = 8u << 20;
  // Called after each chunk with rows done so far and the total.
  std::function<void(uint64_t rows_done, uint64_t rows_total)> progress;
  TableWriterOptions writer;  // record_bytes and metadata are filled in by the converter
  std::string created_by = "engram-convert";
};

// Looks up `weight_name` (and `scale_name` if not empty) in each safetensors
// file. NotFound names the file and lists a few tensors it does have.
Result<ConvertSpec> SafetensorsConvertSpec(const std::vector<std::string>& files, const std::string& weight_name,
                                           const std::string& scale_name);

// One .npy file per weight shard, and optionally one per scale shard.
Result<ConvertSpec> NpyConvertSpec(const std::vector<std::string>& weight_files,
                                   const std::vector<std::string>& scale_files);

// Checks shapes (same row layout across shards, scale rows == weight rows,
// record size in [1, kMaxRecordBytes]) and returns the record size.
Result<uint32_t> ConvertRecordBytes(const ConvertSpec& spec);

// Checks, before anything is read or written, that out_path can receive the
// table: `inputs` are recorded as inputs of the process for the check, then
// out_path passes CheckOutputPath (storage/input_files.h): InvalidArgument
// if it is a directory or another file that is not a regular one (the final
// rename would fail only after all the data was written, or replace the
// node), or an input (the same file by device and inode, whatever the name:
// the rename would replace the input) -- one of `inputs` or any file the
// process reads.
Status CheckConvertOutput(const std::string& out_path, const std::vector<std::string>& inputs);

// Records every file of `spec` as an input of the process ("a source of this
// conversion") while the returned holds live: a converter holds them for the
// whole conversion, so that none of its outputs can replace one.
std::vector<InputFileHold> HoldConvertSources(const ConvertSpec& spec);

// The metadata ConvertToTable writes for a table of `rows` rows converted
// from `spec`: format, record, rows, source, created_by and
// options.hash_layout (not checked here).
nlohmann::json ConvertMetadata(const ConvertSpec& spec, uint32_t record_bytes, uint64_t rows,
                               const ConvertOptions& options);

// Reads the records (weight row, then its scale row) of a spec by row
// number, the shards' rows numbered in order: row r is what ConvertToTable
// writes as row r. Holds every shard open.
class SpecRecordReader {
 public:
  // After ConvertRecordBytes(spec) succeeded; `spec` must outlive the reader.
  static Result<std::unique_ptr<SpecRecordReader>> Open(const ConvertSpec& spec);
  ~SpecRecordReader();
  uint64_t rows() const { return rows_; }
  // Records [first_row, first_row + count) into dst (count * record bytes).
  Status Read(uint64_t first_row, uint64_t count, std::byte* dst);

 private:
  struct Shards;
  SpecRecordReader() = default;
  const ConvertSpec* spec_ = nullptr;
  std::unique_ptr<Shards> shards_;
  uint64_t rows_ = 0;
  std::vector<std::byte> scratch_;
};

// Writes the table atomically to out_path (holding the spec's files as
// inputs, and out_path checked by CheckOutputPath before anything is read and
// again before the rename); returns its header.
Result<TableHeader> ConvertToTable(const ConvertSpec& spec, const std::string& out_path,
                                   const ConvertOptions& options);

}  // namespace engram
