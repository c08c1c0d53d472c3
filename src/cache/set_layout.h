// SetLayout: where a set's index entries live, and the per-set spin lock.
//
// Index and payload are separate regions. The index is an array of sets of
// `stride` bytes. A set of up to 8 ways has a compact 4-byte header:
//
//   [0, 2)     lock word (atomic via std::atomic_ref<uint16_t>): bit 0 = held,
//              the bits above count releases (a version, see below)
//   [2]        occupied mask (bit w: way w holds a row)
//   [3]        pinned mask   (bit w: way w holds a pinned read-ahead row)
//   [4, ...)   stamps: uint32 last-access tick per way
//   [keys, ..) keys: uint64 row ID per way (8-aligned)
//
// so 5 ways fill exactly one 64-byte cache line (4 + 5*4 + 5*8 = 64): 12.8 B
// of index per row, and a lookup takes the lock, probes the tags and stamps
// the hit in a single line. 4 ways also take one line (16 B per row), 8 ways
// two. Wider sets (9..32 ways) need 32-bit masks: a 12-byte header (lock,
// occupied, pinned as uint32 each), then stamps and keys as above.
// The lock lives in the set it guards: the finest possible striping, and no
// extra cache line per operation. The masks share the lock's word but are
// separate bytes, written only by the lock holder. Row payloads are in a slab
// addressed by (set * ways + way), so the index stays dense regardless of row
// size.
//
// Unlocked reads (a seqlock). Every release of a set's lock after a change
// to its keys, masks or payloads advances its version, so a hit can be served
// without the lock: read the version (an even, unheld one), check the key and
// copy the row, then read the version again; if it is unchanged no writer
// changed the set in between and the copy is exact, else the caller retries
// under the lock. A hit then costs no locked instruction, which on x86 would
// first wait for every earlier store of the gather (the previous rows' copies)
// to drain. Releases that changed nothing a reader checks (a locked lookup,
// the clock's stamp upkeep) restore the version they found, so the version
// wraps only after 2^15 (compact) or 2^31 changes of one set, which no read
// lasts through. The copy itself races a writer's plain stores to the payload;
// that is accepted on purpose, as in every seqlock: a raced copy is discarded.
// Stamps are not checked by readers (an unlocked hit writes one), and are read
// and written as relaxed atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(__SANITIZE_THREAD__)
#define ENGRAM_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ENGRAM_THREAD_SANITIZER 1
#endif
#endif
#if defined(ENGRAM_THREAD_SANITIZER)
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace engram::cache {

struct SetLayout {
  uint32_t ways = 0;
  bool compact = true;  // 4-byte header with 8-bit masks (ways <= 8)
  uint32_t stamps_offset = 0;
  uint32_t keys_offset = 0;
  uint32_t stride = 0;

  static constexpr uint32_t kMaxCompactWays = 8;

  static constexpr SetLayout For(uint32_t ways) {
    SetLayout l;
    l.ways = ways;
    l.compact = ways <= kMaxCompactWays;
    l.stamps_offset = l.compact ? 4 : 12;
    l.keys_offset = (l.stamps_offset + 4 * ways + 7) & ~7u;
    uint32_t raw = l.keys_offset + 8 * ways;
    // Pad to whole cache lines when that costs at most 16 B per row (4+ ways);
    // otherwise (1-3 ways) pack to 8 bytes and accept straddling lines.
    uint32_t lines = (raw + 63) & ~63u;
    l.stride = lines <= 16 * ways ? lines : (raw + 7) & ~7u;
    return l;
  }
};

// An unlocked read copies row bytes that a writer may be overwriting; the
// version check (SetView::ReadValid) discards such a copy, which ThreadSanitizer
// cannot see, so it is told to ignore this thread's accesses for the read.
class UnlockedReadScope {
 public:
#if defined(ENGRAM_THREAD_SANITIZER)
  UnlockedReadScope() { __tsan_ignore_thread_begin(); }
  ~UnlockedReadScope() { __tsan_ignore_thread_end(); }
#else
  UnlockedReadScope() = default;
#endif
  UnlockedReadScope(const UnlockedReadScope&) = delete;
  UnlockedReadScope& operator=(const UnlockedReadScope&) = delete;
};

// A view of one set in the index. Everything but the lock word and the stamps
// is written only under the lock; keys, masks and payloads may also be read
// without it, by hints and by unlocked reads (see above).
class SetView {
 public:
  SetView(uint8_t* base, const SetLayout& layout)
      : base_(base), stamps_offset_(layout.stamps_offset), keys_offset_(layout.keys_offset), compact_(layout.compact) {}

  uint32_t occupied() const { return compact_ ? base_[2] : Word(4); }
  uint32_t pinned() const { return compact_ ? base_[3] : Word(8); }
  void set_occupied(uint32_t mask) {
    if (compact_) {
      std::atomic_ref<uint8_t>(base_[2]).store(static_cast<uint8_t>(mask), std::memory_order_relaxed);
    } else {
      std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + 4)).store(mask, std::memory_order_relaxed);
    }
  }
  void set_pinned(uint32_t mask) { SetMask(3, 8, mask); }
  uint32_t stamp(uint32_t way) const { return StampRef(way).load(std::memory_order_relaxed); }
  void set_stamp(uint32_t way, uint32_t stamp) { StampRef(way).store(stamp, std::memory_order_relaxed); }
  // Sets a stamp only if it still is `expected` (an unlocked hit may have
  // stamped the way since it was read); false if it changed.
  bool ReplaceStamp(uint32_t way, uint32_t expected, uint32_t stamp) {
    return StampRef(way).compare_exchange_strong(expected, stamp, std::memory_order_relaxed);
  }
  const uint64_t* keys() const { return reinterpret_cast<const uint64_t*>(base_ + keys_offset_); }
  void set_key(uint32_t way, uint64_t row_id) {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base_ + keys_offset_ + 8 * way))
        .store(row_id, std::memory_order_relaxed);
  }

  // Unlocked reads of the keys and the masks, for hints (which payload line to
  // prefetch; stale by the time they are used) and for unlocked reads, which
  // the version validates. Keys and masks are stored with relaxed atomics, so
  // these reads race with no writer.
  uint64_t KeyHint(uint32_t way) const {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base_ + keys_offset_ + 8 * way))
        .load(std::memory_order_relaxed);
  }
  uint32_t OccupiedHint() const {
    if (compact_) return std::atomic_ref<uint8_t>(base_[2]).load(std::memory_order_relaxed);
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + 4)).load(std::memory_order_relaxed);
  }

  uint32_t PinnedHint() const {
    if (compact_) return std::atomic_ref<uint8_t>(base_[3]).load(std::memory_order_relaxed);
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + 8)).load(std::memory_order_relaxed);
  }

  void Lock() {
    if (compact_) {
      LockWord<uint16_t>();
    } else {
      LockWord<uint32_t>();
    }
  }
  bool TryLock() { return compact_ ? TryLockWord<uint16_t>() : TryLockWord<uint32_t>(); }
  // changed: whether the holder changed a key, a mask or a payload (stamps do
  // not count). Only a change advances the version and fails the unlocked
  // reads in flight; when unsure, pass true.
  void Unlock(bool changed = true) {
    if (compact_) {
      UnlockWord<uint16_t>(changed);
    } else {
      UnlockWord<uint32_t>(changed);
    }
  }

  // The start of an unlocked read: the set's version, or an odd value when a
  // writer holds the lock (the read must then take the lock instead).
  uint32_t ReadBegin() const {
    return compact_ ? Version<uint16_t>(std::memory_order_acquire) : Version<uint32_t>(std::memory_order_acquire);
  }
  // The end of an unlocked read that began with ReadBegin() == version: true
  // if no writer held the lock since, so everything read in between is exact.
  bool ReadValid(uint32_t version) const {
    // Orders the reads of the row before the second read of the version.
    std::atomic_thread_fence(std::memory_order_acquire);
    return (compact_ ? Version<uint16_t>(std::memory_order_relaxed) : Version<uint32_t>(std::memory_order_relaxed)) ==
           version;
  }

  uint8_t* base() const { return base_; }

 private:
  std::atomic_ref<uint32_t> StampRef(uint32_t way) const {
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + stamps_offset_ + 4 * way));
  }
  uint32_t Word(uint32_t offset) const {
    uint32_t v;
    std::memcpy(&v, base_ + offset, sizeof(v));
    return v;
  }
  // The pinned mask is read without the lock by unlocked reads (PinnedHint).
  void SetMask(uint32_t compact_offset, uint32_t wide_offset, uint32_t mask) {
    if (compact_) {
      std::atomic_ref<uint8_t>(base_[compact_offset]).store(static_cast<uint8_t>(mask), std::memory_order_relaxed);
    } else {
      std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base_ + wide_offset))
          .store(mask, std::memory_order_relaxed);
    }
  }

  template <typename T>
  std::atomic_ref<T> LockWordRef() const {
    return std::atomic_ref<T>(*reinterpret_cast<T*>(base_));
  }
  template <typename T>
  uint32_t Version(std::memory_order order) const {
    return LockWordRef<T>().load(order);
  }
  template <typename T>
  bool TryLockWord() {
    std::atomic_ref<T> word = LockWordRef<T>();
    T v = word.load(std::memory_order_relaxed);
    if ((v & 1) != 0 ||
        !word.compare_exchange_strong(v, static_cast<T>(v | 1), std::memory_order_acquire, std::memory_order_relaxed)) {
      return false;
    }
    WritesAfterLocking();
    return true;
  }
  // The writer's half of the seqlock: the holder's stores must not become
  // visible before the odd version does, or a reader could see new bytes with
  // the old version (x86 orders stores anyway; weaker CPUs do not).
  static void WritesAfterLocking() { std::atomic_thread_fence(std::memory_order_release); }
  template <typename T>
  void LockWord() {
    std::atomic_ref<T> word = LockWordRef<T>();
    T v = word.load(std::memory_order_relaxed);
    for (int spins = 0;;) {
      // Test before test-and-set: spin on a shared copy of the line.
      while (v & 1) {
        if (++spins < 128) {
          Pause();
        } else {
          std::this_thread::yield();  // the holder may be descheduled
        }
        v = word.load(std::memory_order_relaxed);
      }
      if (word.compare_exchange_weak(v, static_cast<T>(v | 1), std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
        WritesAfterLocking();
        return;
      }
    }
  }
  template <typename T>
  void UnlockWord(bool changed) {
    std::atomic_ref<T> word = LockWordRef<T>();
    // Held (odd) -> the next even version, or back to the one it was locked
    // from; only the holder writes the word.
    const T held = word.load(std::memory_order_relaxed);
    word.store(static_cast<T>(changed ? held + 1 : held - 1), std::memory_order_release);
  }
  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  uint8_t* base_;
  uint32_t stamps_offset_;
  uint32_t keys_offset_;
  bool compact_;
};

}  // namespace engram::cache
