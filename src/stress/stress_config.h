// StressConfig: what one engram-stress run does (tools/engram-stress.cc
// parses it from the command line; src/stress/stress_run.h runs it).
#pragma once

#include <cstdint>
#include <string>

namespace engram::stress {

struct StressConfig {
  double seconds = 10;
  unsigned threads = 4;
  bool faults = false;
  uint64_t seed = 1;
  std::string table;
  uint64_t rows = 100000;
  uint64_t cache_bytes = 4ull << 20;
  std::string backend = "auto";
  uint32_t io_rings = 1;  // io_uring rings of the gathering store (StoreOptions::io_rings)
  std::string policy = "default";
  bool fail_registration = false;
  bool fail_ring_setup = false;
  bool truncate = false;
};

}  // namespace engram::stress
