#include "python/src/dequantize.h"

#include <array>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace engram::python {
namespace {

const std::array<float, 256>& E4M3Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) {
      const int sign = b >> 7, exponent = (b >> 3) & 0xf, mantissa = b & 7;
      float v;
      if (exponent == 0xf && mantissa == 7) {
        v = std::numeric_limits<float>::quiet_NaN();
      } else if (exponent == 0) {
        v = std::ldexp(float(mantissa), -9);  // subnormal: m/8 * 2^-6
      } else {
        v = std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - 7);
      }
      t[b] = sign ? -v : v;
    }
    return t;
  }();
  return table;
}

template <typename Out>
void DequantizeAs(const std::byte* records, size_t count, uint32_t record_bytes, const Fp8RecordLayout& l, Out* out) {
  const std::array<float, 256>& e4m3 = E4M3Table();
  const uint32_t block = l.weight_bytes / l.scale_bytes;
  for (size_t r = 0; r < count; ++r) {
    const auto* rec = reinterpret_cast<const uint8_t*>(records + r * record_bytes);
    const uint8_t* w = rec + l.weight_offset;
    const uint8_t* s = rec + l.scale_offset;
    Out* o = out + r * l.weight_bytes;
    for (uint32_t k = 0; k < l.scale_bytes; ++k) {
      const float scale = DecodeUE8M0(s[k]);
      for (uint32_t i = k * block; i < (k + 1) * block; ++i) o[i] = static_cast<Out>(e4m3[w[i]] * scale);
    }
  }
}

}  // namespace

float DecodeE4M3(uint8_t bits) { return E4M3Table()[bits]; }

float DecodeUE8M0(uint8_t bits) {
  if (bits == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(bits) - 127);
}

Result<Fp8RecordLayout> Fp8RecordLayoutFromMetadata(const std::string& metadata_json, uint32_t record_bytes) {
  nlohmann::json meta = nlohmann::json::parse(metadata_json, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* fields = nullptr;
  if (meta.is_object() && meta.contains("record") && meta["record"].is_object() &&
      meta["record"].contains("fields") && meta["record"]["fields"].is_array()) {
    fields = &meta["record"]["fields"];
  }
  if (fields == nullptr) return Status::InvalidArgument("the table's metadata describes no record fields");
  Fp8RecordLayout l;
  bool weight = false, scale = false;
  for (const auto& f : *fields) {
    if (!f.is_object() || !f.contains("dtype") || !f["dtype"].is_string() || !f.contains("offset") ||
        !f["offset"].is_number_unsigned() || !f.contains("bytes") || !f["bytes"].is_number_unsigned()) {
      continue;
    }
    const std::string dtype = f["dtype"].get<std::string>();
    const uint64_t offset = f["offset"].get<uint64_t>(), bytes = f["bytes"].get<uint64_t>();
    if (offset + bytes > record_bytes || bytes == 0) return Status::InvalidArgument("a record field lies outside the record");
    if (dtype == "F8_E4M3" && !weight) {
      l.weight_offset = uint32_t(offset), l.weight_bytes = uint32_t(bytes), weight = true;
    } else if (dtype == "F8_E8M0" && !scale) {
      l.scale_offset = uint32_t(offset), l.scale_bytes = uint32_t(bytes), scale = true;
    }
  }
  if (!weight || !scale) {
    return Status::InvalidArgument("dequantization needs records of an F8_E4M3 weight and F8_E8M0 scales; this table's are " +
                                   fields->dump());
  }
  if (l.weight_bytes % l.scale_bytes != 0) {
    return Status::InvalidArgument("weight bytes " + std::to_string(l.weight_bytes) + " are not a multiple of scale bytes " +
                                   std::to_string(l.scale_bytes));
  }
  return l;
}

void Dequantize(const std::byte* records, size_t count, uint32_t record_bytes, const Fp8RecordLayout& layout,
                float* out) {
  DequantizeAs(records, count, record_bytes, layout, out);
}

void Dequantize(const std::byte* records, size_t count, uint32_t record_bytes, const Fp8RecordLayout& layout,
                _Float16* out) {
  DequantizeAs(records, count, record_bytes, layout, out);
}

}  // namespace engram::python
