#include "src/cache/huge_page_promotion.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

namespace engram::cache {
namespace {

constexpr uint64_t kHugePage = uint64_t{2} << 20;
#ifndef MADV_COLLAPSE
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1; older headers lack it
#endif
#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif

}  // namespace

HugePagePromotion::~HugePagePromotion() {
  stop_.store(true, std::memory_order_relaxed);
  MutexLock lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

void HugePagePromotion::Start(std::vector<std::span<uint8_t>> regions, bool populate) {
  std::call_once(once_, [&] {
    MutexLock lock(&join_mu_);
    thread_ = std::thread([this, populate, regions = std::move(regions)]() mutable { Run(std::move(regions), populate); });
  });
}

void HugePagePromotion::Wait() {
  MutexLock lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

bool HugePagePromotion::Populate(std::span<uint8_t> r) {
  // One huge page at a time, so that a stop is seen soon.
  for (uint64_t off = 0; off < r.size(); off += kHugePage) {
    if (stop_.load(std::memory_order_relaxed)) return false;
    const uint64_t len = std::min<uint64_t>(kHugePage, r.size() - off);
    if (::madvise(r.data() + off, len, MADV_POPULATE_WRITE) != 0) {
      // EINVAL: an older kernel. ENOMEM / EFAULT: no memory for it now; the
      // pages then come on first touch, as without populating.
      return false;
    }
    populated_.fetch_add(len, std::memory_order_relaxed);
  }
  return true;
}

void HugePagePromotion::Run(std::vector<std::span<uint8_t>> regions, bool populate) {
  // Asked first, so that ranges populated or faulted from now on come in as
  // huge pages where the kernel has them.
  for (std::span<uint8_t> r : regions) {
    if (r.size() >= kHugePage) (void)::madvise(r.data(), r.size(), MADV_HUGEPAGE);
  }
  if (populate) {
    for (std::span<uint8_t> r : regions) {
      if (!Populate(r)) break;
    }
  }
  bool collapse = true;  // MADV_COLLAPSE works here (until it says EINVAL)
  for (std::span<uint8_t> r : regions) {
    if (r.size() < kHugePage) continue;
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
