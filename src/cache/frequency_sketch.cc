#include "src/cache/frequency_sketch.h"

#include <algorithm>

namespace engram::cache {

FrequencySketch::FrequencySketch(uint64_t bytes, uint32_t depth, uint32_t counter_bits, uint64_t seed,
                                 bool conservative, bool blocked)
    : bytes_(blocked ? std::max<uint64_t>(kBlockBytes, bytes / kBlockBytes * kBlockBytes) : bytes),
      depth_(depth),
      bits_(counter_bits),
      max_((1u << counter_bits) - 1),
      width_(bytes_ * (8 / counter_bits) / depth),
      blocked_(blocked),
      blocks_(bytes_ / kBlockBytes),
      seed_(Remix(seed ^ 0x5ce7c4a1d2b3f607ULL)),
      conservative_(conservative),
      counters_(AnonymousMemory::AllocateOrThrow(bytes_, "frequency sketch")) {}

template <bool kBlocked, uint32_t kBits>
void FrequencySketch::CountWithDepth(const Probe& p) {
  // The presets' depths (default 2, legacy 4) get loops of a fixed length,
  // which the compiler unrolls: this runs on every lookup.
  switch (depth_) {
    case 2: return CountAt<kBlocked, kBits, 2>(p);
    case 4: return CountAt<kBlocked, kBits, 4>(p);
    default: return CountAt<kBlocked, kBits, 0>(p);
  }
}

void FrequencySketch::Increment(const Probe& p) {
  if (blocked_) {
    bits_ == 8 ? CountWithDepth<true, 8>(p) : CountWithDepth<true, 4>(p);
  } else {
    bits_ == 8 ? CountWithDepth<false, 8>(p) : CountWithDepth<false, 4>(p);
  }
}

uint32_t FrequencySketch::Estimate(uint64_t hash) const {
  Probe p = ProbeOf(hash);
  uint32_t m = max_;
  for (uint32_t i = 0; i < depth_; ++i) {
    uint32_t v = Get(IndexIn(p, i));
    if (v < m) m = v;
  }
  return m;
}

void FrequencySketch::Halve() {
  // Halving both nibbles of a byte at once: shift, then drop the bit that
  // crossed from the high nibble into the low one.
  const uint8_t mask = bits_ == 8 ? 0x7f : 0x77;
  for (uint64_t i = 0; i < bytes_; ++i) {
    // Reading an untouched page maps the shared zero page; only counters
    // that are nonzero are written, so halving commits no new memory.
    std::atomic_ref<uint8_t> cell = Byte(i);
    uint8_t v = cell.load(std::memory_order_relaxed);
    if (v != 0) cell.store(static_cast<uint8_t>((v >> 1) & mask), std::memory_order_relaxed);
  }
  halvings_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace engram::cache
