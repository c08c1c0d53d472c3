// The Python-facing Store: owns an engram::Store, turns Python arrays into
// spans without copying them, and releases the GIL for every gather.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "engram/step_stager.h"
#include "engram/store.h"
#include "python/src/array_view.h"
#include "python/src/completion.h"
#include "python/src/dequantize.h"
#include "python/src/job_thread.h"

namespace engram::python {

// Token map argument: None (identity), a file path, or an integer array.
std::shared_ptr<const TokenMap> TokenMapArgument(pybind11::handle token_map);

// A started gather: keeps row_ids and out alive until the gather completes.
class GatherHandle {
 public:
  GatherHandle(std::shared_ptr<Store> store, pybind11::object row_ids, pybind11::object out)
      : store_(std::move(store)), row_ids_obj_(std::move(row_ids)), out_obj_(std::move(out)) {}
  ~GatherHandle();
  GatherHandle(const GatherHandle&) = delete;

  // Releases the GIL until done; raises on a failed gather.
  GatherResult Wait();
  bool done() { return completion_->done(); }
  int EventFd() { return completion_->EventFd(); }

  std::shared_ptr<Store> store_;
  pybind11::object row_ids_obj_, out_obj_;
  std::optional<RowIds> ids_;
  std::optional<ArrayView> out_;
  bool started_ = false;  // a gather was started: it must complete before the buffers go
  std::shared_ptr<Completion<GatherResult>> completion_ = std::make_shared<Completion<GatherResult>>();
};

// A step's StageTicket, handed once from the staging thread (which starts
// the gathers) to the handle's waiters. The ticket itself is only asked
// const questions (Ready, WaitLayer), which may run on any threads at once.
class TicketSlot {
 public:
  void Set(StageTicket ticket);
  // Blocks until the ticket is set. Call without the GIL.
  const StageTicket& Wait();
  // The ticket, or null if its gathers are not started yet.
  const StageTicket* Get();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<StageTicket> ticket_;
};

// A started stage; for dequantized output it also owns the raw rows.
class StageHandle {
 public:
  StageHandle(std::shared_ptr<Store> store, std::shared_ptr<const StepStager> stager, pybind11::object out)
      : store_(std::move(store)), stager_(std::move(stager)), out_obj_(std::move(out)) {}
  ~StageHandle();
  StageHandle(const StageHandle&) = delete;

  // Raises on a failed step.
  StageResult Wait();
  // Waits (GIL released) until `layer`'s rows are in out and returns that
  // layer's result; raises that layer's failure. IndexError for a layer out
  // of range.
  StageLayerResult WaitLayer(pybind11::handle layer);
  // Whether `layer`'s rows are in out (or it failed), without blocking.
  bool Ready(pybind11::handle layer);
  bool done() { return completion_->done(); }
  int EventFd() { return completion_->EventFd(); }
  // The step's completion in the store: the caller's words, and for a
  // dequantized out each layer's dequantization before its word.
  StepCompletion StepCompletionFor(uint32_t sequence);

  std::shared_ptr<Store> store_;
  std::shared_ptr<const StepStager> stager_;
  pybind11::object out_obj_;
  std::optional<ArrayView> out_;
  // The caller's completion words, held until the step is done.
  pybind11::object words_obj_;
  std::optional<ArrayView> words_;
  // Dequantized output: the step's records, each layer dequantized into out
  // as it lands (StepCompletion::layer_done), freed once the step is done.
  std::vector<std::byte> raw_;
  std::optional<Fp8RecordLayout> fp8_;
  bool half_ = false;
  std::mutex finish_mu_;  // raw_ is freed once, by whichever waiter is first
  bool started_ = false;
  std::shared_ptr<Completion<StageResult>> completion_ = std::make_shared<Completion<StageResult>>();
  // Set by stage_async's staging thread once the gathers are started.
  std::shared_ptr<TicketSlot> ticket_ = std::make_shared<TicketSlot>();

 private:
  // Waits for the step and frees the raw records (once). Call without the
  // GIL; both Wait() and dropping the handle finish the step.
  StageResult& Finish();
  // The layer index `layer` names, or IndexError / TypeError.
  size_t LayerIndex(pybind11::handle layer) const;
  // Dequantizes one layer's rows into out: on the thread that finished the
  // layer, before its word is stored.
  void DequantizeLayer(size_t layer);
};

class PyStore {
 public:
  PyStore(const std::vector<std::string>& tables, uint64_t cache_bytes, const std::string& policy,
          const std::string& io_backend, const std::optional<std::string>& metrics_listen, pybind11::handle token_map,
          bool direct_io, uint32_t completion_threads, uint32_t io_rings, const std::vector<std::string>& manifests,
          int32_t rank,
          // warm start
          const std::optional<std::string>& hot_set, double hot_set_interval,
          // one store per node; the deadlines in seconds (None: the C++ defaults)
          const std::optional<std::string>& node, const std::optional<std::string>& client_name,
          std::optional<double> node_open_timeout, std::optional<double> node_call_timeout);
  // Closes the store without the GIL: a node client's close waits for its
  // gathers in flight, which a stopped service ends only at their deadline.
  ~PyStore();

  void Close();
  bool closed() const { return store_ == nullptr; }
  std::shared_ptr<Store> store() const;  // ValueError if closed
  size_t Table(pybind11::handle table) const;  // an index or a name

  size_t table_count() const { return store()->table_count(); }
  std::vector<std::string> table_names() const;
  uint32_t record_bytes(pybind11::handle table) const { return store()->record_bytes(Table(table)); }
  uint64_t row_count(pybind11::handle table) const { return store()->row_count(Table(table)); }
  std::string metadata_json(pybind11::handle table) const { return store()->metadata_json(Table(table)); }
  std::string io_description() const { return store()->io_description(); }
  std::string metrics_text() const;
  uint16_t metrics_port() const { return store()->metrics_port(); }
  pybind11::dict Stats() const;

  GatherResult Gather(pybind11::handle table, pybind11::handle row_ids, pybind11::handle out);
  std::unique_ptr<GatherHandle> GatherAsync(pybind11::handle table, pybind11::object row_ids, pybind11::object out);
  void ReadAhead(pybind11::handle table, pybind11::handle row_ids);
  void ReleaseReadAhead(pybind11::handle table, pybind11::handle row_ids);
  void WaitForReadAheads();
  void WaitForCacheMemory();
  void WaitForWarmUp();

  // words: None, or a writable uint32 array of one word per layer, with
  // sequence (1..2^31-1) what each word is set to (StepCompletion).
  StageResult Stage(pybind11::handle tokens, pybind11::handle history, pybind11::object out, pybind11::handle layers,
                    pybind11::object words, uint64_t sequence);
  std::unique_ptr<StageHandle> StageAsync(pybind11::handle tokens, pybind11::handle history, pybind11::object out,
                                          pybind11::handle layers, pybind11::object words, uint64_t sequence);
  // ids: [tokens, layers, slots] row IDs (uint64 or int64, as a GPU hash
  // kernel writes them); out and words as for Stage.
  StageResult GatherStep(pybind11::handle ids, pybind11::object out, pybind11::handle layers, pybind11::object words,
                         uint64_t sequence);
  std::unique_ptr<StageHandle> GatherStepAsync(pybind11::handle ids, pybind11::object out, pybind11::handle layers,
                                               pybind11::object words, uint64_t sequence);
  // The stager over `layers` (None = every table, in order).
  std::shared_ptr<const StepStager> Stager(pybind11::handle layers);
  uint32_t history_tokens(pybind11::handle layers) { return Stager(layers)->history_tokens(); }

 private:
  // Checks out, hashes and starts the gathers (async) or runs them to the
  // end on this thread; returns the step's handle.
  std::unique_ptr<StageHandle> StartStage(pybind11::handle tokens, pybind11::handle history, pybind11::object out,
                                          pybind11::handle layers, pybind11::object words, uint64_t sequence,
                                          bool async);
  // The same for a step's row IDs.
  std::unique_ptr<StageHandle> StartGatherStep(pybind11::handle ids, pybind11::object out, pybind11::handle layers,
                                               pybind11::object words, uint64_t sequence, bool async);
  // A handle for a step of `tokens` tokens into out (checked: its shape,
  // dtype and layout) with `words` (checked against sequence); dst is where
  // the store writes the step's records (out, or the raw records of a
  // dequantized out).
  std::unique_ptr<StageHandle> NewStepHandle(const std::shared_ptr<const StepStager>& stager, size_t tokens,
                                             pybind11::object out, pybind11::object words, uint64_t sequence,
                                             bool async, std::byte** dst);
  // Posts a step's start to the staging thread (stage_async, gather_step_async).
  void PostStep(std::function<void()> job);

  std::shared_ptr<Store> store_;
  std::shared_ptr<const TokenMap> token_map_;
  // Runs stage_async's steps (hash, then gather on this thread, which does
  // the gathers' disk phase itself), in the order they were issued.
  std::unique_ptr<JobThread> stage_thread_;
  // Guards stage_thread_ and stagers_, and store_ against Close() on
  // another thread (store_ is otherwise read with the GIL held).
  std::mutex mu_;
  std::map<std::vector<size_t>, std::shared_ptr<const StepStager>> stagers_;
};

}  // namespace engram::python
