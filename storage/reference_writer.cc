#include "storage/reference_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/byte_order.h"
#include "storage/file_util.h"
#include "storage/embedded_hash_layout.h"
#include "storage/input_files.h"
#include "storage/log.h"
#include "storage/reference_layout.h"
#include "storage/reference_table.h"
#include "storage/table_writer.h"
#include "storage/temp_file_cleanup.h"

namespace engram {

using nlohmann::json;

namespace {

// How the reference names a shard: as given if absolute, else relative to
// the reference file's directory.
std::string RecordedName(const std::string& shard, const std::string& out_path) {
  namespace fs = std::filesystem;
  if (fs::path(shard).is_absolute()) return fs::path(shard).lexically_normal().string();
  std::error_code ec;
  const std::string dir = DirectoryOf(out_path);
  const fs::path from = fs::absolute(dir.empty() ? fs::path(".") : fs::path(dir), ec);
  const fs::path to = fs::absolute(shard, ec);
  const fs::path rel = to.lexically_normal().lexically_relative(from.lexically_normal());
  return rel.empty() ? to.lexically_normal().string() : rel.string();
}

json FieldJson(const char* name, const TensorInfo& t, uint64_t offset) {
  std::vector<uint64_t> row_shape(t.shape.begin() + 1, t.shape.end());
  return json{{"name", name}, {"dtype", t.dtype}, {"offset", offset}, {"bytes", t.row_bytes()}, {"row_shape", row_shape}};
}

// The temporary file of `out_path` (fileutil::CreateTempFileFor), deleted
// unless it was renamed into place.
class TempFile {
 public:
  Status Create(const std::string& out_path) {
    ENGRAM_ASSIGN_OR_RETURN(int fd, fileutil::CreateTempFileFor(out_path, &path_));
    fd_ = fileutil::ScopedFd(fd);
    token_ = RegisterTempFile(path_);
    return Status::OK();
  }
  ~TempFile() {
    if (!renamed_ && !path_.empty()) ::unlink(path_.c_str());
    UnregisterTempFile(token_);
  }
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  // Renamed with the descriptor, and so the lock that marks a live writer,
  // still open; closed after.
  Status RenameTo(const std::string& final_path) {
    if (::rename(path_.c_str(), final_path.c_str()) != 0) return Status::FromErrno("rename " + path_ + " to " + final_path, errno);
    renamed_ = true;
    if (::close(fd_.release()) != 0) return Status::FromErrno("close " + final_path, errno);
    return Status::OK();
  }

 private:
  std::string path_;
  fileutil::ScopedFd fd_;
  int token_ = -1;
  bool renamed_ = false;
};

}  // namespace

Result<TableHeader> WriteReferenceTable(const ConvertSpec& spec, const std::string& out_path,
                                        const ConvertOptions& options) {
  std::vector<ReferencePiece> whole;
  for (size_t i = 0; i < spec.weight.size(); ++i) whole.push_back({i, 0, spec.weight[i].tensor.rows()});
  return WriteReferenceTable(spec, whole, out_path, options, json::object());
}

Result<TableHeader> WriteReferenceTable(const ConvertSpec& spec, const std::vector<ReferencePiece>& pieces,
                                        const std::string& out_path, const ConvertOptions& options,
                                        const json& extra_metadata) {
  if (spec.source_kind != "safetensors") {
    return Status::InvalidArgument("in-place tables reference safetensors shards, not " + spec.source_kind + " files");
  }
  const std::vector<InputFileHold> sources = HoldConvertSources(spec);
  ENGRAM_RETURN_IF_ERROR(CheckOutputPath(out_path, "output"));
  ENGRAM_ASSIGN_OR_RETURN(uint32_t record_bytes, ConvertRecordBytes(spec));
  const bool with_scale = !spec.scale.empty();
  for (size_t i = 0; i < spec.scale.size(); ++i) {
    if (spec.scale[i].path != spec.weight[i].path) {
      return Status::InvalidArgument("shard " + std::to_string(i) + ": weight and scale tensors are in different files");
    }
  }
  const uint64_t wrow = spec.weight[0].tensor.row_bytes();
  const uint64_t srow = with_scale ? spec.scale[0].tensor.row_bytes() : 0;
  uint64_t source_rows = 0, total_rows = 0, units = 0;
  for (size_t i = 0; i < spec.weight.size(); ++i) {
    if (__builtin_add_overflow(source_rows, spec.weight[i].tensor.rows(), &source_rows)) {
      return Status::InvalidArgument("total row count overflows 64 bits");
    }
  }
  for (const ReferencePiece& p : pieces) {
    const TensorInfo& w = spec.weight.at(p.shard).tensor;
    if (p.first_row > w.rows() || p.rows > w.rows() - p.first_row) {
      return Status::InvalidArgument("rows " + std::to_string(p.first_row) + " + " + std::to_string(p.rows) +
                                     " are past the end of shard " + std::to_string(p.shard));
    }
    total_rows += p.rows;  // at most source_rows per shard, so no overflow
    units += ReferenceLayout::UnitsOf(w.data_offset + p.first_row * wrow, p.rows * wrow);
    if (with_scale) units += ReferenceLayout::UnitsOf(spec.scale[p.shard].tensor.data_offset + p.first_row * srow,
                                                      p.rows * srow);
  }
  ENGRAM_RETURN_IF_ERROR(CheckTableHasRows(total_rows));
  if (options.hash_layout) ENGRAM_RETURN_IF_ERROR(ValidateHashLayout(*options.hash_layout, source_rows));

  // Each shard a piece references, as it is now: size, modification time,
  // fingerprint (a few MiB read per shard, so only for those).
  std::vector<bool> used(spec.weight.size(), false);
  for (const ReferencePiece& p : pieces) used[p.shard] = true;
  std::vector<fileutil::ScopedFd> fds(spec.weight.size());
  std::vector<json> shard_json(spec.weight.size());
  for (size_t i = 0; i < spec.weight.size(); ++i) {
    if (!used[i]) continue;
    const std::string& path = spec.weight[i].path;
    ENGRAM_ASSIGN_OR_RETURN(int raw, fileutil::OpenReadOnly(path));
    fds[i] = fileutil::ScopedFd(raw);
    ENGRAM_ASSIGN_OR_RETURN(uint64_t size, fileutil::FileSize(raw, path));
    ENGRAM_ASSIGN_OR_RETURN(int64_t mtime, FileMtimeNanos(raw, path));
    ENGRAM_ASSIGN_OR_RETURN(uint64_t fingerprint, ShardFingerprint(raw, size, path));
    const TensorInfo& w = spec.weight[i].tensor;
    json sh = {{"file", RecordedName(path, out_path)},
               {"size", size},
               {"mtime_ns", mtime},
               {"fingerprint", Hex64(fingerprint)},
               {"weight_tensor", w.name},
               {"weight_shape", w.shape}};
    if (with_scale) {
      sh["scale_tensor"] = spec.scale[i].tensor.name;
      sh["scale_shape"] = spec.scale[i].tensor.shape;
    }
    shard_json[i] = std::move(sh);
  }
  // One entry per piece, pointing at its first row (a whole shard is the
  // piece from row 0: the entry then names the tensors' own offsets).
  json shards = json::array();
  for (const ReferencePiece& p : pieces) {
    json sh = shard_json[p.shard];
    sh["rows"] = p.rows;
    if (p.first_row != 0) sh["first_tensor_row"] = p.first_row;
    sh["weight_offset"] = spec.weight[p.shard].tensor.data_offset + p.first_row * wrow;
    if (with_scale) sh["scale_offset"] = spec.scale[p.shard].tensor.data_offset + p.first_row * srow;
    shards.push_back(std::move(sh));
  }
  json meta;
  meta["format"] = kReferenceFormat;
  json fields = json::array({FieldJson("weight", spec.weight[0].tensor, 0)});
  if (with_scale) fields.push_back(FieldJson("scale", spec.scale[0].tensor, wrow));
  meta["record"] = {{"bytes", record_bytes}, {"fields", fields}};
  meta["rows"] = total_rows;
  meta["source"] = {{"kind", "safetensors"}, {"in_place", true}, {"shards", shards}};
  meta["created_by"] = options.created_by;
  if (options.hash_layout) meta["hash_layout"] = *options.hash_layout;
  for (auto it = extra_metadata.begin(); it != extra_metadata.end(); ++it) meta[it.key()] = it.value();
  const std::string text = meta.dump();

  // The layout exactly as a reader will parse it, so writer and reader agree
  // on every unit.
  const uint64_t salt = options.writer.checksum_salt ? *options.writer.checksum_salt : RandomChecksumSalt();
  ENGRAM_ASSIGN_OR_RETURN(TableHeader draft, MakeReferenceTableHeader(record_bytes, total_rows, units, 0, text.size(),
                                                                      XXH3_64bits(text.data(), text.size()), salt));
  ENGRAM_ASSIGN_OR_RETURN(ReferenceLayout layout, ReferenceLayout::Parse(draft, text, DirectoryOf(out_path)));
  const uint64_t seed_base = BlockSeedBase(draft);
  std::vector<std::byte> section(draft.data_bytes);
  uint64_t rows_done = 0;
  for (size_t i = 0; i < layout.shards().size(); ++i) {
    const ReferenceShard& s = layout.shards()[i];
    const int fd = fds[pieces[i].shard].get();
    auto seal = [&](uint64_t unit, std::span<const std::byte> block) {
      StoreLe64(section.data() + unit * 8, ComputeUnitChecksum(block, layout.Unit(unit), unit, seed_base));
      return Status::OK();
    };
    ENGRAM_RETURN_IF_ERROR(ScanShardRegion(fd, s, s.weight_units, s.weight_offset, s.rows * wrow, seal));
    ENGRAM_RETURN_IF_ERROR(ScanShardRegion(fd, s, s.scale_units, s.scale_offset, s.rows * srow, seal));
    // The shard must not have changed while it was read.
    ENGRAM_ASSIGN_OR_RETURN(int64_t mtime, FileMtimeNanos(fd, s.path));
    ENGRAM_ASSIGN_OR_RETURN(uint64_t size, fileutil::FileSize(fd, s.path));
    if (mtime != s.mtime_ns || size != s.size) {
      return Status::IOError(spec.weight[pieces[i].shard].path + " changed while its checksums were computed");
    }
    rows_done += s.rows;
    if (options.progress) options.progress(rows_done, total_rows);
  }
  TableHeader header = draft;
  header.checksums_xxh3 = XXH3_64bits(section.data(), units * 8);

  // Atomically, as TableWriter: zero header, data, metadata, sync, header, sync, rename.
  if (out_path.empty() || out_path.back() == '/') {
    return Status::InvalidArgument("table path '" + out_path + "' names no file");
  }
  TempFile temp;
  ENGRAM_RETURN_IF_ERROR(temp.Create(out_path));
  alignas(64) std::byte hblock[kTableBlockSize] = {};
  ENGRAM_RETURN_IF_ERROR(fileutil::PwriteAll(temp.fd(), hblock, 0, temp.path()));
  ENGRAM_RETURN_IF_ERROR(fileutil::PwriteAll(temp.fd(), section, header.data_offset, temp.path()));
  std::vector<std::byte> meta_section(header.file_bytes - header.metadata_offset);
  std::memcpy(meta_section.data(), text.data(), text.size());
  ENGRAM_RETURN_IF_ERROR(fileutil::PwriteAll(temp.fd(), meta_section, header.metadata_offset, temp.path()));
  const bool sync = options.writer.sync;
  if (sync && ::fdatasync(temp.fd()) != 0) return Status::FromErrno("fdatasync " + temp.path(), errno);
  EncodeTableHeader(header, std::span<std::byte, kTableBlockSize>(hblock, kTableBlockSize));
  ENGRAM_RETURN_IF_ERROR(fileutil::PwriteAll(temp.fd(), hblock, 0, temp.path()));
  if (sync && ::fsync(temp.fd()) != 0) return Status::FromErrno("fsync " + temp.path(), errno);
  if (::fchmod(temp.fd(), 0644) != 0) return Status::FromErrno("chmod " + temp.path(), errno);
  // Again right before the rename (the first check was before the shards were read).
  ENGRAM_RETURN_IF_ERROR(CheckOutputPath(out_path, "output table"));
  ENGRAM_RETURN_IF_ERROR(temp.RenameTo(out_path));
  if (sync) ENGRAM_RETURN_IF_ERROR(fileutil::SyncParentDir(out_path));
  log::Info("wrote Engram reference table {}: {} rows of {} B in {} shards, {} block checksums, {} bytes", out_path,
            header.row_count, header.record_bytes, layout.shards().size(), units, header.file_bytes);
  return header;
}

}  // namespace engram
