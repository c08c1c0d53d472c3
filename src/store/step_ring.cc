#include "engram/step_ring.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "storage/mutex.h"
#include "storage/thread_annotations.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace engram {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kLine = 64;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// One buffer of the ring: anonymous memory, committed at once (a step never
// takes a page fault in its buffer, and a registration pins real pages), in
// 2 MiB pages if asked and the kernel allows.
class Mapping {
 public:
  static Result<Mapping> Make(size_t bytes, bool huge_pages) {
    Mapping m;
    m.bytes_ = huge_pages ? RoundUp(bytes, kHugePage) : RoundUp(bytes, 4096);
    // A huge page must start on a 2 MiB boundary: map one more and trim.
    const size_t reserve = huge_pages ? m.bytes_ + kHugePage : m.bytes_;
    void* p = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Status::FromErrno("step ring: map " + std::to_string(reserve) + " bytes", errno);
    auto* base = static_cast<std::byte*>(p);
    if (huge_pages) {
      auto* aligned = reinterpret_cast<std::byte*>(RoundUp(reinterpret_cast<uintptr_t>(base), kHugePage));
      if (aligned > base) ::munmap(base, size_t(aligned - base));
      const size_t tail = size_t(base + reserve - (aligned + m.bytes_));
      if (tail > 0) ::munmap(aligned + m.bytes_, tail);
      base = aligned;
      (void)::madvise(base, m.bytes_, MADV_HUGEPAGE);  // a hint: 4 KiB pages where refused
    }
    m.data_ = base;
    // Commit every page now; where the kernel lacks MADV_POPULATE_WRITE
    // (< 5.14), by writing them.
    if (::madvise(base, m.bytes_, MADV_POPULATE_WRITE) != 0) std::memset(base, 0, m.bytes_);
    return m;
  }
  Mapping() = default;
  Mapping(Mapping&& o) noexcept : data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_) {}
  Mapping& operator=(Mapping&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Mapping() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace

// The ring's state. Guarded by mu: every slot's state, sequence number,
// inputs (written by a start while the slot is free, read by the ring's
// thread while it stages the slot, which no start touches) and result, the
// queue and the counters. The buffers and words never move; the words are
// written only through atomic_ref.
struct StepRing::Impl {
  enum class SlotState : uint8_t { kFree, kQueued, kStaging, kDone };
  struct Slot {
    Mapping out;
    SlotState state = SlotState::kFree;
    uint32_t sequence = 0;
    // The step's inputs, each array sized once for the largest step: row
    // IDs ([tokens][layers][slots]), or tokens after the history's tail.
    bool ids_step = false;
    std::vector<uint64_t> ids;
    size_t id_count = 0;
    std::vector<uint32_t> tokens;  // [history tail][tokens]
    size_t history_count = 0, token_count = 0;
    StageResult result;
  };

  Impl(const StepStager& s, StepRingOptions o) : stager(s), options(std::move(o)) {}

  const StepStager& stager;
  const StepRingOptions options;
  std::vector<Slot> slots;
  Mapping words;             // every slot's words, a line (or more) per slot
  size_t words_per_slot = 0;  // the stride in words between slots' words
  std::vector<std::pair<void*, size_t>> registered;

  mutable Mutex mu;
  mutable CondVar work;   // a step was queued, or the ring is stopping
  mutable CondVar staged;  // a slot's step is done
  std::vector<size_t> queue GUARDED_BY(mu);  // a FIFO of K slot indexes (head, count)
  size_t queue_head GUARDED_BY(mu) = 0, queued GUARDED_BY(mu) = 0;
  size_t cursor GUARDED_BY(mu) = 0;  // where the search for a free slot starts
  uint32_t last_sequence GUARDED_BY(mu) = 0;
  bool stopping GUARDED_BY(mu) = false;
  std::thread thread;

  uint32_t* WordsOf(size_t slot) const {
    return reinterpret_cast<uint32_t*>(words.data()) + slot * words_per_slot;
  }

  // Takes a free slot for a step (its inputs are then filled by the
  // caller, under mu). Allocates nothing unless it refuses.
  Result<size_t> TakeSlot() REQUIRES(mu) {
    if (stopping) return Status::Cancelled("step ring: being destroyed");
    if (last_sequence == kMaxStepSequence) {
      return Status::ResourceExhausted("step ring: its " + std::to_string(kMaxStepSequence) +
                                       " sequence numbers are used up; a new ring starts again at 1");
    }
    for (size_t k = 0; k < slots.size(); ++k) {
      const size_t s = (cursor + k) % slots.size();
      if (slots[s].state != SlotState::kFree) continue;
      cursor = s + 1;
      return s;
    }
    return Status::ResourceExhausted("step ring: all " + std::to_string(slots.size()) +
                                     " slots hold steps not yet released (release a slot once its step's compute "
                                     "is done, or make the ring larger)");
  }

  // Queues the slot filled since TakeSlot: its words read "not yet" (0) from
  // here until the ring's thread stores the step's sequence number.
  Started Queue(size_t s) REQUIRES(mu) {
    Slot& slot = slots[s];
    slot.state = SlotState::kQueued;
    slot.sequence = ++last_sequence;
    uint32_t* w = WordsOf(s);
    for (size_t l = 0; l < stager.layers(); ++l) std::atomic_ref<uint32_t>(w[l]).store(0, std::memory_order_relaxed);
    queue[(queue_head + queued) % queue.size()] = s;
    ++queued;
    work.Signal();
    return Started{s, slot.sequence};
  }

  // The ring's thread: stages the queued steps in order until stopped with
  // none left.
  void Run() EXCLUDES(mu) {
    for (;;) {
      size_t s;
      {
        MutexLock lock(&mu);
        while (queued == 0 && !stopping) work.Wait(&mu);
        if (queued == 0) return;
        s = queue[queue_head];
        queue_head = (queue_head + 1) % queue.size();
        --queued;
        slots[s].state = SlotState::kStaging;
      }
      // The slot is the ring's thread's until it is done: no start or
      // release touches a slot in kStaging.
      Slot& slot = slots[s];
      StepCompletion completion;
      completion.words = std::span<uint32_t>(WordsOf(s), stager.layers());
      completion.sequence = slot.sequence;
      StageResult r =
          slot.ids_step
              ? stager.GatherStep(std::span<const uint64_t>(slot.ids.data(), slot.id_count), slot.out.data(),
                                  completion)
              : stager.Stage(std::span<const uint32_t>(slot.tokens.data(), slot.history_count),
                             std::span<const uint32_t>(slot.tokens.data() + slot.history_count, slot.token_count),
                             slot.out.data(), completion);
      MutexLock lock(&mu);
      slot.result = std::move(r);
      slot.state = SlotState::kDone;
      staged.SignalAll();
    }
  }
};

StepRing::StepRing(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<StepRing>> StepRing::Create(const StepStager& stager, StepRingOptions options) {
  if (options.slots == 0) return Status::InvalidArgument("step ring: slots must be >= 1");
  if (options.max_tokens == 0) return Status::InvalidArgument("step ring: max_tokens must be >= 1");
  if (options.max_tokens > (size_t{1} << 24)) {
    return Status::InvalidArgument("step ring: max_tokens " + std::to_string(options.max_tokens) +
                                   " is more than a step may have (16,777,216)");
  }
  auto impl = std::make_unique<Impl>(stager, std::move(options));
  const StepRingOptions& o = impl->options;
  const size_t layers = stager.layers(), per_token = layers * stager.rows_per_token();
  impl->slots.resize(o.slots);
  for (Impl::Slot& slot : impl->slots) {
    ENGRAM_ASSIGN_OR_RETURN(slot.out, Mapping::Make(stager.OutputBytes(o.max_tokens), o.huge_pages));
    slot.ids.resize(o.max_tokens * per_token);
    slot.tokens.resize(stager.history_tokens() + o.max_tokens);
  }
  impl->words_per_slot = RoundUp(layers * sizeof(uint32_t), kLine) / sizeof(uint32_t);
  ENGRAM_ASSIGN_OR_RETURN(impl->words, Mapping::Make(o.slots * impl->words_per_slot * sizeof(uint32_t), false));
  {
    MutexLock lock(&impl->mu);
    impl->queue.resize(o.slots);
  }
  if (o.register_buffer) {
    std::vector<std::pair<void*, size_t>> buffers;
    for (Impl::Slot& slot : impl->slots) buffers.emplace_back(slot.out.data(), slot.out.bytes());
    buffers.emplace_back(impl->words.data(), impl->words.bytes());
    for (const auto& [address, bytes] : buffers) {
      Status s = o.register_buffer(address, bytes);
      if (!s.ok()) {
        for (const auto& [a, b] : impl->registered) {
          if (o.unregister_buffer) o.unregister_buffer(a, b);
        }
        return s.WithContext("step ring: register_buffer");
      }
      impl->registered.emplace_back(address, bytes);
    }
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<StepRing>(new StepRing(std::move(impl)));
}

StepRing::~StepRing() {
  {
    MutexLock lock(&impl_->mu);
    impl_->stopping = true;
    impl_->work.Signal();
  }
  impl_->thread.join();
  if (impl_->options.unregister_buffer) {
    for (const auto& [address, bytes] : impl_->registered) impl_->options.unregister_buffer(address, bytes);
  }
}

size_t StepRing::slots() const { return impl_->slots.size(); }
size_t StepRing::max_tokens() const { return impl_->options.max_tokens; }
size_t StepRing::layers() const { return impl_->stager.layers(); }
size_t StepRing::buffer_bytes() const { return impl_->stager.OutputBytes(impl_->options.max_tokens); }

std::byte* StepRing::buffer(size_t slot) const {
  return slot < impl_->slots.size() ? impl_->slots[slot].out.data() : nullptr;
}

uint32_t* StepRing::words(size_t slot) const { return slot < impl_->slots.size() ? impl_->WordsOf(slot) : nullptr; }

Result<StepRing::Started> StepRing::StartStage(std::span<const uint32_t> history, std::span<const uint32_t> tokens) {
  if (tokens.size() > impl_->options.max_tokens) {
    return Status::InvalidArgument("step ring: a step of " + std::to_string(tokens.size()) +
                                   " tokens, more than the ring's max_tokens " +
                                   std::to_string(impl_->options.max_tokens));
  }
  const std::span<const uint32_t> tail = history.last(std::min<size_t>(history.size(), impl_->stager.history_tokens()));
  MutexLock lock(&impl_->mu);
  ENGRAM_ASSIGN_OR_RETURN(const size_t s, impl_->TakeSlot());
  Impl::Slot& slot = impl_->slots[s];
  slot.ids_step = false;
  std::copy(tail.begin(), tail.end(), slot.tokens.begin());
  std::copy(tokens.begin(), tokens.end(), slot.tokens.begin() + tail.size());
  slot.history_count = tail.size();
  slot.token_count = tokens.size();
  return impl_->Queue(s);
}

Result<StepRing::Started> StepRing::StartGatherStep(std::span<const uint64_t> ids) {
  ENGRAM_RETURN_IF_ERROR(impl_->stager.CheckGatherStepIds(ids));
  const size_t per_token = impl_->stager.layers() * impl_->stager.rows_per_token();
  if (ids.size() > impl_->options.max_tokens * per_token) {
    return Status::InvalidArgument("step ring: a step of " + std::to_string(ids.size() / per_token) +
                                   " tokens, more than the ring's max_tokens " +
                                   std::to_string(impl_->options.max_tokens));
  }
  MutexLock lock(&impl_->mu);
  ENGRAM_ASSIGN_OR_RETURN(const size_t s, impl_->TakeSlot());
  Impl::Slot& slot = impl_->slots[s];
  slot.ids_step = true;
  std::copy(ids.begin(), ids.end(), slot.ids.begin());
  slot.id_count = ids.size();
  return impl_->Queue(s);
}

StageResult StepRing::Wait(size_t slot) const {
  MutexLock lock(&impl_->mu);
  if (slot >= impl_->slots.size() || impl_->slots[slot].state == Impl::SlotState::kFree) {
    StageResult r;
    r.status = Status::InvalidArgument("step ring: slot " + std::to_string(slot) + " holds no step");
    return r;
  }
  while (impl_->slots[slot].state != Impl::SlotState::kDone) impl_->staged.Wait(&impl_->mu);
  return impl_->slots[slot].result;
}

bool StepRing::Done(size_t slot) const {
  MutexLock lock(&impl_->mu);
  return slot < impl_->slots.size() && impl_->slots[slot].state == Impl::SlotState::kDone;
}

Status StepRing::Release(size_t slot) {
  MutexLock lock(&impl_->mu);
  if (slot >= impl_->slots.size()) {
    return Status::InvalidArgument("step ring: no slot " + std::to_string(slot) + " (the ring has " +
                                   std::to_string(impl_->slots.size()) + ")");
  }
  Impl::Slot& s = impl_->slots[slot];
  if (s.state == Impl::SlotState::kFree) {
    return Status::InvalidArgument("step ring: slot " + std::to_string(slot) +
                                   " holds no step (released twice, or never started)");
  }
  if (s.state != Impl::SlotState::kDone) {
    return Status::InvalidArgument("step ring: slot " + std::to_string(slot) + "'s step (sequence " +
                                   std::to_string(s.sequence) +
                                   ") is still being staged: release it after its last word (or Wait)");
  }
  s.state = Impl::SlotState::kFree;
  s.result = StageResult();
  return Status::OK();
}

}  // namespace engram
