// SetHasher: maps a row ID to its 64-bit hash and its candidate set(s).
//
// One XXH3 per operation: the hash picks the primary set (hash modulo the set
// count, as in the reported cache) and, remixed, the second candidate set and
// the sketch counters. Tests use it to craft row IDs that collide in a set.
//
// Direct placement: when the cache has a slot for every row its table can
// hold (row IDs < num_sets * ways), the "hash" is the row ID itself and row r
// lives in set r / ways, way r % ways (SetAssociativeRowCache places it
// there): slot r of the slab, which no other row shares. No row is ever
// evicted by another, whatever the policy, a budget that covers the table
// holds all of it, and a hit can find a row's payload from its ID alone
// (src/cache/residency_bitmap.h). With hashed placement, the same cache holds
// about 98 % (two candidate sets) or less, and the rest misses forever. The
// sketch and the ghost history remix the hash with their seed, so they see no
// difference. A row ID beyond the slots has no home: its "set" is r %
// num_sets, it is never placed, and every lookup of it misses.
#pragma once

// xxHash's documented inline build (its functions static, renamed with an
// XXH_INLINE_ prefix, so they never clash with the shared library's): a
// lookup's XXH3 of an 8-byte key compiles into the caller instead of a call
// through the PLT into the library's length dispatch.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdint>

namespace engram::cache {

// Murmur3's 64-bit finalizer: a cheap bijective remix of a hash, so a second
// independent-looking value comes from the first without hashing the key twice.
inline uint64_t Remix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

struct CandidateSets {
  uint64_t first;
  uint64_t second;  // == first when the row has one candidate set
};

class SetHasher {
 public:
  // direct_ways: the ways of a set, for direct placement; 0 for hashed.
  SetHasher(uint64_t seed, uint64_t num_sets, uint32_t candidate_sets, uint32_t direct_ways = 0)
      : seed_(seed),
        num_sets_(num_sets),
        two_(direct_ways == 0 && candidate_sets == 2 && num_sets > 1),
        direct_ways_(direct_ways) {}

  uint64_t Hash(uint64_t row_id) const {
    return direct_ways_ != 0 ? row_id : XXH3_64bits_withSeed(&row_id, sizeof(row_id), seed_);
  }

  CandidateSets Candidates(uint64_t hash) const {
    const uint64_t first = First(hash);
    return {first, Second(hash, first)};
  }
  // The two halves of Candidates, for a lookup that needs the second set only
  // when the row is not in its first.
  uint64_t First(uint64_t hash) const {
    if (direct_ways_ != 0 && hash / direct_ways_ < num_sets_) return hash / direct_ways_;
    return hash % num_sets_;
  }
  // Direct placement: the way of row_id's set it lives in, if it has a slot.
  bool DirectWay(uint64_t row_id, uint32_t* way) const {
    if (direct_ways_ == 0 || row_id / direct_ways_ >= num_sets_) return false;
    *way = static_cast<uint32_t>(row_id % direct_ways_);
    return true;
  }
  uint64_t Second(uint64_t hash, uint64_t first) const {
    if (!two_) return first;
    // Uniform over the other num_sets - 1 sets, so the two always differ.
    uint64_t second = first + 1 + Remix(hash ^ 0x9e3779b97f4a7c15ULL) % (num_sets_ - 1);
    if (second >= num_sets_) second -= num_sets_;  // < 2 * num_sets: a subtraction, not a third divide
    return second;
  }
  CandidateSets CandidatesOf(uint64_t row_id) const { return Candidates(Hash(row_id)); }

  // The set a resident of `current` would move to (its other candidate).
  uint64_t OtherSet(uint64_t row_id, uint64_t current) const {
    CandidateSets c = CandidatesOf(row_id);
    return c.first == current ? c.second : c.first;
  }

  uint64_t num_sets() const { return num_sets_; }
  bool two_candidates() const { return two_; }
  bool direct() const { return direct_ways_ != 0; }

 private:
  uint64_t seed_;
  uint64_t num_sets_;
  bool two_;
  uint32_t direct_ways_;
};

}  // namespace engram::cache
