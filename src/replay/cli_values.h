// Values on the engram-replay command line.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engram/status.h"

namespace engram::replay {

// "1073741824", "512K", "1M", "1G", "1KiB", "64MiB", "1GiB", "1.5G" (binary
// multiples: K = KiB = 1024).
Result<uint64_t> ParseSize(std::string_view text);

// `--sweep` capacities: a comma-separated list. A value written with an 'x'
// suffix ("0.5x"), or any value below 1000 ("0.25", "2"), is a multiple of
// base_capacity_rows (which must then be non-zero); an integer of 1000 or more
// is a capacity in rows. Results are rounded down to whole rows, each >= 1.
Result<std::vector<uint64_t>> ParseSweep(std::string_view text, uint64_t base_capacity_rows);

}  // namespace engram::replay
