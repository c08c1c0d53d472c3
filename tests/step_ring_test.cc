// StepRing: steps staged into buffers that never move, their words stored
// as each layer lands, slots taken and released, registration hooks, and
// starts that never wait (the host-callback bound) and never allocate.
#include "engram/step_ring.h"

#include <sys/mman.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "src/store/store_impl.h"
#include "tests/testing/gated_engine.h"
#include "tests/testing/step_tables.h"
#include "tests/testing/temp_table.h"

// Allocations made on a thread while it counts them. In a plain build,
// through this program's own operator new (the library allocates through it
// too); under a sanitizer, whose runtime owns operator new, through its
// allocator's hook, which sees malloc as well.
namespace {
thread_local bool counting_allocations = false;
thread_local size_t allocations = 0;
}  // namespace

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ENGRAM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ENGRAM_SANITIZED 1
#endif
#endif

#ifdef ENGRAM_SANITIZED
#include <sanitizer/allocator_interface.h>

namespace {
void CountMalloc(const volatile void*, size_t) {
  if (counting_allocations) ++allocations;
}
void IgnoreFree(const volatile void*) {}
// Before main, before any thread: the hooks' install is not thread-safe.
const int hooks_installed = __sanitizer_install_malloc_and_free_hooks(&CountMalloc, &IgnoreFree);
}  // namespace
#else
// The replacements are malloc and free: GCC, seeing a `new` inlined beside
// the replaced `delete`, would take the free for a mismatch.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(size_t size) {
  if (counting_allocations) ++allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  if (counting_allocations) ++allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif

namespace engram {
namespace {

using namespace std::chrono_literals;
using testing::StepIds;
using testing::StepTokens;

// Spins until every word of `words` holds `sequence` (or its failure), as a
// GPU stream would wait; false after ~10 s.
bool WaitForWords(const uint32_t* words, size_t layers, uint32_t sequence) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (size_t l = 0; l < layers; ++l) {
    for (;;) {
      const uint32_t w = std::atomic_ref<const uint32_t>(words[l]).load(std::memory_order_acquire);
      if ((w & ~kStepWordFailed) == sequence) break;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
  }
  return true;
}

class StepRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tables_ = testing::WriteStepTables(dir_);
    store_ = Open();
    ASSERT_NE(store_, nullptr);
    auto stager = StepStager::Create(*store_, {0, 1}, tables_.map);
    ASSERT_TRUE(stager.ok()) << stager.status().ToString();
    stager_ = std::move(stager).value();
    text_ = StepTokens(400, 3);
  }

  std::unique_ptr<Store> Open(testing::GatedEngine** gate = nullptr) {
    StoreOptions o;
    for (const std::string& path : tables_.paths) o.tables.push_back({path, "", 0});
    o.io_backend = "pread";
    auto store = StoreImpl::Open(o, [&](const io::IoOptions& io) -> Result<std::unique_ptr<io::IoEngine>> {
      ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<io::IoEngine> inner, io::CreateIoEngine(io));
      if (gate == nullptr) return inner;
      auto gated = std::make_unique<testing::GatedEngine>(std::move(inner), tables_.paths[0]);
      *gate = gated.get();
      return std::unique_ptr<io::IoEngine>(std::move(gated));
    });
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::unique_ptr<Store>(std::move(store).value()) : nullptr;
  }

  // Step k's IDs: 4 tokens of text_ after k * 4 tokens of history.
  std::vector<uint64_t> Ids(const StepStager& stager, size_t k, size_t tokens = 4) {
    std::span<const uint32_t> all(text_);
    return StepIds(stager, all.first(k * 4), all.subspan(k * 4, tokens));
  }

  testing::TempDir dir_;
  testing::StepTables tables_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StepStager> stager_;
  std::vector<uint32_t> text_;
};

TEST_F(StepRingTest, StepsLandInBuffersThatNeverMoveWithTheirWords) {
  StepRingOptions o;
  o.slots = 3;
  o.max_tokens = 8;
  auto ring = StepRing::Create(*stager_, o);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  StepRing& r = **ring;
  ASSERT_EQ(r.slots(), 3u);
  ASSERT_EQ(r.buffer_bytes(), stager_->OutputBytes(8));
  std::vector<std::byte*> buffers;
  std::vector<uint32_t*> words;
  for (size_t s = 0; s < 3; ++s) {
    buffers.push_back(r.buffer(s));
    words.push_back(r.words(s));
    ASSERT_NE(buffers.back(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(words.back()) % 64, 0u) << "each slot's words on a line of their own";
  }
  EXPECT_EQ(r.buffer(3), nullptr);
  EXPECT_EQ(r.words(3), nullptr);
  for (uint32_t k = 0; k < 10; ++k) {
    const size_t tokens = 1 + k % 8;
    const std::vector<uint64_t> ids = Ids(*stager_, k, tokens);
    auto started = r.StartGatherStep(ids);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    EXPECT_EQ(started->slot, k % 3) << "the next slot";
    EXPECT_EQ(started->sequence, k + 1);
    ASSERT_TRUE(WaitForWords(r.words(started->slot), 2, started->sequence));
    for (size_t l = 0; l < 2; ++l) {
      EXPECT_EQ(r.words(started->slot)[l], started->sequence);
      EXPECT_TRUE(testing::LayerHoldsRows(r.buffer(started->slot), ids, 2, 24, l)) << "step " << k << " layer " << l;
    }
    StageResult result = r.Wait(started->slot);
    ASSERT_TRUE(result.status.ok()) << result.status.ToString();
    EXPECT_EQ(result.tokens, tokens);
    EXPECT_TRUE(r.Done(started->slot));
    ASSERT_TRUE(r.Release(started->slot).ok());
  }
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(r.buffer(s), buffers[s]);
    EXPECT_EQ(r.words(s), words[s]);
  }
}

TEST_F(StepRingTest, AStageStartedInTheRingEqualsStage) {
  StepRingOptions o;
  o.max_tokens = 16;
  auto ring = StepRing::Create(*stager_, o);
  ASSERT_TRUE(ring.ok());
  std::span<const uint32_t> all(text_);
  // A long history: the ring keeps only its last tokens.
  std::span<const uint32_t> history = all.first(300), step = all.subspan(300, 16);
  std::vector<std::byte> expected(stager_->OutputBytes(16));
  ASSERT_TRUE(stager_->Stage(history, step, expected.data()).status.ok());
  auto started = (*ring)->StartStage(history, step);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ASSERT_TRUE((*ring)->Wait(started->slot).status.ok());
  EXPECT_EQ(std::memcmp((*ring)->buffer(started->slot), expected.data(), expected.size()), 0);
  EXPECT_EQ((*ring)->words(started->slot)[0], started->sequence);
}

TEST_F(StepRingTest, AFullRingRefusesAStartAndReusesAReleasedSlot) {
  StepRingOptions o;
  o.slots = 2;
  o.max_tokens = 4;
  auto ring = StepRing::Create(*stager_, o);
  ASSERT_TRUE(ring.ok());
  StepRing& r = **ring;
  auto a = r.StartGatherStep(Ids(*stager_, 0));
  auto b = r.StartGatherStep(Ids(*stager_, 1));
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = r.StartGatherStep(Ids(*stager_, 2));
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("all 2 slots hold steps not yet released"), std::string::npos)
      << c.status().ToString();
  ASSERT_TRUE(r.Wait(b->slot).status.ok());
  ASSERT_TRUE(r.Release(b->slot).ok());
  auto d = r.StartGatherStep(Ids(*stager_, 3));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->slot, b->slot);
  EXPECT_EQ(d->sequence, 3u) << "a refused start takes no sequence number";
  ASSERT_TRUE(r.Wait(d->slot).status.ok());
  EXPECT_TRUE(testing::LayerHoldsRows(r.buffer(d->slot), Ids(*stager_, 3), 2, 24, 1));
}

TEST_F(StepRingTest, ReleasingASlotTwiceNeverStartedOrStillStagingIsRefused) {
  testing::GatedEngine* gate = nullptr;
  std::unique_ptr<Store> gated = Open(&gate);
  ASSERT_NE(gated, nullptr);
  auto stager = StepStager::Create(*gated, {0, 1}, tables_.map);
  ASSERT_TRUE(stager.ok());
  auto ring = StepRing::Create(**stager, {});
  ASSERT_TRUE(ring.ok());
  StepRing& r = **ring;
  Status never = r.Release(1);
  EXPECT_EQ(never.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(never.message().find("slot 1 holds no step (released twice, or never started)"), std::string::npos)
      << never.ToString();
  EXPECT_EQ(r.Release(2).code(), StatusCode::kInvalidArgument);  // past the last slot
  EXPECT_EQ(r.Wait(1).status.code(), StatusCode::kInvalidArgument);
  auto started = r.StartGatherStep(Ids(**stager, 0, 1));  // a cold store: layer 0's reads are held
  ASSERT_TRUE(started.ok());
  Status staging = r.Release(started->slot);
  EXPECT_EQ(staging.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(staging.message().find("is still being staged"), std::string::npos) << staging.ToString();
  EXPECT_FALSE(r.Done(started->slot));
  gate->Open();
  ASSERT_TRUE(r.Wait(started->slot).status.ok());
  ASSERT_TRUE(r.Release(started->slot).ok());
  Status twice = r.Release(started->slot);
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("released twice"), std::string::npos) << twice.ToString();
}

TEST_F(StepRingTest, IdsOfTheWrongCountPastTheTableOrTooManyTokensAreRefusedBeforeASlotIsTaken) {
  StepRingOptions o;
  o.slots = 1;
  o.max_tokens = 2;
  auto ring = StepRing::Create(*stager_, o);
  ASSERT_TRUE(ring.ok());
  StepRing& r = **ring;
  std::vector<uint64_t> ids = Ids(*stager_, 0, 2);
  EXPECT_EQ(r.StartGatherStep(std::span<const uint64_t>(ids).first(47)).status().code(), StatusCode::kInvalidArgument);
  ids[30] = store_->row_count(1);  // token 0, layer 1, slot 6: one past the end of layer 1's table
  auto past = r.StartGatherStep(ids);
  EXPECT_EQ(past.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(past.status().message().find("[token 0, layer 1, slot 6]"), std::string::npos) << past.status().ToString();
  auto three = r.StartGatherStep(Ids(*stager_, 0, 3));
  EXPECT_EQ(three.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(three.status().message().find("more than the ring's max_tokens 2"), std::string::npos);
  const std::vector<uint32_t> tokens = {1, 2, 3};
  EXPECT_EQ(r.StartStage({}, tokens).status().code(), StatusCode::kInvalidArgument);
  auto fine = r.StartGatherStep(Ids(*stager_, 0, 2));  // the only slot is still free
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ(fine->sequence, 1u);
}

TEST_F(StepRingTest, EachBufferIsRegisteredOnceAndUnregisteredAfterTheLastStep) {
  std::vector<std::pair<void*, size_t>> registered, unregistered;
  StepRingOptions o;
  o.slots = 3;
  o.max_tokens = 5;
  o.register_buffer = [&](void* address, size_t bytes) {
    registered.emplace_back(address, bytes);
    return Status::OK();
  };
  o.unregister_buffer = [&](void* address, size_t bytes) { unregistered.emplace_back(address, bytes); };
  {
    auto ring = StepRing::Create(*stager_, o);
    ASSERT_TRUE(ring.ok());
    ASSERT_EQ(registered.size(), 4u);  // three buffers, then the words
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_EQ(registered[s].first, (*ring)->buffer(s));
      EXPECT_GE(registered[s].second, (*ring)->buffer_bytes());
    }
    EXPECT_EQ(registered[3].first, (*ring)->words(0));
    EXPECT_GE(registered[3].second, 3 * 64u);
    auto started = (*ring)->StartGatherStep(Ids(*stager_, 0));
    ASSERT_TRUE(started.ok());
    EXPECT_TRUE(unregistered.empty());
  }  // destroyed with a step started: staged first, then unregistered
  EXPECT_EQ(unregistered, registered);

  // A registration that fails fails Create, and the buffers registered before it are unregistered.
  registered.clear();
  unregistered.clear();
  o.register_buffer = [&](void* address, size_t bytes) {
    if (registered.size() == 2) return Status::ResourceExhausted("no more pinned memory");
    registered.emplace_back(address, bytes);
    return Status::OK();
  };
  auto refused = StepRing::Create(*stager_, o);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("register_buffer"), std::string::npos) << refused.status().ToString();
  EXPECT_EQ(unregistered, registered);
}

TEST_F(StepRingTest, HugePageBuffersStartOn2MiBBoundaries) {
  StepRingOptions o;
  o.slots = 2;
  o.max_tokens = 64;
  o.huge_pages = true;
  std::vector<size_t> sizes;
  o.register_buffer = [&](void*, size_t bytes) {
    sizes.push_back(bytes);
    return Status::OK();
  };
  auto ring = StepRing::Create(*stager_, o);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*ring)->buffer(s)) % (2u << 20), 0u);
    EXPECT_EQ(sizes[s] % (2u << 20), 0u);
  }
  auto started = (*ring)->StartGatherStep(Ids(*stager_, 0));
  ASSERT_TRUE(started.ok());
  ASSERT_TRUE((*ring)->Wait(started->slot).status.ok());
  EXPECT_TRUE(testing::LayerHoldsRows((*ring)->buffer(started->slot), Ids(*stager_, 0), 2, 24, 0));
}

TEST_F(StepRingTest, CreateRefusesNoSlotsOrNoTokens) {
  StepRingOptions o;
  o.slots = 0;
  EXPECT_EQ(StepRing::Create(*stager_, o).status().code(), StatusCode::kInvalidArgument);
  o.slots = 2;
  o.max_tokens = 0;
  EXPECT_EQ(StepRing::Create(*stager_, o).status().code(), StatusCode::kInvalidArgument);
}

// What a CUDA host callback may do: start steps while the ring's thread is
// stuck in a step whose reads the device holds. Every start returns within
// the bound (it waits for no read and no lock held across one), and a start
// that takes a slot allocates nothing.
TEST_F(StepRingTest, StartsNeverWaitForHeldReadsAndNeverAllocate) {
  testing::GatedEngine* gate = nullptr;
  std::unique_ptr<Store> gated = Open(&gate);
  ASSERT_NE(gated, nullptr);
  auto stager = StepStager::Create(*gated, {0, 1}, tables_.map);
  ASSERT_TRUE(stager.ok());
  StepRingOptions o;
  o.slots = 4;
  o.max_tokens = 8;
  auto ring = StepRing::Create(**stager, o);
  ASSERT_TRUE(ring.ok());
  StepRing& r = **ring;
  // The first step misses (a cold store): its reads of layer 0 are held, so
  // the ring's thread waits in it until the gate opens.
  std::vector<std::vector<uint64_t>> ids;
  for (size_t k = 0; k < 6; ++k) ids.push_back(Ids(**stager, k, 8));
  auto first = r.StartGatherStep(ids[0]);
  ASSERT_TRUE(first.ok());
  while (gate->held() == 0) std::this_thread::sleep_for(1ms);

#ifdef ENGRAM_SANITIZED
  ASSERT_NE(hooks_installed, 0) << "the sanitizer's allocator hook is not installed: allocations cannot be counted";
#endif
  // A start is a copy and a short lock: microseconds. The bound leaves room
  // for a loaded host and a sanitizer; the step it must not wait for is held
  // for as long as the test likes.
  constexpr auto kBound = 250ms;
  std::vector<std::chrono::nanoseconds> took;
  std::vector<size_t> allocated;
  std::vector<StatusCode> codes;
  std::atomic<bool> finished{false};
  std::thread callback([&] {
    std::span<const uint32_t> all(text_);
    for (size_t k = 1; k < 6; ++k) {
      counting_allocations = true;
      allocations = 0;
      const auto start = std::chrono::steady_clock::now();
      const StatusCode code = k == 3 ? r.StartStage(all.first(12), all.subspan(12, 8)).status().code()
                                     : r.StartGatherStep(ids[k]).status().code();
      const auto elapsed = std::chrono::steady_clock::now() - start;
      counting_allocations = false;
      took.push_back(elapsed);
      allocated.push_back(allocations);
      codes.push_back(code);
    }
    finished = true;
  });
  // A start that waited for the held reads would wait for ever: give it
  // seconds, then open the gate so that the test ends, and fail.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!finished && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  const bool waited = !finished;
  if (waited) gate->Open();
  callback.join();
  ASSERT_FALSE(waited) << "a start waited for the step whose reads the device held";
  // Slots 1-3 were free; the fifth and sixth starts find every slot taken.
  EXPECT_EQ(codes, (std::vector<StatusCode>{StatusCode::kOk, StatusCode::kOk, StatusCode::kOk,
                                            StatusCode::kResourceExhausted, StatusCode::kResourceExhausted}));
  for (size_t i = 0; i < took.size(); ++i) {
    EXPECT_LT(took[i], kBound) << "start " << i + 1 << " waited";
    if (codes[i] == StatusCode::kOk) {
      EXPECT_EQ(allocated[i], 0u) << "start " << i + 1 << " allocated";
    }
  }
  EXPECT_FALSE(r.Done(first->slot)) << "the held step is still staging: the starts did not wait for it";
  gate->Open();
  for (size_t s = 0; s < 4; ++s) {
    StageResult result = r.Wait(s);
    ASSERT_TRUE(result.status.ok()) << "slot " << s << ": " << result.status.ToString();
  }
  EXPECT_TRUE(testing::LayerHoldsRows(r.buffer(first->slot), ids[0], 2, 24, 0));
  EXPECT_TRUE(testing::LayerHoldsRows(r.buffer(1), ids[1], 2, 24, 1));
}

}  // namespace
}  // namespace engram
