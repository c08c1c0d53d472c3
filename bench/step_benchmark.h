// Driver behind `engram-bench step`: what a runtime's decode or prefill step
// costs through the step path, next to what its rows cost, measured in the
// same run on the same store.
//
// Two V4.1-shaped layers (the layout scaled to rows_per_table rows each,
// generated into `dir` when missing) and random tokens. For each case (all
// hits: a warm store cycling over a set of steps; all misses: a fresh store
// per round and mode, every step's tokens new) and each step size, every
// mode stages the same steps:
//
//   flat         one Store::Gather per layer of the step's row IDs (hashed
//                beforehand) into a [tokens * slots, record] buffer: the
//                rows' own cost
//   hash_gather  per layer NgramHasher::Hash of the step, then that flat
//                gather: what a runtime pays doing it by hand
//   stage        StepStager::Stage (tokens in, [tokens, layers, slots,
//                record] out, on the calling thread)
//   stage_start  StepStager::Start(...).Wait()
//   gather_step  StepStager::GatherStep: the step's [tokens, layers, slots]
//                row IDs in (hashed beforehand), on the calling thread
//   gather_step_start  StepStager::StartGatherStep(...).Wait()
//   ring         StepRing::StartGatherStep, then spinning on the slot's
//                completion words until every layer's is set, Wait, Release
//   c_stage      the C API's engram_stage_start + engram_stage_wait
//   c_stage_rows the C API's engram_stage_rows (synchronous)
//   c_gather_step the C API's engram_gather_step
//
// And the completion words' latency (WordLatency).
//
// Each mode's time per step is reported as ns per row (rows = tokens *
// layers * slots) per round, and as the median of per-round ratios to flat
// and to hash_gather (each round runs every mode back to back, so a ratio
// pairs figures taken under the same host conditions).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engram/status.h"

namespace engram::bench {

struct StepBenchConfig {
  std::string dir = "/dev/shm/engram-bench-step";  // the tables (generated when missing)
  std::string layout_path;     // the full layout to scale
  std::string token_map_path;  // "" = raw token IDs
  uint64_t rows_per_table = 2'000'000;
  std::vector<uint32_t> step_tokens{1, 8, 64, 512};
  std::vector<std::string> cases{"hit", "miss"};
  std::vector<std::string> modes;  // empty: every mode
  // Tokens of history before each step (the hasher reads only its last
  // few; a runtime passes what it has).
  uint32_t history = 8;
  double seconds = 0.2;  // per mode, step size and round (hits)
  uint32_t rounds = 5;
  // Rows an all-miss round of one mode stages (rounded to whole steps, at
  // least 4 steps).
  uint64_t miss_rows = 200'000;
  std::string io_backend = "auto";
  uint64_t seed = 1;
  // Steps whose words' latency is measured per case and step size (0: none;
  // all misses: at most a round's steps).
  size_t word_steps = 2000;
};

struct StepBenchPoint {
  std::string case_name;  // "hit" or "miss"
  uint32_t tokens = 0;
  std::string mode;
  uint64_t rows = 0, distinct_rows = 0, hits = 0, misses = 0;  // over every round
  std::vector<double> ns_per_row;        // per round
  std::vector<double> ratio_to_flat;     // per round: this mode's ns/row over flat's
  std::vector<double> ratio_to_hash_gather;
};

// A completion word's latency: from the moment a layer's last row is in
// `out` (StepCompletion::layer_done, right before the word is stored) to the
// moment a thread spinning on the word sees it change, for GatherStep's
// steps; one sample per layer and step.
struct WordLatency {
  std::string case_name;
  uint32_t tokens = 0;
  size_t samples = 0;
  double p50_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;
};

struct StepBenchReport {
  std::string io_description;
  std::vector<StepBenchPoint> points;
  std::vector<WordLatency> word_latency;
};

using StepProgressLog = std::function<void(const std::string&)>;

// The median of `values` (0 if empty).
double StepMedian(std::vector<double> values);

Result<StepBenchReport> RunStepBenchmark(const StepBenchConfig& config, const StepProgressLog& log = {});

}  // namespace engram::bench
