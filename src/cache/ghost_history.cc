#include "src/cache/ghost_history.h"

#include <algorithm>

#include "src/cache/set_hasher.h"

namespace engram::cache {

GhostHistory::GhostHistory(uint64_t bytes, uint32_t epoch_bits, uint64_t granularity, uint64_t seed,
                           uint32_t flag_bits)
    : buckets_(std::max<uint64_t>(bytes / 64, 1)),
      epoch_bits_(epoch_bits),
      epoch_mask_(static_cast<uint16_t>((1u << epoch_bits) - 1)),
      flag_mask_(static_cast<uint16_t>(flag_bits != 0 ? 1u << epoch_bits : 0)),
      // The sweep visits every bucket once per (2^bits - max_age) epochs, so
      // an entry is cleared at an age in [max_age, 2^bits): before it wraps.
      // A quarter of the epoch range for the sweep, the rest trusted.
      max_age_((1u << epoch_bits) - std::max(1u, (1u << epoch_bits) / 4)),
      granularity_(std::max<uint64_t>(granularity, 1)),
      seed_(Remix(seed ^ 0x6a09e667f3bcc908ULL)),
      words_(AnonymousMemory::AllocateOrThrow(buckets_ * 64, "ghost history")) {}

GhostHistory::Slot GhostHistory::SlotOf(uint64_t hash) const {
  const uint64_t h = Remix(hash ^ seed_);
  Slot s;
  s.bucket = static_cast<uint64_t>((static_cast<unsigned __int128>(h) * buckets_) >> 64);
  const uint32_t low_bits = epoch_bits_ + (flag_mask_ != 0 ? 1 : 0);
  const uint32_t fp_bits = 16 - low_bits;
  uint16_t fp = static_cast<uint16_t>(h & ((1u << fp_bits) - 1));  // low bits: independent of the bucket
  if (fp == 0) fp = 1;
  s.fingerprint = static_cast<uint16_t>(fp << low_bits);
  return s;
}

void GhostHistory::ScanBucket(const Slot& s, uint64_t now_epoch, Scan* scan) const {
  for (uint32_t w = 0; w < kWordsPerBucket; ++w) {
    const uint64_t v = Word(s.bucket, w).load(std::memory_order_relaxed);
    for (uint32_t k = 0; k < 4; ++k) scan->entries[w * 4 + k] = static_cast<uint16_t>(v >> (16 * k));
  }
  const uint16_t fp_mask = static_cast<uint16_t>(~(epoch_mask_ | flag_mask_));
  for (uint32_t i = 0; i < kEntriesPerBucket; ++i) {
    const uint16_t e = scan->entries[i];
    if (e == 0) {
      if (!scan->target_empty) {
        scan->target = static_cast<int>(i);
        scan->target_empty = true;
      }
      continue;
    }
    if ((e & fp_mask) == s.fingerprint) {
      scan->match = static_cast<int>(i);
      return;
    }
    if (!scan->target_empty) {
      const uint32_t age = EpochAge(e, now_epoch);
      if (scan->target < 0 || age >= scan->target_age) {
        scan->target = static_cast<int>(i);
        scan->target_age = age;
      }
    }
  }
}

void GhostHistory::StoreEntry(uint64_t bucket, int index, uint16_t value) {
  std::atomic_ref<uint64_t> word = Word(bucket, static_cast<uint32_t>(index / 4));
  const int shift = 16 * (index % 4);
  uint64_t old = word.load(std::memory_order_relaxed);
  uint64_t updated;
  do {
    updated = (old & ~(uint64_t{0xffff} << shift)) | (uint64_t{value} << shift);
  } while (!word.compare_exchange_weak(old, updated, std::memory_order_relaxed));
}

void GhostHistory::Place(const Slot& s, const Scan& scan, uint64_t when_epoch, uint64_t now_epoch) {
  const uint16_t entry = static_cast<uint16_t>(s.fingerprint | (when_epoch & epoch_mask_));
  const uint64_t age = now_epoch - when_epoch;
  if (scan.match >= 0) {
    // Keep the more recent of the two accesses.
    if (EpochAge(scan.entries[scan.match], now_epoch) > age) StoreEntry(s.bucket, scan.match, entry);
    return;
  }
  // An empty entry, else the oldest one -- unless every entry is younger
  // than this access (recording a departing row's old access must not push
  // out a row seen since).
  if (scan.target_empty || scan.target_age >= age) StoreEntry(s.bucket, scan.target, entry);
}

uint64_t GhostHistory::Touch(uint64_t hash, uint64_t now, bool* flagged) {
  const Slot s = SlotOf(hash);
  const uint64_t now_epoch = now / granularity_;
  Scan scan;
  ScanBucket(s, now_epoch, &scan);
  uint64_t previous = kNever;
  bool was_flagged = false;
  if (scan.match >= 0) {
    const uint16_t entry = scan.entries[scan.match];
    const uint32_t age = EpochAge(entry, now_epoch);
    if (age < max_age_) {
      previous = uint64_t{age} * granularity_;
      was_flagged = (entry & flag_mask_) != 0;
    }
    // This access replaces the entry (and clears the mark).
    const uint16_t now_entry = static_cast<uint16_t>(s.fingerprint | (now_epoch & epoch_mask_));
    if (entry != now_entry) StoreEntry(s.bucket, scan.match, now_entry);
  } else {
    Place(s, scan, now_epoch, now_epoch);
  }
  if (flagged != nullptr) *flagged = was_flagged;
  return previous;
}

void GhostHistory::MarkFlag(uint64_t hash, uint64_t now) {
  if (flag_mask_ == 0) return;
  const Slot s = SlotOf(hash);
  Scan scan;
  ScanBucket(s, now / granularity_, &scan);
  if (scan.match >= 0) StoreEntry(s.bucket, scan.match, static_cast<uint16_t>(scan.entries[scan.match] | flag_mask_));
}

void GhostHistory::Record(uint64_t hash, uint64_t when, uint64_t now) {
  const uint64_t now_epoch = now / granularity_;
  const uint64_t when_epoch = std::min(when, now) / granularity_;
  if (now_epoch - when_epoch >= max_age_) return;  // too old to tell apart from "never"
  const Slot s = SlotOf(hash);
  Scan scan;
  ScanBucket(s, now_epoch, &scan);
  Place(s, scan, when_epoch, now_epoch);
}

uint64_t GhostHistory::AgeOf(uint64_t hash, uint64_t now) const {
  const Slot s = SlotOf(hash);
  const uint64_t now_epoch = now / granularity_;
  Scan scan;
  ScanBucket(s, now_epoch, &scan);
  if (scan.match < 0) return kNever;
  const uint32_t age = EpochAge(scan.entries[scan.match], now_epoch);
  return age >= max_age_ ? kNever : uint64_t{age} * granularity_;
}

void GhostHistory::Sweep(uint64_t now, uint64_t max_buckets) {
  const uint64_t period_ticks = uint64_t{(1u << epoch_bits_) - max_age_} * granularity_;
  // Buckets that should have been visited by now: the whole table once per period.
  const uint64_t due = static_cast<uint64_t>((static_cast<unsigned __int128>(now) * buckets_) / period_ticks);
  uint64_t done = swept_.load(std::memory_order_relaxed);
  if (done >= due) return;
  // Behind by more than a table: only the last table's worth matters.
  const uint64_t from = std::max(done, due > buckets_ ? due - buckets_ : 0);
  const uint64_t to = due - from > max_buckets ? from + max_buckets : due;
  if (!swept_.compare_exchange_strong(done, to, std::memory_order_relaxed)) return;  // another thread sweeps
  const uint64_t now_epoch = now / granularity_;
  // A word's four entries are tested at once, lane by lane in 16 bits
  // (epoch_bits <= 8, so no lane carries into the next): lane age =
  // (now's epoch + 2^epoch_bits - entry's epoch) & epoch mask; the lane is
  // due when age + (2^epoch_bits - max_age) reaches bit epoch_bits and the
  // entry is not empty (its lane's top bit, set by adding 0x7fff to its low
  // 15 bits or by its own top bit, moved down to bit epoch_bits). Most words
  // hold nothing due and are passed over; a word that does is cleared entry
  // by entry.
  constexpr uint64_t kLanes = 0x0001000100010001ull;
  constexpr uint64_t kLow15 = kLanes * 0x7fff;
  constexpr uint64_t kTop = kLanes * 0x8000;
  const uint64_t top = uint64_t{epoch_mask_} + 1;  // 2^epoch_bits
  const uint64_t epoch_lanes = kLanes * epoch_mask_;
  const uint64_t now_lanes = kLanes * ((now_epoch & epoch_mask_) + top);
  const uint64_t due_bias = kLanes * (top - max_age_);
  const uint64_t due_bit = kLanes * top;
  for (uint64_t i = from; i < to; ++i) {
    const uint64_t bucket = i % buckets_;
    for (uint32_t w = 0; w < kWordsPerBucket; ++w) {
      const uint64_t v = Word(bucket, w).load(std::memory_order_relaxed);
      const uint64_t age = (now_lanes - (v & epoch_lanes)) & epoch_lanes;
      const uint64_t occupied = ((((v & kLow15) + kLow15) | v) & kTop) >> (15 - epoch_bits_);
      if (((age + due_bias) & due_bit & occupied) == 0) continue;
      for (uint32_t k = 0; k < 4; ++k) {
        const uint16_t e = static_cast<uint16_t>(v >> (16 * k));
        if (e != 0 && EpochAge(e, now_epoch) >= max_age_) StoreEntry(bucket, int(w * 4 + k), 0);
      }
    }
  }
}

}  // namespace engram::cache
