// TraceWriter: records every gather so engram-replay can replay a real
// runtime's row trace through the same cache code (--store-trace FILE).
//
// Format (text, one gather per line):  <table-index> <row-id> <row-id> ...
// Row IDs are written as the runtime asked for them (duplicates kept); the
// replay deduplicates per gather exactly as the store does.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "engram/status.h"

namespace engram {

class TraceWriter {
 public:
  static Result<std::unique_ptr<TraceWriter>> Open(const std::string& path);
  ~TraceWriter();
  void Record(size_t table, std::span<const uint64_t> row_ids);
  Status Flush();

 private:
  explicit TraceWriter(std::FILE* f) : file_(f) {}
  std::mutex mu_;
  std::FILE* file_;
  std::string line_;
};

}  // namespace engram
