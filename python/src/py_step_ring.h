// The Python-facing StepRing (engram/step_ring.h): the ring's buffers as
// numpy arrays that keep the ring alive, its starts, waits and releases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <pybind11/pybind11.h>

#include "engram/step_ring.h"
#include "engram/step_stager.h"
#include "engram/store.h"

namespace engram::python {

class PyStepRing {
 public:
  // register_buffer: None, or a callable (address: int, nbytes: int) called
  // once per buffer; unregister_buffer the same, when the ring is destroyed.
  PyStepRing(std::shared_ptr<Store> store, std::shared_ptr<const StepStager> stager, size_t slots, size_t max_tokens,
             bool huge_pages, pybind11::object register_buffer, pybind11::object unregister_buffer);
  // Stages the steps already started (GIL released), then frees the buffers.
  ~PyStepRing();
  PyStepRing(const PyStepRing&) = delete;

  const StepRing& ring() const { return *ring_; }
  const StepStager& stager() const { return *stager_; }
  // A slot index from Python (IndexError past the last slot).
  size_t Slot(pybind11::handle slot) const;

  // (slot, sequence) of the started step.
  pybind11::tuple StartGatherStep(pybind11::handle ids);
  pybind11::tuple StartStage(pybind11::handle tokens, pybind11::handle history);
  StageResult Wait(pybind11::handle slot);
  bool Done(pybind11::handle slot);
  void Release(pybind11::handle slot);

 private:
  // The Python hooks, called with the GIL (taken if not held).
  pybind11::object register_buffer_, unregister_buffer_;
  std::optional<pybind11::error_already_set> register_error_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<const StepStager> stager_;
  std::unique_ptr<StepRing> ring_;
};

}  // namespace engram::python
