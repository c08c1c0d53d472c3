// RemoteTable: a table loaded into a Redis Cluster (remote_table_loader.h),
// opened by its URL (redis_url.h): the descriptor is read and checked, and
// the table is a TableFile made from its header and metadata
// (TableFile::FromParts), so its geometry, hash layout and block checks are
// exactly those of the file it was loaded from. Its blocks are fetched
// through the cluster client (RemoteBlockEngine for a store's gathers,
// ReadRemoteBlocks and VerifyRemoteTable for tools) and each is verified
// with TableFile::VerifyBlock, as a block read from a disk is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "engram/status.h"
#include "storage/redis/cluster_client.h"
#include "storage/redis/redis_url.h"
#include "storage/redis/remote_table_keys.h"
#include "storage/table_file.h"

namespace engram::redis {

struct RemoteTable {
  RedisUrl url;
  std::shared_ptr<ClusterClient> client;
  std::unique_ptr<TableFile> file;  // path(): url.Display()
  RemoteTableKeys keys;
};

// The cluster options a URL gives (seeds, credentials), over `base`'s
// timeouts and depths.
ClusterOptions ClusterOptionsFor(const RedisUrl& url, ClusterOptions base = {});

// Connects and reads the descriptor. NotFound if the cluster holds no
// complete table of that name (never loaded, or its load not finished);
// Unavailable naming the nodes tried if none answered; InvalidArgument for
// refused credentials; Corruption for a damaged descriptor.
Result<RemoteTable> OpenRemoteTable(const std::string& url, const ClusterOptions& base = {});

// Fetches blocks [first, first + dst.size() / 4096) into dst (pipelined)
// and verifies each; the first failure, naming its block.
Status ReadRemoteBlocks(const RemoteTable& table, uint64_t first, std::span<std::byte> dst);

// Fetches and verifies every block, `window_blocks` at a time; the first
// failure. progress(done, total) after each window.
Status VerifyRemoteTable(const RemoteTable& table, const TableFile::ProgressFn& progress = {},
                         uint64_t window_blocks = 1024);

}  // namespace engram::redis
