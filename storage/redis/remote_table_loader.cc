#include "storage/redis/remote_table_loader.h"

#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <cstring>
#include <vector>

#include "storage/embedded_hash_layout.h"
#include "storage/file_util.h"
#include "storage/log.h"
#include "storage/redis/remote_table.h"
#include "storage/redis/remote_table_keys.h"
#include "storage/table_file.h"

namespace engram::redis {
namespace {

class FileBlockSource final : public BlockSource {
 public:
  static Result<std::unique_ptr<BlockSource>> Open(const std::string& path) {
    ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<TableFile> file, TableFile::Open(path));
    if (file->is_reference()) {
      return Status::Unsupported(path + " is a reference table (its rows stay in safetensors shards): load the "
                                        "shards with --safetensors, or a converted table");
    }
    auto s = std::unique_ptr<FileBlockSource>(new FileBlockSource(std::move(file)));
    ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(s->file_->fd(), s->header_bytes_, 0, path));
    return std::unique_ptr<BlockSource>(std::move(s));
  }
  std::span<const std::byte> header_bytes() const override { return header_bytes_; }
  const TableHeader& header() const override { return file_->header(); }
  const std::string& metadata() const override { return file_->metadata_text(); }
  Status ReadBlocks(uint64_t first, std::span<std::byte> dst) override {
    return fileutil::PreadExact(file_->fd(), dst, file_->BlockOffset(first), file_->path());
  }

 private:
  explicit FileBlockSource(std::unique_ptr<TableFile> file) : file_(std::move(file)) {}
  std::unique_ptr<TableFile> file_;
  std::array<std::byte, kTableHeaderBytes> header_bytes_{};
};

class ConvertBlockSource final : public BlockSource {
 public:
  static Result<std::unique_ptr<BlockSource>> Open(const ConvertSpec& spec, const ConvertOptions& options) {
    ENGRAM_ASSIGN_OR_RETURN(uint32_t record_bytes, ConvertRecordBytes(spec));
    auto s = std::unique_ptr<ConvertBlockSource>(new ConvertBlockSource());
    s->holds_ = HoldConvertSources(spec);
    ENGRAM_ASSIGN_OR_RETURN(s->reader_, SpecRecordReader::Open(spec));
    const uint64_t rows = s->reader_->rows();
    ENGRAM_RETURN_IF_ERROR(CheckTableHasRows(rows));
    if (options.hash_layout) ENGRAM_RETURN_IF_ERROR(ValidateHashLayout(*options.hash_layout, rows));
    s->metadata_ = ConvertMetadata(spec, record_bytes, rows, options)
                       .dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
    uint64_t salt;
    if (options.writer.checksum_salt) {
      salt = *options.writer.checksum_salt;
    } else {
      // The sources as they are now: paths, sizes and modification times.
      XXH3_state_t* h = XXH3_createState();
      XXH3_64bits_reset(h);
      XXH3_64bits_update(h, s->metadata_.data(), s->metadata_.size());
      for (const auto* slices : {&spec.weight, &spec.scale}) {
        for (const TensorSlice& t : *slices) {
          struct stat st {};
          if (::stat(t.path.c_str(), &st) != 0) {
            XXH3_freeState(h);
            return Status::FromErrno("stat " + t.path, errno);
          }
          const uint64_t facts[] = {uint64_t(st.st_size), uint64_t(st.st_mtim.tv_sec), uint64_t(st.st_mtim.tv_nsec),
                                    uint64_t(st.st_ino)};
          XXH3_64bits_update(h, t.path.data(), t.path.size());
          XXH3_64bits_update(h, facts, sizeof(facts));
        }
      }
      salt = XXH3_64bits_digest(h);
      XXH3_freeState(h);
    }
    ENGRAM_ASSIGN_OR_RETURN(s->header_, MakeTableHeader(record_bytes, rows, s->metadata_.size(),
                                                        XXH3_64bits(s->metadata_.data(), s->metadata_.size()), salt));
    alignas(64) std::byte block[kTableBlockSize];
    EncodeTableHeader(s->header_, std::span<std::byte, kTableBlockSize>(block, kTableBlockSize));
    std::memcpy(s->header_bytes_.data(), block, kTableHeaderBytes);
    return std::unique_ptr<BlockSource>(std::move(s));
  }
  std::span<const std::byte> header_bytes() const override { return header_bytes_; }
  const TableHeader& header() const override { return header_; }
  const std::string& metadata() const override { return metadata_; }
  Status ReadBlocks(uint64_t first, std::span<std::byte> dst) override {
    const TableGeometry g(header_);
    const uint32_t rb = header_.record_bytes, per = header_.rows_per_block;
    const uint64_t n = dst.size() / kTableBlockSize;
    const uint64_t first_row = first * per;
    const uint64_t rows = std::min<uint64_t>(n * per, header_.row_count - first_row);
    records_.resize(rows * rb);
    ENGRAM_RETURN_IF_ERROR(reader_->Read(first_row, rows, records_.data()));
    std::memset(dst.data(), 0, dst.size());
    const uint64_t seed_base = BlockSeedBase(header_);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t begin = i * per;
      const uint64_t count = begin < rows ? std::min<uint64_t>(per, rows - begin) : 0;
      std::span<std::byte> block = dst.subspan(i * kTableBlockSize, kTableBlockSize);
      std::memcpy(block.data(), records_.data() + begin * rb, count * rb);
      SealBlock(block, first + i, seed_base);
    }
    (void)g;
    return Status::OK();
  }

 private:
  ConvertBlockSource() = default;
  std::vector<InputFileHold> holds_;
  std::unique_ptr<SpecRecordReader> reader_;
  std::string metadata_;
  TableHeader header_;
  std::array<std::byte, kTableHeaderBytes> header_bytes_{};
  std::vector<std::byte> records_;
};

// The value of a GET that must be a string or nothing.
Result<std::optional<std::string>> GetString(ClusterClient& client, const std::string& key) {
  ClusterCommand get = ClusterCommand::Get(key);
  client.Run(std::span(&get, 1));
  if (!get.status.ok()) return get.status;
  if (get.reply->type == REDIS_REPLY_NIL) return std::optional<std::string>();
  if (get.reply->type != REDIS_REPLY_STRING) return Status::Corruption("redis key '" + key + "' is not a string");
  return std::optional<std::string>(std::string(get.reply->str, get.reply->len));
}

Status SetString(ClusterClient& client, const std::string& key, std::string_view value) {
  ClusterCommand set = ClusterCommand::Set(key, value);
  client.Run(std::span(&set, 1));
  return set.status.WithContext("SET " + key);
}

Status RunAll(ClusterClient& client, std::span<ClusterCommand> cmds) {
  client.Run(cmds);
  for (const ClusterCommand& c : cmds) {
    if (!c.status.ok()) return c.status.WithContext(std::string(c.words[0]) + " " + std::string(c.key()));
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<BlockSource>> OpenFileBlockSource(const std::string& path) {
  return FileBlockSource::Open(path);
}

Result<std::unique_ptr<BlockSource>> OpenConvertBlockSource(const ConvertSpec& spec, const ConvertOptions& options) {
  return ConvertBlockSource::Open(spec, options);
}

Result<LoadResult> LoadTable(const RedisUrl& url, BlockSource& source, const LoadOptions& options) {
  const std::string where = url.Display();
  auto connected = ClusterClient::Connect(ClusterOptionsFor(url, options.cluster));
  if (!connected.ok()) return connected.status().WithContext(where);
  ClusterClient& client = **connected;
  const TableHeader& h = source.header();
  if (h.is_reference()) return Status::Unsupported(where + ": a reference table cannot be loaded");
  LoadResult result;
  result.fingerprint = XXH3_64bits(source.header_bytes().data(), kTableHeaderBytes);
  result.blocks = h.block_count;
  const RemoteTableKeys keys(url.name, result.fingerprint);

  // 1. Loaded already?
  ENGRAM_ASSIGN_OR_RETURN(std::optional<std::string> old, GetString(client, keys.descriptor()));
  if (old) {
    auto d = DecodeDescriptor(*old, where);
    if (d.ok() && d->fingerprint == result.fingerprint) {
      result.already_loaded = true;
      if (options.progress) options.progress(h.block_count, h.block_count);
      return result;
    }
    if (d.ok()) {
      result.replaced_fingerprint = d->fingerprint;
    } else {
      log::Warn("{}: replacing a descriptor that does not decode ({})", where, d.status().ToString());
    }
  }
  // 2. The blocks, from where a cut-off load stopped.
  ENGRAM_ASSIGN_OR_RETURN(std::optional<std::string> progress, GetString(client, keys.progress()));
  uint64_t start = 0;
  if (progress) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(progress->c_str(), &end, 10);
    if (end != nullptr && *end == '\0' && !progress->empty() && v <= h.block_count) start = v;
  }
  result.resumed_at = start;
  if (start > 0) log::Info("{}: resuming a cut-off load at block {} of {}", where, start, h.block_count);
  const uint64_t window = std::max<uint64_t>(1, options.window_blocks);
  std::vector<std::byte> buffer(std::min<uint64_t>(window, std::max<uint64_t>(1, h.block_count)) * kTableBlockSize);
  std::vector<std::string> block_keys(window);
  std::vector<ClusterCommand> cmds;
  cmds.reserve(window);
  if (options.progress) options.progress(start, h.block_count);
  for (uint64_t b = start; b < h.block_count;) {
    const uint64_t n = std::min(window, h.block_count - b);
    ENGRAM_RETURN_IF_ERROR(source.ReadBlocks(b, std::span(buffer.data(), n * kTableBlockSize)));
    cmds.clear();
    for (uint64_t i = 0; i < n; ++i) {
      keys.Block(b + i, &block_keys[i]);
      cmds.push_back(ClusterCommand::Set(
          block_keys[i], std::string_view(reinterpret_cast<const char*>(buffer.data()) + i * kTableBlockSize,
                                          kTableBlockSize)));
    }
    ENGRAM_RETURN_IF_ERROR(RunAll(client, cmds).WithContext(where));
    b += n;
    ENGRAM_RETURN_IF_ERROR(SetString(client, keys.progress(), std::to_string(b)).WithContext(where));
    if (options.progress) options.progress(b, h.block_count);
  }
  // 3. The descriptor: the table is visible from here on.
  RemoteDescriptor d;
  std::memcpy(d.header.data(), source.header_bytes().data(), kTableHeaderBytes);
  d.metadata = source.metadata();
  d.fingerprint = result.fingerprint;
  d.block_count = h.block_count;
  ENGRAM_RETURN_IF_ERROR(SetString(client, keys.descriptor(), EncodeDescriptor(d)).WithContext(where));
  // 4. Tidy up.
  ClusterCommand del = ClusterCommand::Del(keys.progress());
  client.Run(std::span(&del, 1));
  if (!del.status.ok()) log::Warn("{}: the progress key was not deleted: {}", where, del.status.ToString());
  if (options.drop_replaced && result.replaced_fingerprint != 0 && old) {
    auto replaced = DecodeDescriptor(*old, where);
    const RemoteTableKeys old_keys(url.name, result.replaced_fingerprint);
    for (uint64_t b = 0; replaced.ok() && b < replaced->block_count;) {
      const uint64_t n = std::min(window, replaced->block_count - b);
      cmds.clear();
      for (uint64_t i = 0; i < n; ++i) {
        old_keys.Block(b + i, &block_keys[i]);
        cmds.push_back(ClusterCommand::Del(block_keys[i]));
      }
      ENGRAM_RETURN_IF_ERROR(RunAll(client, cmds).WithContext(where + ": dropping the replaced version"));
      b += n;
      result.dropped_blocks = b;
    }
  }
  return result;
}

}  // namespace engram::redis
