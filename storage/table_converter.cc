#include "storage/table_converter.h"

#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "storage/file_util.h"
#include "storage/embedded_hash_layout.h"
#include "storage/npy_header.h"
#include "storage/safetensors_header.h"

namespace engram {

using nlohmann::json;

namespace {

std::string Basename(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::vector<uint64_t> RowShape(const TensorInfo& t) {
  return t.shape.empty() ? std::vector<uint64_t>{} : std::vector<uint64_t>(t.shape.begin() + 1, t.shape.end());
}

// All shards of one role must agree on dtype and row shape.
Status CheckShardsAgree(const std::vector<TensorSlice>& shards, const char* role) {
  for (size_t i = 0; i < shards.size(); ++i) {
    const TensorInfo& t = shards[i].tensor;
    if (t.shape.empty()) {
      return Status::InvalidArgument(shards[i].path + ": " + role + " tensor '" + t.name +
                                     "' is a scalar; expected [rows, ...]");
    }
    if (i == 0) continue;
    const TensorInfo& f = shards[0].tensor;
    if (t.dtype != f.dtype || RowShape(t) != RowShape(f)) {
      return Status::InvalidArgument(shards[i].path + ": " + role + " tensor '" + t.name + "' is " + t.dtype + " " +
                                     ShapeToString(t.shape) + " but shard 0 (" + shards[0].path + ") has " +
                                     f.dtype + " " + ShapeToString(f.shape) + "; rows must have the same layout");
    }
  }
  return Status::OK();
}

json FieldJson(const char* name, const TensorInfo& t, uint64_t offset) {
  return json{{"name", name},     {"dtype", t.dtype},       {"offset", offset},
              {"bytes", t.row_bytes()}, {"row_shape", RowShape(t)}};
}

std::string SomeTensorNames(const SafetensorsHeader& h) {
  std::string s;
  for (size_t i = 0; i < h.some_names.size(); ++i) s += (i ? ", '" : "'") + h.some_names[i] + "'";
  if (h.tensor_count > h.some_names.size()) s += ", ... (" + std::to_string(h.tensor_count) + " tensors)";
  return s.empty() ? "no tensors" : s;
}

// Sequential reader of one tensor region.
class SliceReader {
 public:
  static Result<SliceReader> Open(const TensorSlice& s) {
    ENGRAM_ASSIGN_OR_RETURN(int fd, fileutil::OpenReadOnly(s.path));
    SliceReader r;
    r.fd_ = fileutil::ScopedFd(fd);
    r.slice_ = &s;
    ::posix_fadvise(fd, static_cast<off_t>(s.tensor.data_offset), static_cast<off_t>(s.tensor.data_bytes),
                    POSIX_FADV_SEQUENTIAL);
    // The header was parsed from this file earlier; make sure it has not shrunk since.
    ENGRAM_ASSIGN_OR_RETURN(uint64_t size, fileutil::FileSize(fd, s.path));
    if (size < s.tensor.data_offset + s.tensor.data_bytes) {
      return Status::Corruption(s.path + ": file is shorter than tensor '" + s.tensor.name + "' needs");
    }
    return r;
  }
  Status ReadRows(uint64_t first_row, uint64_t count, std::byte* dst) const {
    uint64_t rb = slice_->tensor.row_bytes();
    return fileutil::PreadExact(fd_.get(), std::span(dst, count * rb), slice_->tensor.data_offset + first_row * rb,
                                slice_->path);
  }

 private:
  fileutil::ScopedFd fd_;
  const TensorSlice* slice_ = nullptr;
};

}  // namespace

Result<ConvertSpec> SafetensorsConvertSpec(const std::vector<std::string>& files, const std::string& weight_name,
                                           const std::string& scale_name) {
  if (files.empty()) return Status::InvalidArgument("no safetensors files given");
  ConvertSpec spec;
  spec.source_kind = "safetensors";
  for (const std::string& f : files) {
    // Only the tensors converted are kept (a checkpoint's header may list
    // hundreds of thousands of others).
    std::vector<std::string> wanted = {weight_name};
    if (!scale_name.empty()) wanted.push_back(scale_name);
    ENGRAM_ASSIGN_OR_RETURN(SafetensorsHeader h, ReadSafetensorsHeader(f, wanted));
    const TensorInfo* w = h.Find(weight_name);
    if (!w) {
      return Status::NotFound(f + ": no tensor named '" + weight_name + "' (it has " + SomeTensorNames(h) + ")");
    }
    spec.weight.push_back({f, *w});
    if (!scale_name.empty()) {
      const TensorInfo* s = h.Find(scale_name);
      if (!s) {
        return Status::NotFound(f + ": no tensor named '" + scale_name + "' (it has " + SomeTensorNames(h) + ")");
      }
      spec.scale.push_back({f, *s});
    }
  }
  return spec;
}

Result<ConvertSpec> NpyConvertSpec(const std::vector<std::string>& weight_files,
                                   const std::vector<std::string>& scale_files) {
  if (weight_files.empty()) return Status::InvalidArgument("no .npy files given");
  if (!scale_files.empty() && scale_files.size() != weight_files.size()) {
    return Status::InvalidArgument("got " + std::to_string(weight_files.size()) + " weight .npy files but " +
                                   std::to_string(scale_files.size()) + " scale .npy files; give one scale per weight");
  }
  ConvertSpec spec;
  spec.source_kind = "npy";
  for (const std::string& f : weight_files) {
    ENGRAM_ASSIGN_OR_RETURN(TensorInfo t, ReadNpyHeader(f));
    spec.weight.push_back({f, std::move(t)});
  }
  for (const std::string& f : scale_files) {
    ENGRAM_ASSIGN_OR_RETURN(TensorInfo t, ReadNpyHeader(f));
    spec.scale.push_back({f, std::move(t)});
  }
  return spec;
}

Result<uint32_t> ConvertRecordBytes(const ConvertSpec& spec) {
  if (spec.weight.empty()) return Status::InvalidArgument("no weight tensors to convert");
  if (!spec.scale.empty() && spec.scale.size() != spec.weight.size()) {
    return Status::InvalidArgument("scale tensors must be given for every shard or for none");
  }
  ENGRAM_RETURN_IF_ERROR(CheckShardsAgree(spec.weight, "weight"));
  ENGRAM_RETURN_IF_ERROR(CheckShardsAgree(spec.scale, "scale"));
  for (size_t i = 0; i < spec.scale.size(); ++i) {
    const TensorInfo& w = spec.weight[i].tensor;
    const TensorInfo& s = spec.scale[i].tensor;
    if (w.rows() != s.rows()) {
      return Status::InvalidArgument("shard " + std::to_string(i) + ": weight '" + w.name + "' " +
                                     ShapeToString(w.shape) + " and scale '" + s.name + "' " +
                                     ShapeToString(s.shape) + " have different row counts");
    }
  }
  // Each part is bounded first: zero-row tensors may have rows of nearly
  // 2^64 bytes, whose sum would wrap round to a plausible record size.
  const uint64_t wrow = spec.weight[0].tensor.row_bytes();
  const uint64_t srow = spec.scale.empty() ? 0 : spec.scale[0].tensor.row_bytes();
  const uint64_t rb = wrow > kMaxRecordBytes || srow > kMaxRecordBytes ? UINT64_MAX : wrow + srow;
  if (rb == 0 || rb > kMaxRecordBytes) {
    const std::string size = rb == UINT64_MAX ? std::to_string(wrow) + " + " + std::to_string(srow) : std::to_string(rb);
    return Status::InvalidArgument("a record would be " + size + " bytes (weight " +
                                   ShapeToString(spec.weight[0].tensor.shape) + " " + spec.weight[0].tensor.dtype +
                                   "); records must be 1.." + std::to_string(kMaxRecordBytes) + " bytes");
  }
  return static_cast<uint32_t>(rb);
}

Status CheckConvertOutput(const std::string& out_path, const std::vector<std::string>& inputs) {
  std::vector<InputFileHold> holds;
  for (const std::string& in : inputs) holds.push_back(HoldInputPath(in, "an input of this conversion"));
  return CheckOutputPath(out_path, "output");
}

std::vector<InputFileHold> HoldConvertSources(const ConvertSpec& spec) {
  std::vector<InputFileHold> holds;
  for (const auto* slices : {&spec.weight, &spec.scale}) {
    for (const TensorSlice& t : *slices) holds.push_back(HoldInputPath(t.path, "a source of this conversion"));
  }
  return holds;
}

json ConvertMetadata(const ConvertSpec& spec, uint32_t record_bytes, uint64_t rows, const ConvertOptions& options) {
  const bool with_scale = !spec.scale.empty();
  json meta;
  meta["format"] = "engram-table/1";
  json fields = json::array({FieldJson("weight", spec.weight[0].tensor, 0)});
  if (with_scale) fields.push_back(FieldJson("scale", spec.scale[0].tensor, spec.weight[0].tensor.row_bytes()));
  meta["record"] = {{"bytes", record_bytes}, {"fields", fields}};
  meta["rows"] = rows;
  json shards = json::array();
  for (size_t i = 0; i < spec.weight.size(); ++i) {
    json sh = {{"file", Basename(spec.weight[i].path)},
               {"weight_tensor", spec.weight[i].tensor.name},
               {"weight_shape", spec.weight[i].tensor.shape},
               {"rows", spec.weight[i].tensor.rows()}};
    if (with_scale) {
      sh["scale_file"] = Basename(spec.scale[i].path);
      sh["scale_tensor"] = spec.scale[i].tensor.name;
      sh["scale_shape"] = spec.scale[i].tensor.shape;
    }
    shards.push_back(std::move(sh));
  }
  meta["source"] = {{"kind", spec.source_kind}, {"shards", shards}};
  meta["created_by"] = options.created_by;
  if (options.hash_layout) meta["hash_layout"] = *options.hash_layout;
  return meta;
}

struct SpecRecordReader::Shards {
  std::vector<SliceReader> weight, scale;
  std::vector<uint64_t> first_row;  // of each shard
};

SpecRecordReader::~SpecRecordReader() = default;

Result<std::unique_ptr<SpecRecordReader>> SpecRecordReader::Open(const ConvertSpec& spec) {
  std::unique_ptr<SpecRecordReader> r(new SpecRecordReader());
  r->spec_ = &spec;
  r->shards_ = std::make_unique<Shards>();
  for (size_t i = 0; i < spec.weight.size(); ++i) {
    ENGRAM_ASSIGN_OR_RETURN(SliceReader w, SliceReader::Open(spec.weight[i]));
    r->shards_->weight.push_back(std::move(w));
    if (!spec.scale.empty()) {
      ENGRAM_ASSIGN_OR_RETURN(SliceReader sc, SliceReader::Open(spec.scale[i]));
      r->shards_->scale.push_back(std::move(sc));
    }
    r->shards_->first_row.push_back(r->rows_);
    r->rows_ += spec.weight[i].tensor.rows();
  }
  return r;
}

Status SpecRecordReader::Read(uint64_t first_row, uint64_t count, std::byte* dst) {
  if (first_row > rows_ || count > rows_ - first_row) {
    return Status::OutOfRange("rows " + std::to_string(first_row) + " + " + std::to_string(count) +
                              " are past the source's " + std::to_string(rows_));
  }
  const uint64_t wrow = spec_->weight[0].tensor.row_bytes();
  const uint64_t srow = spec_->scale.empty() ? 0 : spec_->scale[0].tensor.row_bytes();
  const auto& starts = shards_->first_row;
  size_t i = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), first_row) - starts.begin()) - 1;
  while (count > 0) {
    const uint64_t local = first_row - starts[i];
    const uint64_t n = std::min(count, spec_->weight[i].tensor.rows() - local);
    if (n == 0) {  // a shard without rows, or the end of one
      ++i;
      continue;
    }
    scratch_.resize(n * (wrow + srow));
    ENGRAM_RETURN_IF_ERROR(shards_->weight[i].ReadRows(local, n, scratch_.data()));
    if (srow != 0) ENGRAM_RETURN_IF_ERROR(shards_->scale[i].ReadRows(local, n, scratch_.data() + n * wrow));
    for (uint64_t k = 0; k < n; ++k) {
      std::memcpy(dst + k * (wrow + srow), scratch_.data() + k * wrow, wrow);
      std::memcpy(dst + k * (wrow + srow) + wrow, scratch_.data() + n * wrow + k * srow, srow);
    }
    dst += n * (wrow + srow);
    first_row += n;
    count -= n;
    ++i;
  }
  return Status::OK();
}

Result<TableHeader> ConvertToTable(const ConvertSpec& spec, const std::string& out_path,
                                   const ConvertOptions& options) {
  const std::vector<InputFileHold> sources = HoldConvertSources(spec);
  ENGRAM_RETURN_IF_ERROR(CheckOutputPath(out_path, "output"));
  ENGRAM_ASSIGN_OR_RETURN(uint32_t record_bytes, ConvertRecordBytes(spec));
  const bool with_scale = !spec.scale.empty();
  const uint64_t wrow = spec.weight[0].tensor.row_bytes();
  const uint64_t srow = with_scale ? spec.scale[0].tensor.row_bytes() : 0;
  uint64_t total_rows = 0;
  for (const TensorSlice& w : spec.weight) {
    if (__builtin_add_overflow(total_rows, w.tensor.rows(), &total_rows)) {
      return Status::InvalidArgument("total row count overflows 64 bits");
    }
  }
  // Before anything is written: the writer would only refuse at Finish().
  ENGRAM_RETURN_IF_ERROR(CheckTableHasRows(total_rows));
  if (options.hash_layout) {
    Status s = ValidateHashLayout(*options.hash_layout, total_rows);
    if (!s.ok()) return s;
  }

  TableWriterOptions wopt = options.writer;
  wopt.record_bytes = record_bytes;
  wopt.metadata = ConvertMetadata(spec, record_bytes, total_rows, options);
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<TableWriter> writer, TableWriter::Create(out_path, std::move(wopt)));

  const uint64_t chunk_rows = std::max<uint64_t>(1, options.chunk_bytes / record_bytes);
  std::vector<std::byte> wbuf(chunk_rows * wrow), sbuf(chunk_rows * srow);
  uint64_t done = 0;
  for (size_t i = 0; i < spec.weight.size(); ++i) {
    ENGRAM_ASSIGN_OR_RETURN(SliceReader wr, SliceReader::Open(spec.weight[i]));
    std::optional<SliceReader> sr;
    if (with_scale) {
      ENGRAM_ASSIGN_OR_RETURN(SliceReader s, SliceReader::Open(spec.scale[i]));
      sr.emplace(std::move(s));
    }
    const uint64_t rows = spec.weight[i].tensor.rows();
    for (uint64_t r = 0; r < rows;) {
      uint64_t n = std::min(chunk_rows, rows - r);
      ENGRAM_RETURN_IF_ERROR(wr.ReadRows(r, n, wbuf.data()));
      if (with_scale) {
        ENGRAM_RETURN_IF_ERROR(sr->ReadRows(r, n, sbuf.data()));
        // Interleave straight into the writer's block buffer.
        for (uint64_t k = 0; k < n;) {
          std::span<std::byte> slots = writer->RecordSlots(n - k);
          uint64_t m = slots.size() / record_bytes;
          for (uint64_t j = 0; j < m; ++j, ++k) {
            std::byte* rec = slots.data() + j * record_bytes;
            std::memcpy(rec, wbuf.data() + k * wrow, wrow);
            std::memcpy(rec + wrow, sbuf.data() + k * srow, srow);
          }
          ENGRAM_RETURN_IF_ERROR(writer->CommitRecords(m));
        }
      } else {
        ENGRAM_RETURN_IF_ERROR(writer->AppendRecords(std::span(wbuf.data(), n * wrow)));
      }
      r += n;
      done += n;
      if (options.progress) options.progress(done, total_rows);
    }
  }
  ENGRAM_RETURN_IF_ERROR(writer->Finish());
  return writer->header();
}

}  // namespace engram
