#include "src/store/gather_arguments.h"

#include <cstdint>

#include "src/store/gather_plan.h"

namespace engram {
namespace {

// Whether count rows of record bytes placed as `d` says stay inside the
// address space: the copies write up to the last row's end, which must not
// wrap round the address space. (A huge stride must be refused, not turned
// into a wild pointer; a buffer merely too small cannot be detected.)
bool DestinationFits(const RowDestination& d, size_t count, size_t record) {
  const size_t last = count - 1;
  size_t groups = 0, in_group = last;  // the last row: its group, its index in that group
  if (d.group_rows != 0) {
    groups = last / d.group_rows;
    in_group = last % d.group_rows;
  }
  const size_t limit = size_t(PTRDIFF_MAX);
  if (d.stride != 0 && in_group > (limit - record) / d.stride) return false;
  const size_t in_group_end = in_group * d.stride + record;
  if (d.group_stride != 0 && groups > (limit - in_group_end) / d.group_stride) return false;
  const size_t end = groups * d.group_stride + in_group_end;
  return end <= UINTPTR_MAX - reinterpret_cast<uintptr_t>(d.dst);
}

}  // namespace

Status CheckGatherArguments(const GatherTarget& target, size_t table, std::span<const uint64_t> row_ids,
                            const RowDestination& dst) {
  if (table >= target.table_count) return Status::InvalidArgument("gather: no table " + std::to_string(table));
  if (dst.stride < target.record_bytes) {
    return Status::InvalidArgument("gather: stride " + std::to_string(dst.stride) + " is smaller than a row (" +
                                   std::to_string(target.record_bytes) + " B)");
  }
  if (dst.group_rows > UINT32_MAX) {
    return Status::InvalidArgument("gather: " + std::to_string(dst.group_rows) + " rows per group (at most " +
                                   std::to_string(UINT32_MAX) + ")");
  }
  // A group's rows end by (group_rows - 1) * stride + record: the next group
  // must start at or after that, or rows of two groups would overlap (an
  // extent past the address space overlaps whatever group_stride is).
  size_t extent = 0;
  if (dst.group_rows > 1 && (__builtin_mul_overflow(dst.group_rows - 1, dst.stride, &extent) ||
                             __builtin_add_overflow(extent, size_t{target.record_bytes}, &extent) ||
                             dst.group_stride < extent)) {
    return Status::InvalidArgument("gather: groups of " + std::to_string(dst.group_rows) + " rows at stride " +
                                   std::to_string(dst.stride) + " are " + std::to_string(dst.group_stride) +
                                   " B apart: the rows of one group would overlap the next's");
  }
  if (dst.dst == nullptr && !row_ids.empty()) return Status::InvalidArgument("gather: no destination buffer");
  if (!row_ids.empty() && !DestinationFits(dst, row_ids.size(), target.record_bytes)) {
    return Status::InvalidArgument("gather: " + std::to_string(row_ids.size()) + " rows at stride " +
                                   std::to_string(dst.stride) + " overflow the address space");
  }
  if (row_ids.size() >= GatherPlan::kNone) return Status::InvalidArgument("gather: too many row IDs in one gather");
  for (uint64_t id : row_ids) {
    if (id >= target.row_count) {
      return Status::OutOfRange("gather on table " + (target.name ? *target.name : std::string()) + ": row " +
                                std::to_string(id) + " is past the end of the table (" +
                                std::to_string(target.row_count) + " rows)");
    }
  }
  return Status::OK();
}

}  // namespace engram
