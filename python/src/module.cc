// engram_store._engram_store: the extension module behind the engram_store
// package (python/engram_store/__init__.py documents the API).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <string>

#include "python/src/cxx_baseline.h"
#include "python/src/errors.h"
#include "python/src/log_level.h"
#include "python/src/py_hasher.h"
#include "python/src/py_step_ring.h"
#include "python/src/py_store.h"

namespace py = pybind11;
using namespace engram;
using namespace engram::python;

namespace {

std::string Repr(const GatherResult& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "GatherResult(rows=%llu, distinct_rows=%llu, hits=%llu, misses=%llu, refusals=%llu, "
                "wait_ns=%llu, cache_ns=%llu, disk_ns=%llu)",
                (unsigned long long)r.rows, (unsigned long long)r.distinct_rows, (unsigned long long)r.hits,
                (unsigned long long)r.misses, (unsigned long long)r.refusals, (unsigned long long)r.wait_nanoseconds,
                (unsigned long long)r.cache_nanoseconds, (unsigned long long)r.disk_nanoseconds);
  return buf;
}

std::string Repr(const StageLayerResult& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "StageLayerResult(rows=%llu, distinct_rows=%llu, hits=%llu, misses=%llu, wait_ns=%llu)",
                (unsigned long long)r.rows, (unsigned long long)r.distinct_rows, (unsigned long long)r.hits,
                (unsigned long long)r.misses, (unsigned long long)r.wait_nanoseconds);
  return buf;
}

// The counts a step's result and each layer's have alike.
template <typename Result>
void DefineStageCounts(py::class_<Result>& c) {
  c.def_readonly("rows", &Result::rows)
      .def_readonly("distinct_rows", &Result::distinct_rows)
      .def_readonly("hits", &Result::hits)
      .def_readonly("misses", &Result::misses)
      .def_readonly("refusals", &Result::refusals)
      .def_readonly("blocks_read", &Result::blocks_read)
      .def_readonly("bytes_read", &Result::bytes_read)
      .def_readonly("wait_nanoseconds", &Result::wait_nanoseconds)
      .def_readonly("cache_nanoseconds", &Result::cache_nanoseconds)
      .def_readonly("disk_nanoseconds", &Result::disk_nanoseconds);
}

std::string Repr(const StageResult& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "StageResult(tokens=%llu, rows=%llu, distinct_rows=%llu, hits=%llu, misses=%llu, hash_ns=%llu, "
                "wait_ns=%llu)",
                (unsigned long long)r.tokens, (unsigned long long)r.rows, (unsigned long long)r.distinct_rows,
                (unsigned long long)r.hits, (unsigned long long)r.misses, (unsigned long long)r.hash_nanoseconds,
                (unsigned long long)r.wait_nanoseconds);
  return buf;
}

// The tables every face of the statistics expands, as data: what
// GatherResult's attributes, stats()'s keys and metrics_text()'s families
// are made of, so a test can hold each face against them.
void ExportStatsTables(py::module_& m) {
  py::list gather_fields;
  for (const GatherResultFieldInfo& field : kGatherResultFields) gather_fields.append(field.name);
  m.attr("GATHER_RESULT_FIELDS") = py::tuple(gather_fields);
  py::list cache_stats;
  for (const CacheStatInfo& stat : kCacheStats) {
    const char* kind = stat.kind == CacheStatKind::kCounter ? "counter"
                       : stat.kind == CacheStatKind::kGauge ? "gauge"
                                                            : "by_reason";
    cache_stats.append(py::make_tuple(stat.name, stat.metric, kind));
  }
  m.attr("CACHE_STATS") = py::tuple(cache_stats);
  py::list reasons;
  for (const RefusalReasonInfo& reason : kRefusalReasons) reasons.append(reason.name);
  m.attr("REFUSAL_REASONS") = py::tuple(reasons);
  py::list counters;
  for (const TableCounterInfo& counter : kTableCounters) counters.append(py::make_tuple(counter.name, counter.metric));
  m.attr("TABLE_COUNTERS") = py::tuple(counters);
}

}  // namespace

PYBIND11_MODULE(_engram_store, m) {
  m.doc() = "Engram Store's C++ API for Python; see the engram_store package.";
  RegisterErrors(m);
  InstallLibraryLogger();

  py::class_<GatherResult> gather_result(m, "GatherResult", "What a gather did and how long the caller waited.");
  for (const GatherResultFieldInfo& field : kGatherResultFields) {
    gather_result.def_readonly(field.name, field.member, field.help);
  }
  gather_result.def("__repr__", [](const GatherResult& r) { return Repr(r); });
  ExportStatsTables(m);

  py::class_<StageLayerResult> stage_layer(m, "StageLayerResult",
                                            "What a step's staging did for one layer; wait_nanoseconds runs from "
                                            "the start of the stage until this layer's rows were all in out.");
  DefineStageCounts(stage_layer);
  stage_layer.def("__repr__", [](const StageLayerResult& r) { return Repr(r); });
  py::class_<StageResult> stage_result(m, "StageResult", "What a step's staging did, summed over its layers.");
  DefineStageCounts(stage_result);
  stage_result.def_readonly("tokens", &StageResult::tokens)
      .def_readonly("hash_nanoseconds", &StageResult::hash_nanoseconds)
      .def_readonly("layers", &StageResult::layers, "One StageLayerResult per layer, in the step's layer order.")
      .def("__repr__", [](const StageResult& r) { return Repr(r); });

  py::class_<GatherHandle>(m, "GatherHandle", "A gather in flight; wait() (GIL released) or await it.")
      .def("wait", &GatherHandle::Wait, "Waits (GIL released) and returns the GatherResult, or raises.")
      .def("done", &GatherHandle::done)
      .def("_completion_fd", &GatherHandle::EventFd);

  py::class_<StageHandle>(m, "StageHandle",
                          "A step's staging in flight; wait() (GIL released) or await it. Layers are gathered in "
                          "the step's order, and each can be waited for on its own: wait(layer), ready(layer).")
      .def(
          "wait",
          [](StageHandle& h, py::handle layer) -> py::object {
            if (layer.is_none()) return py::cast(h.Wait());
            return py::cast(h.WaitLayer(layer));
          },
          py::arg("layer") = py::none(),
          "wait(): waits (GIL released) for every layer and returns the StageResult, or raises. "
          "wait(layer): waits only until that layer's rows are in out and returns its StageLayerResult, or raises "
          "its failure; IndexError for a layer out of range.")
      .def("ready", &StageHandle::Ready, py::arg("layer"),
           "Whether that layer's rows are in out (or it failed), without blocking.")
      .def("done", &StageHandle::done)
      .def("_completion_fd", &StageHandle::EventFd);

  py::class_<PyStore>(m, "Store")
      .def(py::init<const std::vector<std::string>&, uint64_t, const std::string&, const std::string&,
                    const std::optional<std::string>&, py::handle, bool, uint32_t, uint32_t,
                    const std::vector<std::string>&, int32_t,
                    // warm start
                    const std::optional<std::string>&, double,
                    // one store per node
                    const std::optional<std::string>&, const std::optional<std::string>&, std::optional<double>,
                    std::optional<double>>(),
           // Every argument after the tables by keyword only: among this many
           // options, a value passed by position lands on whichever sits there.
           py::arg("tables"), py::kw_only(), py::arg("cache_bytes") = uint64_t(1) << 30, py::arg("policy") = "default",
           py::arg("io_backend") = "auto", py::arg("metrics_listen") = py::none(), py::arg("token_map") = py::none(),
           py::arg("direct_io") = true, py::arg("completion_threads") = 2, py::arg("io_rings") = 1,
           // Rank tables: manifests (engram-convert --ranks) opened for `rank`.
           py::arg("manifests") = std::vector<std::string>{}, py::arg("rank") = -1,
           // warm start
           py::arg("hot_set") = py::none(), py::arg("hot_set_interval") = 0.0,
           // One store per node: the socket of an engram-served to be a client
           // of, and the client's deadlines in seconds (None: 5 s to open,
           // 30 s a call).
           py::arg("node") = py::none(), py::arg("client_name") = py::none(),
           py::arg("node_open_timeout") = py::none(), py::arg("node_call_timeout") = py::none())
      .def("close", &PyStore::Close)
      .def_property_readonly("closed", &PyStore::closed)
      .def_property_readonly("table_count", &PyStore::table_count)
      .def_property_readonly("table_names", &PyStore::table_names)
      .def_property_readonly("io_description", &PyStore::io_description)
      .def_property_readonly("metrics_port", &PyStore::metrics_port)
      .def("record_bytes", &PyStore::record_bytes, py::arg("table"))
      .def("row_count", &PyStore::row_count, py::arg("table"))
      .def("metadata_json", &PyStore::metadata_json, py::arg("table"))
      .def("stats", &PyStore::Stats)
      .def("metrics_text", &PyStore::metrics_text)
      .def("gather", &PyStore::Gather, py::arg("table"), py::arg("row_ids"), py::arg("out"))
      .def("gather_async", &PyStore::GatherAsync, py::arg("table"), py::arg("row_ids"), py::arg("out"))
      .def("prefetch", &PyStore::ReadAhead, py::arg("table"), py::arg("row_ids"))
      .def("read_ahead", &PyStore::ReadAhead, py::arg("table"), py::arg("row_ids"))
      .def("release_read_ahead", &PyStore::ReleaseReadAhead, py::arg("table"), py::arg("row_ids"))
      .def("wait_for_read_aheads", &PyStore::WaitForReadAheads)
      .def("wait_for_cache_memory", &PyStore::WaitForCacheMemory)
      .def("wait_for_warm_up", &PyStore::WaitForWarmUp)
      .def("stage", &PyStore::Stage, py::arg("tokens"), py::arg("history"), py::arg("out"), py::kw_only(),
           py::arg("layers") = py::none(), py::arg("words") = py::none(), py::arg("sequence") = 0)
      .def("stage_async", &PyStore::StageAsync, py::arg("tokens"), py::arg("history"), py::arg("out"), py::kw_only(),
           py::arg("layers") = py::none(), py::arg("words") = py::none(), py::arg("sequence") = 0)
      .def("gather_step", &PyStore::GatherStep, py::arg("ids"), py::arg("out"), py::kw_only(),
           py::arg("layers") = py::none(), py::arg("words") = py::none(), py::arg("sequence") = 0)
      .def("gather_step_async", &PyStore::GatherStepAsync, py::arg("ids"), py::arg("out"), py::kw_only(),
           py::arg("layers") = py::none(), py::arg("words") = py::none(), py::arg("sequence") = 0)
      .def(
          "step_ring",
          [](PyStore& s, size_t slots, size_t max_tokens, py::handle layers, bool huge_pages, py::object reg,
             py::object unreg) {
            return std::make_unique<PyStepRing>(s.store(), s.Stager(layers), slots, max_tokens, huge_pages,
                                                std::move(reg), std::move(unreg));
          },
          py::kw_only(), py::arg("slots") = 2, py::arg("max_tokens"), py::arg("layers") = py::none(),
          py::arg("huge_pages") = false, py::arg("register") = py::none(), py::arg("unregister") = py::none())
      .def("stage_rows_per_token",
           [](PyStore& s, py::handle layers) { return s.Stager(layers)->rows_per_token(); },
           py::arg("layers") = py::none())
      .def("stage_layers", [](PyStore& s, py::handle layers) { return s.Stager(layers)->layers(); },
           py::arg("layers") = py::none())
      .def("history_tokens", &PyStore::history_tokens, py::arg("layers") = py::none());

  py::class_<PyStepRing>(m, "StepRing",
                         "Address-stable step buffers and their completion words (engram/step_ring.h); made by "
                         "Store.step_ring.")
      .def_property_readonly("slots", [](const PyStepRing& r) { return r.ring().slots(); })
      .def_property_readonly("max_tokens", [](const PyStepRing& r) { return r.ring().max_tokens(); })
      .def_property_readonly("layers", [](const PyStepRing& r) { return r.ring().layers(); })
      .def(
          "buffer",
          [](py::object self, py::handle slot) {
            PyStepRing& r = self.cast<PyStepRing&>();
            const size_t s = r.Slot(slot);
            const std::vector<py::ssize_t> shape = {py::ssize_t(r.ring().max_tokens()), py::ssize_t(r.ring().layers()),
                                                    py::ssize_t(r.stager().rows_per_token()),
                                                    py::ssize_t(r.stager().record_bytes())};
            // The array's base is the ring: the memory lives as long as any view of it.
            return py::array(py::dtype::of<uint8_t>(), shape, r.ring().buffer(s), self);
          },
          py::arg("slot"),
          "Slot `slot`'s out, uint8 [max_tokens, layers, slots, record_bytes], at a fixed address (a step of n "
          "tokens fills [:n]); torch.from_numpy shares it.")
      .def(
          "words",
          [](py::object self, py::handle slot) {
            PyStepRing& r = self.cast<PyStepRing&>();
            const size_t s = r.Slot(slot);
            return py::array(py::dtype::of<uint32_t>(), {py::ssize_t(r.ring().layers())}, r.ring().words(s), self);
          },
          py::arg("slot"), "Slot `slot`'s completion words, uint32 [layers].")
      .def("start_gather_step", &PyStepRing::StartGatherStep, py::arg("ids"),
           "Starts a step of row IDs [tokens, layers, slots] in the next free slot; returns (slot, sequence). "
           "Never blocks.")
      .def("start_stage", &PyStepRing::StartStage, py::arg("tokens"), py::arg("history") = py::none(),
           "Starts a step of tokens (after history) in the next free slot; returns (slot, sequence). Never blocks.")
      .def("wait", &PyStepRing::Wait, py::arg("slot"), "Waits (GIL released) for the slot's step; its StageResult.")
      .def("done", &PyStepRing::Done, py::arg("slot"))
      .def("release", &PyStepRing::Release, py::arg("slot"), "Frees the slot for a later step.");

  py::class_<PyHasher>(m, "Hasher")
      .def(py::init<const std::string&, uint32_t, py::handle, std::vector<uint32_t>>(), py::arg("layout_path"),
           py::arg("layer") = 0, py::arg("token_map") = py::none(), py::arg("slots") = std::vector<uint32_t>())
      .def("row_ids", &PyHasher::RowIds, py::arg("tokens"), py::arg("history") = py::none())
      .def_property_readonly("rows_per_token", [](const PyHasher& h) { return h.hasher().rows_per_token(); })
      .def_property_readonly("history_tokens", [](const PyHasher& h) { return h.hasher().history_tokens(); })
      .def_property_readonly("layer_id", [](const PyHasher& h) { return h.hasher().layout().layer_id; })
      .def_property_readonly("total_rows", [](const PyHasher& h) { return h.hasher().layout().total_rows; })
      // A rank's hasher: the slots it hashes and the rows of its packed table.
      .def_property_readonly("slots", [](const PyHasher& h) { return h.hasher().slots(); })
      .def_property_readonly("table_rows", [](const PyHasher& h) { return h.hasher().table_rows(); });

  m.def(
      "strided_rank_slots",
      [](uint32_t ranks, uint32_t rank, uint32_t slot_count) {
        return ValueOrRaise(StridedRankSlots(slot_count, ranks, rank));
      },
      py::arg("ranks"), py::arg("rank"), py::arg("slot_count") = 24,
      "The slots rank `rank` of `ranks` holds under the strided assignment: s with s % ranks == rank, ascending.");

  m.def("_set_log_level", &SetLibraryLogLevel, py::arg("level"), "Sets the library's log level by spdlog name.");
  m.def("_log_level", &LibraryLogLevel, "The library's log level, by spdlog name.");

  BindCxxBaselines(m);
}
