// The truncation mode of engram-stress: a store over a victim and a witness
// table; the victim file is cut to half its size while the store serves it.
// Its gathers must then fail with a clear status (never a signal or a wrong
// row) while the witness table keeps serving exact rows.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace engram::stress {

// What a truncation run saw.
struct TruncationRun {
  uint64_t gathers_before = 0, victim_ok = 0, victim_failed = 0, witness_ok = 0;
  uint64_t wrong_rows = 0, unexpected_failures = 0;
  std::string first_problem;
  std::string first_failure;

  void Problem(const std::string& what) {
    if (first_problem.empty()) first_problem = what;
  }

  nlohmann::json ToJson() const {
    nlohmann::json j = {{"gathers_before_truncation", gathers_before},
                        {"victim_ok_gathers", victim_ok},
                        {"victim_failed_gathers", victim_failed},
                        {"witness_ok_gathers", witness_ok},
                        {"wrong_rows", wrong_rows},
                        {"unexpected_failures", unexpected_failures}};
    if (!first_failure.empty()) j["first_failure"] = first_failure;
    if (!first_problem.empty()) j["first_problem"] = first_problem;
    return j;
  }
};

// Runs until `deadline`: gathers from both tables, cuts the victim at a third
// of the time, then checks what each table serves.
void RunTruncation(const std::string& victim, const std::string& witness, uint64_t data_seed,
                   const std::string& backend, std::chrono::steady_clock::time_point deadline, TruncationRun& run);

}  // namespace engram::stress
