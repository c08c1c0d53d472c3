// RowPlacement: where a gather's row at position p goes, for a
// RowDestination (include/engram/store.h).
//
// A destination of groups puts row p at dst + (p / g) * group_stride +
// (p % g) * stride. The division runs once per distinct row and per repeat
// of one, so it is done as a multiply by a precomputed reciprocal (exact for
// every 32-bit p: Lemire, Kaser and Kurz, "Faster remainder by direct
// computation", 2019); a flat destination is a multiply-add, as before
// groups existed. A destination whose groups follow one another at `stride`
// (one layer of a one-layer step) is flat, and is placed as such.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engram/store.h"

namespace engram {

class RowPlacement {
 public:
  RowPlacement() = default;
  // Places rows as `d` says once it has passed CheckGatherArguments (which
  // refuses more than 2^32 - 1 rows per group; such a `d` is placed flat).
  explicit RowPlacement(const RowDestination& d) : dst_(d.dst), stride_(d.stride) {
    if (d.group_rows == 1) {
      stride_ = d.group_stride;  // every row its own group
    } else if (d.group_rows > 1 && d.group_rows <= UINT32_MAX && d.group_stride != d.group_rows * d.stride) {
      group_rows_ = static_cast<uint32_t>(d.group_rows);
      group_stride_ = d.group_stride;
      reciprocal_ = UINT64_MAX / group_rows_ + 1;
    }
  }

  bool flat() const { return group_rows_ == 0; }
  std::byte* dst() const { return dst_; }
  size_t stride() const { return stride_; }

  std::byte* At(uint32_t p) const {
    if (group_rows_ == 0) return dst_ + size_t(p) * stride_;
    const uint32_t group = static_cast<uint32_t>((static_cast<unsigned __int128>(reciprocal_) * p) >> 64);
    return dst_ + size_t(group) * group_stride_ + size_t(p - group * group_rows_) * stride_;
  }

 private:
  std::byte* dst_ = nullptr;
  size_t stride_ = 0;
  uint32_t group_rows_ = 0;  // 0: flat
  size_t group_stride_ = 0;
  uint64_t reciprocal_ = 0;  // 2^64 / group_rows_, rounded up
};

}  // namespace engram
