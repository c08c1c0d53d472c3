#include "python/src/py_step_ring.h"

#include <string>
#include <utility>
#include <vector>

#include "python/src/array_view.h"
#include "python/src/errors.h"

namespace py = pybind11;

namespace engram::python {

PyStepRing::PyStepRing(std::shared_ptr<Store> store, std::shared_ptr<const StepStager> stager, size_t slots,
                       size_t max_tokens, bool huge_pages, py::object register_buffer, py::object unregister_buffer)
    : register_buffer_(std::move(register_buffer)),
      unregister_buffer_(std::move(unregister_buffer)),
      store_(std::move(store)),
      stager_(std::move(stager)) {
  for (const py::object* hook : {&register_buffer_, &unregister_buffer_}) {
    if (!hook->is_none() && !PyCallable_Check(hook->ptr())) {
      throw py::type_error("register= and unregister= must be callables (address, nbytes), not " + TypeName(*hook));
    }
  }
  StepRingOptions options;
  options.slots = slots;
  options.max_tokens = max_tokens;
  options.huge_pages = huge_pages;
  if (!register_buffer_.is_none()) {
    options.register_buffer = [this](void* address, size_t bytes) -> Status {
      py::gil_scoped_acquire gil;
      try {
        register_buffer_(reinterpret_cast<uintptr_t>(address), bytes);
      } catch (py::error_already_set& e) {
        register_error_.emplace(std::move(e));
        return Status::Internal("the register callable raised");
      }
      return Status::OK();
    };
  }
  if (!unregister_buffer_.is_none()) {
    options.unregister_buffer = [this](void* address, size_t bytes) {
      py::gil_scoped_acquire gil;
      try {
        unregister_buffer_(reinterpret_cast<uintptr_t>(address), bytes);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("engram_store.StepRing: unregister");
      }
    };
  }
  Result<std::unique_ptr<StepRing>> ring = StepRing::Create(*stager_, std::move(options));
  if (register_error_) {
    py::error_already_set e = std::move(*register_error_);
    register_error_.reset();
    throw e;
  }
  ring_ = ValueOrRaise(std::move(ring));
}

PyStepRing::~PyStepRing() {
  py::gil_scoped_release release;
  ring_.reset();
}

size_t PyStepRing::Slot(py::handle slot) const {
  if (PyBool_Check(slot.ptr()) || !PyIndex_Check(slot.ptr())) {
    throw py::type_error("slot must be an int, not " + TypeName(slot));
  }
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(slot.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long i = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0 || i < 0 || size_t(i) >= ring_->slots()) {
    throw py::index_error("slot " + std::string(py::str(index)) + " out of range (the ring has " +
                          std::to_string(ring_->slots()) + " slots)");
  }
  return size_t(i);
}

py::tuple PyStepRing::StartGatherStep(py::handle ids) {
  RowIds rows(ids, "ids");
  const std::vector<int64_t>& shape = rows.shape();
  const size_t layers = stager_->layers(), slots = stager_->rows_per_token();
  if (shape.size() != 3 || size_t(shape[1]) != layers || size_t(shape[2]) != slots) {
    std::string got = "[";
    for (size_t d = 0; d < shape.size(); ++d) got += (d ? ", " : "") + std::to_string(shape[d]);
    throw py::value_error("ids must have shape [tokens, " + std::to_string(layers) + ", " + std::to_string(slots) +
                          "] (tokens, layers, slots), got " + got + "]");
  }
  // Never blocks: the GIL stays held.
  StepRing::Started s = ValueOrRaise(ring_->StartGatherStep(std::span<const uint64_t>(rows.data(), rows.size())));
  return py::make_tuple(s.slot, s.sequence);
}

py::tuple PyStepRing::StartStage(py::handle tokens, py::handle history) {
  const std::vector<uint32_t> step = TokenIds(tokens, "tokens");
  HistoryTokens before(history, "history", stager_->history_tokens());
  StepRing::Started s = ValueOrRaise(ring_->StartStage(before.span(), step));
  return py::make_tuple(s.slot, s.sequence);
}

StageResult PyStepRing::Wait(py::handle slot) {
  const size_t s = Slot(slot);
  StageResult r;
  {
    py::gil_scoped_release release;
    r = ring_->Wait(s);
  }
  if (!r.status.ok()) RaiseStatus(r.status);
  return r;
}

bool PyStepRing::Done(py::handle slot) { return ring_->Done(Slot(slot)); }

void PyStepRing::Release(py::handle slot) { ThrowIfError(ring_->Release(Slot(slot))); }

}  // namespace engram::python
