// HugePagePromotion: turns the committed 4 KiB pages of a cache's arrays into
// transparent huge pages, on a background thread.
//
// Why: a cache's probes land at random all over its index and row slab, so on
// 4 KiB pages nearly every probe is also a TLB miss (a 66 MiB slab spans 16 k
// pages, several times what the TLB maps), and a resident row cost ~2x a
// flat memcpy of it from a huge-page array. Asking for huge pages
// (MADV_HUGEPAGE) only helps faults in 2 MiB ranges nothing has touched yet,
// and rows scattered by hash touch every range within a few thousand
// inserts; the pages already committed stay small until khugepaged gets to
// them, which takes minutes. MADV_COLLAPSE (Linux >= 6.1) rebuilds a range
// as a huge page now, but copies it: ~0.3 s for 66 MiB on a busy host, far
// too long for the insert that crosses a threshold to wait for. So Start()
// returns at once and a thread collapses one 2 MiB range at a time, while
// lookups and inserts go on (the kernel makes a collapse atomic with respect
// to the process's own accesses). Contents never change; only the mapping.
//
// Where MADV_COLLAPSE is missing, MADV_HUGEPAGE alone is left in place.
//
// With populate, the thread first commits every page of the regions
// (MADV_POPULATE_WRITE, Linux >= 5.14), as huge pages wherever a 2 MiB range
// was still untouched: a store whose whole cache will be used anyway then
// pays no page fault on its first inserts (on a fresh cache a fault and a
// 4 KiB clear per insert cost more than the insert itself). Populating never
// changes a page that is already there, so it runs alongside inserts.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "storage/mutex.h"

namespace engram::cache {

class HugePagePromotion {
 public:
  HugePagePromotion() = default;
  // Stops between two ranges and joins: the regions must outlive this.
  ~HugePagePromotion();
  HugePagePromotion(const HugePagePromotion&) = delete;
  HugePagePromotion& operator=(const HugePagePromotion&) = delete;

  // Promotes the regions (each page-aligned) in the background, after
  // committing all of their pages if `populate`; only the first call does
  // anything. Regions smaller than one huge page are not promoted.
  void Start(std::vector<std::span<uint8_t>> regions, bool populate = false);
  // Blocks until the promotion has finished (at once if it never started).
  void Wait();
  // 2 MiB ranges collapsed into huge pages so far.
  uint64_t collapsed_ranges() const { return collapsed_.load(std::memory_order_relaxed); }
  // Bytes committed by populating so far.
  uint64_t populated_bytes() const { return populated_.load(std::memory_order_relaxed); }

 private:
  void Run(std::vector<std::span<uint8_t>> regions, bool populate);
  // False once the kernel has refused MADV_POPULATE_WRITE, or on stop.
  bool Populate(std::span<uint8_t> region);

  std::once_flag once_;
  Mutex join_mu_;  // serialises Wait with the destructor
  std::thread thread_ GUARDED_BY(join_mu_);
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> collapsed_{0};
  std::atomic<uint64_t> populated_{0};
};

}  // namespace engram::cache
