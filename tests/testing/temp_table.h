// Test helpers: temporary directories and generated Engram tables on the real
// disk, with contents from the deterministic row generator so any returned
// row can be checked byte for byte.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engram/status.h"
#include "src/tablegen/row_generator.h"
#include "src/tablegen/table_generator.h"

namespace engram::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/engram-test-XXXXXX";
    char* p = mkdtemp(tmpl.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes a table of `rows` generated rows; returns its path.
inline Status WriteGeneratedTable(const std::string& path, uint64_t rows, uint32_t record_bytes, uint64_t seed) {
  GenerateTableOptions o;
  o.rows = rows;
  o.record_bytes = record_bytes;
  o.seed = seed;
  return GenerateTable(path, o);
}

// Evicts the file from the page cache so reads really go to the device.
inline std::vector<std::byte> ExpectedRow(uint64_t seed, uint64_t row, uint32_t record_bytes) {
  std::vector<std::byte> v(record_bytes);
  GenerateRow(seed, row, v);
  return v;
}

}  // namespace engram::testing
