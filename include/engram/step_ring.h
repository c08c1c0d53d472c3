// StepRing: address-stable step buffers for a runtime whose forward pass is a
// CUDA graph.
//
// A ring has K slots. Each is an `out` buffer for a step of up to max_tokens
// tokens, laid out as StepStager's ([max_tokens][layers][slots][record]),
// and the step's completion words (one uint32 per layer, StepCompletion),
// all allocated once by Create and never moved or freed before the ring: a
// captured graph reads them at fixed addresses. Create hands each buffer (and
// the words) once to a register hook, so a runtime can cudaHostRegister them
// (on a unified-memory host such as GB10 nothing is needed).
//
// StartStage / StartGatherStep pick the next free slot, copy the step's
// tokens (or row IDs) into arrays the slot owns, queue the step for the
// ring's thread and return the slot and the step's sequence number. They
// never allocate, never do I/O and take only the ring's own lock, which no
// thread holds across I/O or a gather: they may run from a CUDA host
// callback (cuLaunchHostFunc) or any thread that must not block. The ring's
// thread stages the queued steps in order (StepStager::Stage / GatherStep,
// on its own thread, which reads its own misses) and stores each layer's
// sequence number into the slot's word k as layer k lands (the high bit set
// for a layer that failed). A stream waits for word k with
// cuStreamWaitValue32(word, sequence, CU_STREAM_WAIT_VALUE_GEQ) before layer
// k's kernels; the host may Wait(slot) for the step's figures. Once the
// step's compute no longer reads the slot, the runtime releases it.
//
//   auto ring = StepRing::Create(stager, {.slots = 3, .max_tokens = 8}).value();
//   auto [slot, seq] = ring->StartGatherStep(ids).value();   // from a host callback
//   ... graph of slot `slot` waits for ring->words(slot)[k] >= seq per layer ...
//   ring->Release(slot);                                      // after the step's compute
//
// Sequence numbers run from 1, one per step, up to kMaxStepSequence; a start
// past the last one is refused (a new ring starts again at 1).
//
// Thread safety: every method may be called from any thread. The stager
// (and its store) must outlive the ring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "engram/status.h"
#include "engram/step_stager.h"

namespace engram {

struct StepRingOptions {
  size_t slots = 2;       // K: steps that may be started and not yet released
  size_t max_tokens = 1;  // the most tokens of a step (each buffer's size)
  // Back each buffer with 2 MiB pages where the kernel allows
  // (MADV_HUGEPAGE; each buffer is then a whole number of 2 MiB pages).
  bool huge_pages = false;
  // Called once for each buffer at Create (each slot's out, in slot order,
  // then one array holding every slot's words), after its pages are
  // committed; an error fails Create. unregister_buffer is called for each
  // registered buffer when the ring is destroyed, after its last step.
  std::function<Status(void* address, size_t bytes)> register_buffer;
  std::function<void(void* address, size_t bytes)> unregister_buffer;
};

class StepRing {
 public:
  static Result<std::unique_ptr<StepRing>> Create(const StepStager& stager, StepRingOptions options);
  // Stages every step already started, then unregisters and frees the buffers.
  ~StepRing();
  StepRing(const StepRing&) = delete;
  StepRing& operator=(const StepRing&) = delete;

  size_t slots() const;
  size_t max_tokens() const;
  size_t layers() const;
  // One slot's out: StepStager::OutputBytes(max_tokens()).
  size_t buffer_bytes() const;
  // Slot `slot`'s out and its layers() words; null for a slot past the last.
  std::byte* buffer(size_t slot) const;
  uint32_t* words(size_t slot) const;

  struct Started {
    size_t slot = 0;
    uint32_t sequence = 0;
  };
  // Starts a step of `tokens` after `history` (only its last
  // history_tokens() are kept). ResourceExhausted when every slot holds a
  // step not yet released (or the sequence numbers are used up);
  // InvalidArgument for more than max_tokens tokens. Never allocates, never
  // blocks on I/O.
  Result<Started> StartStage(std::span<const uint32_t> history, std::span<const uint32_t> tokens);
  // Starts a step of row IDs, [tokens][layers][slots] as
  // StepStager::GatherStep takes them; IDs of the wrong count or past their
  // table are refused here, before a slot is taken. As StartStage otherwise.
  Result<Started> StartGatherStep(std::span<const uint64_t> ids);

  // Blocks until the step started in `slot` is staged (every word stored)
  // and returns its result; any number of times until Release.
  // InvalidArgument (in the result's status) for a slot with no step.
  StageResult Wait(size_t slot) const;
  // Whether the step in `slot` is staged, without blocking (false for a
  // slot with no step).
  bool Done(size_t slot) const;
  // Frees `slot` for a later step. InvalidArgument for a slot with no step
  // (released twice, or never started) and for a step still being staged
  // (wait for its last word first).
  Status Release(size_t slot);

 private:
  struct Impl;
  explicit StepRing(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace engram
