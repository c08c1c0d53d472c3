#include "src/cache/huge_page_promotion.h"

#include <sys/mman.h>

#include <cerrno>

namespace engram::cache {
namespace {

constexpr uint64_t kHugePage = uint64_t{2} << 20;
#ifndef MADV_COLLAPSE
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1; older headers lack it
#endif

}  // namespace

HugePagePromotion::~HugePagePromotion() {
  stop_.store(true, std::memory_order_relaxed);
  std::lock_guard lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

void HugePagePromotion::Start(std::vector<std::span<uint8_t>> regions) {
  std::call_once(once_, [&] {
    std::lock_guard lock(join_mu_);
    thread_ = std::thread([this, regions = std::move(regions)]() mutable { Run(std::move(regions)); });
  });
}

void HugePagePromotion::WaitForTesting() {
  std::lock_guard lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

void HugePagePromotion::Run(std::vector<std::span<uint8_t>> regions) {
  bool collapse = true;  // MADV_COLLAPSE works here (until it says EINVAL)
  for (std::span<uint8_t> r : regions) {
    if (r.size() < kHugePage) continue;
    (void)::madvise(r.data(), r.size(), MADV_HUGEPAGE);
    // Whole huge pages inside the region only: a range straddling its ends
    // would take in memory that is not the cache's.
    const auto begin = reinterpret_cast<uintptr_t>(r.data());
    const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
    const uintptr_t end = (begin + r.size()) & ~(kHugePage - 1);
    for (uintptr_t p = first; collapse && p < end; p += kHugePage) {
      if (stop_.load(std::memory_order_relaxed)) return;
      if (::madvise(reinterpret_cast<void*>(p), kHugePage, MADV_COLLAPSE) == 0) {
        collapsed_.fetch_add(1, std::memory_order_relaxed);
      } else if (errno == EINVAL || errno == EPERM) {
        collapse = false;  // not supported (or THP off): MADV_HUGEPAGE is all we can do
      }
      // EAGAIN / ENOMEM (no huge page free right now): skip this range.
    }
  }
}

}  // namespace engram::cache
