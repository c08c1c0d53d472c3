#include "src/store/gather_arguments.h"

#include <cstdint>

#include "src/store/gather_plan.h"

namespace engram {
namespace {

// Whether count rows of record bytes at stride from dst stay inside the
// address space. The copy writes dst + i * stride for i < count, which must
// not wrap round the address space. (A huge stride must be refused, not
// turned into a wild pointer; a buffer merely too small cannot be detected.)
bool DestinationFits(const std::byte* dst, size_t count, size_t stride, size_t record) {
  const size_t last = count - 1;
  if (stride != 0 && last > (size_t(PTRDIFF_MAX) - record) / stride) return false;
  return last * stride + record <= UINTPTR_MAX - reinterpret_cast<uintptr_t>(dst);
}

}  // namespace

Status CheckGatherArguments(const GatherTarget& target, size_t table, std::span<const uint64_t> row_ids,
                            const std::byte* dst, size_t stride) {
  if (table >= target.table_count) return Status::InvalidArgument("gather: no table " + std::to_string(table));
  if (stride < target.record_bytes) {
    return Status::InvalidArgument("gather: stride " + std::to_string(stride) + " is smaller than a row (" +
                                   std::to_string(target.record_bytes) + " B)");
  }
  if (dst == nullptr && !row_ids.empty()) return Status::InvalidArgument("gather: no destination buffer");
  if (!row_ids.empty() && !DestinationFits(dst, row_ids.size(), stride, target.record_bytes)) {
    return Status::InvalidArgument("gather: " + std::to_string(row_ids.size()) + " rows at stride " +
                                   std::to_string(stride) + " overflow the address space");
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
