// Fuzz target: the .npy header parser (storage/npy_header.*).
//
// Input: HeaderInput (fuzz_util.h). The length field fixed by control bit 0
// is the header length (v1: u16 at 8, v2/v3: u32 at 8), so the dict literal
// is exactly the rest of the input; the added KiB are array data (the parser
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
  HeaderInput in = SplitHeaderInput(data, size);
  std::vector<std::byte>& bytes = in.bytes;
  const uint64_t file_size = in.file_size;
  // The length field: u16 at 8 in version 1, u32 at 8 in versions 2 and 3.
  if (in.fix_length && bytes.size() >= 10) FixLengthField(bytes, 8, bytes[6] == std::byte{1} ? 2 : 4);

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
