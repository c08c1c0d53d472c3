// Fuzz target: the .npy header parser (storage/npy_header.*).
//
// Input: one control byte, then the file's first bytes. Control bit 0
// rewrites the header-length field (v1: u16 at 8, v2/v3: u32 at 8) so the
// dict literal is exactly the rest of the input, padded to the 64-byte
// alignment NumPy writes; bits 1-7 add that many KiB of array data (the parser
// requires header + data to be exactly the file size). ReadNpyHeader also
// runs, on an in-memory file.
#include <cstring>
#include <vector>

#include "storage/npy_header.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {

int FuzzNpyHeader(const uint8_t* data, size_t size) {
  static MemFile file("engram-fuzz-npy");
  if (size < 1) return 0;
  const uint8_t ctrl = data[0];
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1),
                               reinterpret_cast<const std::byte*>(data + size));
  if ((ctrl & 1) && bytes.size() >= 10) {
    const bool v1 = bytes[6] == std::byte{1};
    const size_t field = v1 ? 2 : 4;
    if (bytes.size() >= 8 + field) {
      const uint32_t n = static_cast<uint32_t>(bytes.size() - 8 - field);
      std::memcpy(bytes.data() + 8, &n, field);  // little-endian host
    }
  }
  const uint64_t file_size = bytes.size() + static_cast<uint64_t>(ctrl >> 1) * 1024;

  auto length = NpyHeaderLength(bytes, file_size);
  auto parsed = ParseNpyHeader(bytes, file_size);
  file.Reset(file_size);
  file.WriteAt(bytes.data(), bytes.size(), 0);
  auto read = ReadNpyHeader(file.path());
  // Same answer from the file unless the input stops inside the header (the
  // in-memory parse then sees a short buffer, the file reader zeros).
  if (length.ok() && *length <= bytes.size()) FUZZ_CHECK(read.ok() == parsed.ok());
  if (!parsed.ok()) {
    FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  const TensorInfo& t = *parsed;
  FUZZ_CHECK(length.ok() && *length == t.data_offset);
  FUZZ_CHECK(t.element_bytes > 0);
  FUZZ_CHECK(t.data_offset + t.data_bytes == file_size);
  uint64_t numel = 1;
  for (uint64_t d : t.shape) FUZZ_CHECK(!__builtin_mul_overflow(numel, d, &numel));
  FUZZ_CHECK(numel * t.element_bytes == t.data_bytes);
  if (t.rows() > 0) FUZZ_CHECK(t.rows() * t.row_bytes() == t.data_bytes);
  FUZZ_CHECK(read.ok() && read->shape == t.shape && read->dtype == t.dtype);
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzNpyHeader)
