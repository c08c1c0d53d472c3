#include "storage/redis/remote_table.h"

#include <algorithm>
#include <vector>

namespace engram::redis {

ClusterOptions ClusterOptionsFor(const RedisUrl& url, ClusterOptions base) {
  base.seeds = url.seeds;
  base.user = url.user;
  base.password = url.password;
  return base;
}

Result<RemoteTable> OpenRemoteTable(const std::string& url_text, const ClusterOptions& base) {
  ENGRAM_ASSIGN_OR_RETURN(RedisUrl url, ParseRedisUrl(url_text));
  const std::string where = url.Display();
  auto client = ClusterClient::Connect(ClusterOptionsFor(url, base));
  if (!client.ok()) return client.status().WithContext(where);
  std::shared_ptr<ClusterClient> shared(std::move(client).value());
  const std::string key = DescriptorKey(url.name);
  ClusterCommand get = ClusterCommand::Get(key);
  shared->Run(std::span(&get, 1));
  if (!get.status.ok()) return get.status.WithContext(where);
  if (get.reply->type == REDIS_REPLY_NIL) {
    return Status::NotFound(where + ": the cluster holds no table '" + url.name +
                            "' (never loaded, or its load has not finished: engram-convert --to " + where + ")");
  }
  if (get.reply->type != REDIS_REPLY_STRING) return Status::Corruption(where + ": the descriptor key is not a string");
  ENGRAM_ASSIGN_OR_RETURN(RemoteDescriptor d, DecodeDescriptor(std::string_view(get.reply->str, get.reply->len), where));
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<TableFile> file, TableFile::FromParts(where, d.header, std::move(d.metadata)));
  if (file->block_count() != d.block_count) {
    return Status::Corruption(where + ": the descriptor's block count is not its header's");
  }
  RemoteTableKeys keys(url.name, d.fingerprint);
  return RemoteTable{std::move(url), std::move(shared), std::move(file), std::move(keys)};
}

Status ReadRemoteBlocks(const RemoteTable& table, uint64_t first, std::span<std::byte> dst) {
  const uint64_t n = dst.size() / kTableBlockSize;
  if (n * kTableBlockSize != dst.size()) return Status::InvalidArgument("ReadRemoteBlocks: not whole blocks");
  if (first > table.file->block_count() || n > table.file->block_count() - first) {
    return Status::OutOfRange(table.file->path() + ": blocks " + std::to_string(first) + "+" + std::to_string(n) +
                              " past its " + std::to_string(table.file->block_count()));
  }
  std::vector<std::string> keys(n);
  std::vector<ClusterCommand> cmds;
  cmds.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    table.keys.Block(first + i, &keys[i]);
    cmds.push_back(ClusterCommand::Get(keys[i], dst.subspan(i * kTableBlockSize, kTableBlockSize)));
  }
  table.client->Run(cmds);
  for (uint64_t i = 0; i < n; ++i) {
    if (!cmds[i].status.ok()) {
      return cmds[i].status.WithContext(table.file->path() + " block " + std::to_string(first + i));
    }
    ENGRAM_RETURN_IF_ERROR(table.file->VerifyBlock(first + i, dst.subspan(i * kTableBlockSize, kTableBlockSize)));
  }
  return Status::OK();
}

Status VerifyRemoteTable(const RemoteTable& table, const TableFile::ProgressFn& progress, uint64_t window_blocks) {
  const uint64_t total = table.file->block_count();
  window_blocks = std::max<uint64_t>(1, window_blocks);
  std::vector<std::byte> buffer(std::min(total, window_blocks) * kTableBlockSize);
  for (uint64_t b = 0; b < total;) {
    const uint64_t n = std::min(window_blocks, total - b);
    ENGRAM_RETURN_IF_ERROR(ReadRemoteBlocks(table, b, std::span(buffer.data(), n * kTableBlockSize)));
    b += n;
    if (progress) progress(b, total);
  }
  return Status::OK();
}

}  // namespace engram::redis
