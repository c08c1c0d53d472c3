// Fuzz target: the node protocol's messages (src/node/messages.*), which the
// service decodes from untrusted clients and a client from the service.
//
// Input: one control byte, then a payload. The control byte picks the
// message kind (c % 7) and, for a gather's answer, how many rows of how
// many bytes it must carry. A decoder must refuse a payload or accept it
// whole; an accepted message must encode back to the same bytes.
#include <cstring>
#include <span>
#include <vector>

#include "src/node/messages.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {

int FuzzNodeMessage(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  std::span<const uint8_t> p(data + 1, size - 1);
  auto same = [&p](const std::vector<uint8_t>& encoded) {
    return encoded.size() == p.size() && std::memcmp(encoded.data(), p.data(), p.size()) == 0;
  };
  switch (control % 7) {
    case 0:
      if (auto m = node::DecodeHello(p); m.ok()) FUZZ_CHECK(same(node::Encode(*m)));
      break;
    case 1:
      if (auto m = node::DecodeWelcome(p); m.ok()) FUZZ_CHECK(same(node::Encode(*m)));
      break;
    case 2:
      if (auto m = node::DecodeRowsRequest(p); m.ok()) {
        FUZZ_CHECK(m->row_ids.size() <= node::kMaxRowsPerMessage);
        FUZZ_CHECK(same(node::Encode(*m)));
      }
      break;
    case 3:
      if (auto m = node::DecodeHitsReport(p); m.ok()) FUZZ_CHECK(same(node::Encode(*m)));
      break;
    case 4:
      if (auto m = node::DecodeTableStats(p); m.ok()) FUZZ_CHECK(same(node::Encode(*m)));
      break;
    case 5: {
      const Status s = node::DecodeStatus(p);
      FUZZ_CHECK(!s.ok());
      break;
    }
    case 6: {
      const size_t rows = control >> 3;  // 0..31
      const uint32_t record = 8;
      GatherResult r;
      auto at = node::DecodeGatherDone(p, rows, record, &r);
      if (at.ok()) {
        // The rows lie inside the payload, and every failed position is a row.
        FUZZ_CHECK(*at >= p.data() && *at + rows * record <= p.data() + p.size());
        for (size_t f : r.failed_positions) FUZZ_CHECK(f < rows);
      }
      break;
    }
  }
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzNodeMessage)
