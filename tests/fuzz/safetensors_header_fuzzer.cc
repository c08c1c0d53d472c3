// Fuzz target: the safetensors header parser (storage/safetensors_header.*).
//
// Input: one control byte, then the file's first bytes. Control bit 0
// rewrites the 8-byte length so the JSON is exactly the rest of the input
// (lets the fuzzer work on the JSON); bits 1-7 add that many KiB of tensor
// data after the input (the file size the parser checks offsets against).
// The real reader (ReadSafetensorsHeader) also runs, on an in-memory file.
#include <cstring>
#include <vector>

#include "storage/safetensors_header.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {

int FuzzSafetensorsHeader(const uint8_t* data, size_t size) {
  static MemFile file("engram-fuzz-safetensors");
  if (size < 1) return 0;
  const uint8_t ctrl = data[0];
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1),
                               reinterpret_cast<const std::byte*>(data + size));
  if ((ctrl & 1) && bytes.size() >= 8) {
    const uint64_t n = bytes.size() - 8;
    std::memcpy(bytes.data(), &n, 8);
  }
  const uint64_t file_size = bytes.size() + static_cast<uint64_t>(ctrl >> 1) * 1024;

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
