#include "src/replay/side_area.h"

#include <charconv>

namespace engram::replay {

void SideArea::Add(uint64_t row) {
  if (capacity_ == 0 || live_.count(row) != 0) return;
  live_.emplace(row, next_seq_);
  fifo_.push_back({row, next_seq_++});
  while (live_.size() > capacity_) {
    const Entry oldest = fifo_.front();
    fifo_.pop_front();
    if (auto it = live_.find(oldest.row); it != live_.end() && it->second == oldest.seq) live_.erase(it);
  }
}

Result<SideAreaPolicy> ParseSideAreaPolicy(std::string_view policy) {
  SideAreaPolicy p;
  const size_t at = policy.find("+side=");
  if (at == std::string_view::npos) {
    p.cache_spec = std::string(policy);
    return p;
  }
  p.cache_spec = std::string(policy.substr(0, at));
  const std::string_view v = policy.substr(at + 6);
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), p.fraction);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || !(p.fraction > 0 && p.fraction <= 0.5)) {
    return Status::InvalidArgument("policy '" + std::string(policy) + "': side=" + std::string(v) +
                                   " must be a fraction of the capacity in (0, 0.5]");
  }
  return p;
}

}  // namespace engram::replay
