// Fuzz target: the safetensors header parser (storage/safetensors_header.*).
//
// Input: HeaderInput (fuzz_util.h). The length field fixed by control bit 0
// is the 8-byte JSON length, so the JSON is exactly the rest of the input;
// the added KiB are tensor data.
// The real reader (ReadSafetensorsHeader) also runs, on an in-memory file.
#include <cstring>
#include <vector>

#include "storage/safetensors_header.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {

int FuzzSafetensorsHeader(const uint8_t* data, size_t size) {
  static MemFile file("engram-fuzz-safetensors");
  if (size < 1) return 0;
  HeaderInput in = SplitHeaderInput(data, size);
  std::vector<std::byte>& bytes = in.bytes;
  const uint64_t file_size = in.file_size;
  if (in.fix_length) FixLengthField(bytes, 0, 8);  // the u64 JSON length at 0

  auto parsed = ParseSafetensorsHeader(bytes, file_size);
  auto length = SafetensorsHeaderLength(bytes, file_size);
  file.Reset(file_size);
  file.WriteAt(bytes.data(), bytes.size(), 0);
  auto read = ReadSafetensorsHeader(file.path());
  // Same answer from the file unless the input stops inside the header (the
  // in-memory parse then sees a short buffer, the file reader zeros).
  if (length.ok() && 8 + *length <= bytes.size()) FUZZ_CHECK(read.ok() == parsed.ok());
  if (!parsed.ok()) {
    FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  const SafetensorsHeader& h = *parsed;
  FUZZ_CHECK(h.data_start == 8 + h.header_bytes && h.data_start <= file_size);
  FUZZ_CHECK(read.ok() && read->tensors.size() == h.tensors.size());
  uint64_t prev_end = h.data_start;
  for (const TensorInfo& t : h.tensors) {
    FUZZ_CHECK(t.element_bytes == SafetensorsDtypeBytes(t.dtype) && t.element_bytes > 0);
    FUZZ_CHECK(t.data_offset >= prev_end);  // sorted, not overlapping
    FUZZ_CHECK(t.data_bytes <= file_size - t.data_offset);
    uint64_t numel = 1;
    for (uint64_t d : t.shape) FUZZ_CHECK(!__builtin_mul_overflow(numel, d, &numel));
    FUZZ_CHECK(numel * t.element_bytes == t.data_bytes);
    if (t.rows() > 0) FUZZ_CHECK(t.rows() * t.row_bytes() == t.data_bytes);
    FUZZ_CHECK(h.Find(t.name) != nullptr);
    prev_end = t.data_offset + t.data_bytes;
  }
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzSafetensorsHeader)
