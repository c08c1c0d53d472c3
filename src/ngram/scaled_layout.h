// ScaleLayout: the same Engram hash with a smaller table.
//
// Demos, tests and benchmarks need V4.1-shaped tables (same orders, heads,
// multipliers, so the same n-gram structure and reuse pattern) that fit a
// workstation disk. Scaling keeps everything but the primes: they become the
// consecutive primes above target_rows / (orders * heads), so each head's
// share of the table shrinks uniformly, exactly as the real layout's primes
// are consecutive primes above engram_vocab_size.
#pragma once

#include <cstdint>

#include "engram/hasher.h"
#include "engram/status.h"

namespace engram {

Result<EngramHashLayout> ScaleLayout(const EngramHashLayout& layout, uint64_t target_rows);

}  // namespace engram
