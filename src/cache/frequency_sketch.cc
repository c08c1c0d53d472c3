#include "src/cache/frequency_sketch.h"

#include <algorithm>

#include "src/cache/set_hasher.h"

namespace engram::cache {

namespace {
constexpr uint64_t kBlockBytes = 64;
}  // namespace

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

FrequencySketch::Probe FrequencySketch::ProbeOf(uint64_t hash) const {
  // Kirsch-Mitzenmacher double hashing: row i uses a + i*b. Remixing with the
  // seed decorrelates the counters from the set index (hash % num_sets).
  uint64_t a = Remix(hash ^ seed_);
  const uint64_t b = Remix(a) | 1;
  if (blocked_) {
    // The key's block, chosen once per operation from a's high bits; IndexIn
    // only adds the offsets.
    const uint64_t block = static_cast<uint64_t>((static_cast<unsigned __int128>(a) * blocks_) >> 64);
    return {block * kBlockBytes * (8 / bits_), b};
  }
  return {a, b};
}

uint64_t FrequencySketch::IndexIn(const Probe& p, uint32_t row) const {
  if (blocked_) {
    // p.a is the block's first counter; offsets o + row * step (step odd, so
    // the depth <= 8 offsets are distinct modulo the power-of-two block size).
    const uint64_t per_block = kBlockBytes * (8 / bits_);
    return p.a + ((p.b + row * ((p.b >> 32) | 1)) & (per_block - 1));
  }
  uint64_t x = p.a + row * p.b;
  // Multiply-shift range reduction: uniform over any width, no division.
  return row * width_ + static_cast<uint64_t>((static_cast<unsigned __int128>(x) * width_) >> 64);
}

uint32_t FrequencySketch::Get(uint64_t counter) const {
  if (bits_ == 8) return Byte(counter).load(std::memory_order_relaxed);
  uint8_t byte = Byte(counter >> 1).load(std::memory_order_relaxed);
  return (counter & 1) ? (byte >> 4) : (byte & 0x0f);
}

void FrequencySketch::Bump(uint64_t counter) {
  if (bits_ == 8) {
    std::atomic_ref<uint8_t> cell = Byte(counter);
    uint8_t v = cell.load(std::memory_order_relaxed);
    if (v != 0xff) cell.store(v + 1, std::memory_order_relaxed);
    return;
  }
  std::atomic_ref<uint8_t> cell = Byte(counter >> 1);
  uint8_t byte = cell.load(std::memory_order_relaxed);
  unsigned shift = (counter & 1) ? 4 : 0;
  if (((byte >> shift) & 0x0f) != 0x0f) cell.store(static_cast<uint8_t>(byte + (1u << shift)), std::memory_order_relaxed);
}

void FrequencySketch::Increment(uint64_t hash) {
  Probe p = ProbeOf(hash);
  if (!conservative_) {
    for (uint32_t i = 0; i < depth_; ++i) Bump(IndexIn(p, i));
  } else {
    uint64_t idx[8];
    uint32_t val[8];
    uint32_t m = max_;
    for (uint32_t i = 0; i < depth_; ++i) {
      idx[i] = IndexIn(p, i);
      val[i] = Get(idx[i]);
      if (val[i] < m) m = val[i];
    }
    if (m != max_) {
      for (uint32_t i = 0; i < depth_; ++i) {
        if (val[i] == m) Bump(idx[i]);
      }
    }
  }
}

void FrequencySketch::Prefetch(uint64_t hash) const {
  const Probe p = ProbeOf(hash);
  // A counter's byte: 8-bit counters one per byte, 4-bit two per byte.
  const unsigned shift = bits_ == 8 ? 0 : 1;
  if (blocked_) {
    __builtin_prefetch(counters_.data() + (IndexIn(p, 0) >> shift));
    return;
  }
  for (uint32_t i = 0; i < depth_; ++i) __builtin_prefetch(counters_.data() + (IndexIn(p, i) >> shift));
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
