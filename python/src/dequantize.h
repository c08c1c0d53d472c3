// Dequantization of V4.1 records for a CPU-side consumer: each record holds
// weight_bytes fp8 e4m3 values (OCP E4M3FN: bias 7, no infinities, 0x7f/0xff
// NaN) and scale_bytes UE8M0 scales (2^(s-127), 0xff NaN); scale k applies to
// the k-th block of weight_bytes / scale_bytes consecutive weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engram/status.h"

namespace engram::python {

struct Fp8RecordLayout {
  uint32_t weight_offset = 0;
  uint32_t weight_bytes = 0;  // = dequantized values per record
  uint32_t scale_offset = 0;
  uint32_t scale_bytes = 0;
};

// From a table's metadata "record.fields": one F8_E4M3 field and one F8_E8M0
// field. InvalidArgument if the table's records are not of that kind.
Result<Fp8RecordLayout> Fp8RecordLayoutFromMetadata(const std::string& metadata_json, uint32_t record_bytes);

float DecodeE4M3(uint8_t bits);
float DecodeUE8M0(uint8_t bits);

// records: count records of record_bytes each; out: count * weight_bytes values.
void Dequantize(const std::byte* records, size_t count, uint32_t record_bytes, const Fp8RecordLayout& layout,
                float* out);
void Dequantize(const std::byte* records, size_t count, uint32_t record_bytes, const Fp8RecordLayout& layout,
                _Float16* out);

}  // namespace engram::python
