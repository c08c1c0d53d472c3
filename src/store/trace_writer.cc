#include "src/store/trace_writer.h"

#include <cerrno>
#include <charconv>

namespace engram {

Result<std::unique_ptr<TraceWriter>> TraceWriter::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return Status::FromErrno("open trace file " + path, errno);
  return std::unique_ptr<TraceWriter>(new TraceWriter(f));
}

TraceWriter::~TraceWriter() {
  if (file_) std::fclose(file_);
}

void TraceWriter::Record(size_t table, std::span<const uint64_t> row_ids) {
  std::lock_guard lock(mu_);
  line_.clear();
  char buf[24];
  auto append = [&](uint64_t v) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    line_.append(buf, end);
  };
  append(table);
  for (uint64_t id : row_ids) {
    line_ += ' ';
    append(id);
  }
  line_ += '\n';
  std::fwrite(line_.data(), 1, line_.size(), file_);
}

Status TraceWriter::Flush() {
  std::lock_guard lock(mu_);
  if (std::fflush(file_) != 0) return Status::FromErrno("flush trace file", errno);
  return Status::OK();
}

}  // namespace engram
