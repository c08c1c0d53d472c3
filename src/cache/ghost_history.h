// GhostHistory: when was a row that is *not* in the cache last accessed?
//
// Reuse-distance admission (AdmissionRule::kReuseDistance) compares a missed
// row's previous access with the victim's last access: a row that comes back
// sooner than the victim has been idle is the better bet (LIRS's test). The
// victim's last access is its stamp in the index; the candidate is not
// resident, so its previous access must be remembered elsewhere, for every
// recently seen distinct row -- which outnumber the cached rows several times
// under pressure. A plain array of timestamps indexed by hash is no good at
// that size (rows overwrite each other's entries, and a never-seen row then
// looks recently seen), so this is a table of *tagged* entries:
//
//  - 16-bit entries, 32 to a 64-byte bucket; a row maps to one bucket and is
//    identified in it by a (16 - epoch_bits)-bit fingerprint (never 0: 0 marks
//    an empty entry). A false match needs another row of the same bucket with
//    the same fingerprint: about 32 / 2^13 = 0.4 % with 3 epoch bits.
//  - The low epoch_bits hold the access time in epochs (ticks / granularity)
//    modulo 2^epoch_bits. Ages below max_age_epochs() (3/4 of the range) are
//    exact to an epoch; older entries read as "never", and a sweep (Sweep)
//    clears them before their epoch wraps, so an old entry is forgotten
//    rather than mistaken for a young one.
//  - A new row takes an empty entry of its bucket, else the oldest one: the
//    table remembers the most recently seen rows, as much as fits.
//  - Optionally (flag_bits = 1) one fingerprint bit is a mark the caller sets
//    on a remembered row (MarkFlag) and reads back on its next access
//    (Touch): adaptive admission marks the rows it refused, to tell them
//    from evicted rows when they come back. Recording an access clears it.
//
// A bucket is read as eight relaxed 64-bit loads into a local copy and
// scanned there (no atomic operation per entry); an entry is written with a
// compare-and-swap of its 64-bit word, so writes to neighbouring entries are
// never lost.
//
// Thread safety: two racing records of *different rows* into one bucket may
// pick the same entry, and one of them is lost; that only makes the history
// more approximate (an admission decision, never a wrong row).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "src/cache/anonymous_memory.h"

namespace engram::cache {

class GhostHistory {
 public:
  static constexpr uint32_t kEntriesPerBucket = 32;  // 64 bytes
  static constexpr uint64_t kNever = ~uint64_t{0};

  // bytes >= 64 (rounded down to whole buckets); epoch_bits 2..8;
  // granularity >= 1 ticks per epoch; flag_bits 0 or 1. The table is anonymous memory (zero
  // pages, i.e. empty entries, until first written), so it costs no RSS
  // until rows are recorded; throws std::bad_alloc if it cannot be mapped.
  GhostHistory(uint64_t bytes, uint32_t epoch_bits, uint64_t granularity, uint64_t seed, uint32_t flag_bits = 0);

  // The row (by its 64-bit hash) is accessed now: returns the age of its
  // previous recorded access (as AgeOf) and records this one, in one pass.
  // flagged (if given): whether that previous access carried the mark.
  uint64_t Touch(uint64_t hash, uint64_t now, bool* flagged = nullptr);
  // Marks the row's remembered access (no-op if the row is not remembered,
  // or the table has no flag bit).
  void MarkFlag(uint64_t hash, uint64_t now);
  // The row was last accessed at tick `when` (<= now), e.g. a row leaving
  // the cache. Never makes a row's recorded access older, and never pushes
  // out a row recorded more recently than `when`.
  void Record(uint64_t hash, uint64_t when, uint64_t now);
  // Starts loading the row's bucket into the CPU cache.
  void Prefetch(uint64_t hash) const { __builtin_prefetch(Bucket(SlotOf(hash).bucket)); }
  // Ticks since the row's recorded access, rounded down to whole epochs, or
  // kNever if it is not in the table (never seen, or forgotten).
  uint64_t AgeOf(uint64_t hash, uint64_t now) const;
  // Clears entries that are about to become ambiguous. Visits the buckets
  // the clock has moved past since the last call, at most max_buckets of
  // them: callers call it with the small default on every record, and with
  // kSweepAllDue periodically from the clock (else a cache that only hits
  // would let epochs wrap).
  static constexpr uint64_t kSweepPerRecord = 4;
  static constexpr uint64_t kSweepAllDue = ~uint64_t{0};
  void Sweep(uint64_t now, uint64_t max_buckets = kSweepPerRecord);

  uint64_t memory_bytes() const { return buckets_ * 64; }
  uint64_t granularity() const { return granularity_; }
  uint32_t max_age_epochs() const { return max_age_; }

  // The history's memory (for committing it or mapping it with huge pages).
  std::span<uint8_t> memory() const { return {words_.data(), words_.size()}; }

 private:
  static constexpr uint32_t kWordsPerBucket = kEntriesPerBucket / 4;
  struct Slot {
    uint64_t bucket;
    uint16_t fingerprint;  // already shifted into the high bits
  };
  // A bucket's entries as loaded, plus what a record needs to know.
  struct Scan {
    uint16_t entries[kEntriesPerBucket];
    int match = -1;          // entry holding the row's fingerprint
    int target = -1;         // empty entry, else the oldest one
    uint32_t target_age = 0;
    bool target_empty = false;
  };
  Slot SlotOf(uint64_t hash) const;
  uint32_t EpochAge(uint16_t entry, uint64_t now_epoch) const {
    return static_cast<uint32_t>((now_epoch - entry) & epoch_mask_);
  }
  // Word w of bucket b, accessed atomically in place.
  std::atomic_ref<uint64_t> Word(uint64_t b, uint32_t w) const {
    return std::atomic_ref<uint64_t>(reinterpret_cast<uint64_t*>(words_.data())[b * kWordsPerBucket + w]);
  }
  const uint8_t* Bucket(uint64_t b) const { return words_.data() + b * 64; }
  void ScanBucket(const Slot& s, uint64_t now_epoch, Scan* scan) const;
  void StoreEntry(uint64_t bucket, int index, uint16_t value);
  void Place(const Slot& s, const Scan& scan, uint64_t when_epoch, uint64_t now_epoch);

  uint64_t buckets_;
  uint32_t epoch_bits_;
  uint16_t epoch_mask_;
  uint16_t flag_mask_;  // the mark's bit (just above the epoch), 0 without one
  uint32_t max_age_;  // entries this many epochs old are cleared by the sweep
  uint64_t granularity_;
  uint64_t seed_;
  AnonymousMemory words_;  // uint64 words, 4 entries per word, entry i in bits 16*(i%4)
  // Sweep position, in buckets since the start (monotonic).
  std::atomic<uint64_t> swept_{0};
};

}  // namespace engram::cache
