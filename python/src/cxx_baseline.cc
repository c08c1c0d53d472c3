#include "python/src/cxx_baseline.h"

#include <chrono>
#include <vector>

#include "python/src/array_view.h"
#include "python/src/errors.h"
#include "python/src/py_store.h"

namespace py = pybind11;

namespace engram::python {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// `iterations` Store::Gather calls of row_ids into out (as a C++ runtime
// would make them); returns the seconds they took in all.
double CxxGatherSeconds(PyStore& store, py::handle table, py::handle row_ids, py::handle out, int iterations) {
  std::shared_ptr<Store> s = store.store();
  const size_t t = store.Table(table);
  RowIds ids(row_ids, "row_ids");
  ArrayView dst = ArrayView::Borrow(out, /*writable=*/true, "out");
  const uint32_t record_bytes = s->record_bytes(t);
  if (dst.size() * dst.itemsize() < ids.size() * record_bytes) throw py::value_error("out is too small");
  const std::span<const uint64_t> span(ids.data(), ids.size());
  Status failed;
  py::gil_scoped_release release;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    GatherResult r = s->Gather(t, span, dst.data(), record_bytes);
    if (!r.status.ok()) failed = r.status;
  }
  const double seconds = Seconds(start);
  py::gil_scoped_acquire gil;
  ThrowIfError(failed);
  return seconds;
}

// `iterations` steps done the separate way: per layer, NgramHasher::Hash of
// the step then one Store::Gather of its rows into a [tokens, rows per
// token, record_bytes] buffer of that layer.
double CxxHashGatherSeconds(PyStore& store, py::handle tokens, py::handle history, py::handle layers, int iterations) {
  std::shared_ptr<Store> s = store.store();
  std::shared_ptr<const StepStager> stager = store.Stager(layers);
  const std::vector<uint32_t> step = TokenIds(tokens, "tokens");
  const std::vector<uint32_t> before = TokenIds(history, "history");
  const size_t per_layer = step.size() * stager->rows_per_token();
  std::vector<std::vector<uint64_t>> ids(stager->layers(), std::vector<uint64_t>(per_layer));
  std::vector<std::vector<std::byte>> rows(stager->layers(), std::vector<std::byte>(per_layer * stager->record_bytes()));
  Status failed;
  py::gil_scoped_release release;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    for (size_t l = 0; l < stager->layers(); ++l) {
      if (Status st = stager->hasher(l).Hash(before, step, ids[l]); !st.ok()) failed = st;
      GatherResult r = s->Gather(stager->tables()[l], ids[l], rows[l].data(), stager->record_bytes());
      if (!r.status.ok()) failed = r.status;
    }
  }
  const double seconds = Seconds(start);
  py::gil_scoped_acquire gil;
  ThrowIfError(failed);
  return seconds;
}

}  // namespace

void BindCxxBaselines(py::module_& m) {
  m.def("_cxx_gather_seconds", &CxxGatherSeconds, py::arg("store"), py::arg("table"), py::arg("row_ids"),
        py::arg("out"), py::arg("iterations"),
        "Seconds taken by `iterations` C++ Store::Gather calls of row_ids into out (the binding's baseline).");
  m.def("_cxx_hash_gather_seconds", &CxxHashGatherSeconds, py::arg("store"), py::arg("tokens"), py::arg("history"),
        py::arg("layers"), py::arg("iterations"),
        "Seconds taken by `iterations` steps of separate C++ hash + gather per layer (stage's baseline).");
}

}  // namespace engram::python
