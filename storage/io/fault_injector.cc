#include "storage/io/fault_injector.h"

namespace engram::io {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

const char* FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kEio: return "eio";
    case FaultKind::kShortRead: return "short_read";
    case FaultKind::kEagain: return "eagain";
    case FaultKind::kBitFlip: return "bit_flip";
    case FaultKind::kDelay: return "delay";
    case FaultKind::kReorder: return "reorder";
    case FaultKind::kRingSetupFailure: return "ring_setup_failure";
    case FaultKind::kRegistrationFailure: return "registration_failure";
    case FaultKind::kCount: break;
  }
  return "unknown";
}

double FaultInjector::RateOf(FaultKind kind) const {
  switch (kind) {
    case FaultKind::kEio: return options_.eio_rate;
    case FaultKind::kShortRead: return options_.short_read_rate;
    case FaultKind::kEagain: return options_.eagain_rate;
    case FaultKind::kBitFlip: return options_.bitflip_rate;
    case FaultKind::kDelay: return options_.delay_rate;
    case FaultKind::kReorder: return options_.reorder_rate;
    default: return 0;
  }
}

std::optional<uint64_t> FaultInjector::Decide(FaultKind kind, FileId file, uint64_t offset) {
  const double rate = RateOf(kind);
  if (rate <= 0) return std::nullopt;
  const uint64_t key = SplitMix64(SplitMix64(offset) ^ (uint64_t{file} << 40) ^ static_cast<uint64_t>(kind));
  uint32_t n;
  {
    MutexLock lock(&mu_);
    n = occurrences_[key]++;
  }
  const uint64_t bits = SplitMix64(options_.seed ^ SplitMix64(key + n));
  // Top 53 bits as a uniform double in [0, 1).
  const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;
  if (u >= rate) return std::nullopt;
  Count(kind);
  return SplitMix64(bits);
}

bool FaultInjector::FailRingSetup() {
  if (!options_.fail_ring_setup) return false;
  Count(FaultKind::kRingSetupFailure);
  return true;
}

bool FaultInjector::FailRegistration() {
  if (!options_.fail_registration) return false;
  Count(FaultKind::kRegistrationFailure);
  return true;
}

std::string FaultInjector::CountsToString() const {
  std::string out;
  for (int i = 0; i < kFaultKindCount; ++i) {
    if (!out.empty()) out += ' ';
    out += FaultKindName(static_cast<FaultKind>(i));
    out += '=';
    out += std::to_string(counts_[i].load(std::memory_order_relaxed));
  }
  return out;
}

}  // namespace engram::io
