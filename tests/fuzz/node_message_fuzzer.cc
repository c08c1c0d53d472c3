// Fuzz target: the node protocol's messages (src/node/messages.*), which the
// service decodes from untrusted clients and a client from the service.
//
// Input: one control byte, then a payload. The control byte picks the
// message kind (c % 7) and, for a gather's answer (its parts and its end),
// how many rows of how many bytes the request had. A decoder must refuse a payload or accept it
// whole; an accepted message must encode back to the same bytes.
//
// Control bytes 0xf0..0xf3 fuzz the checks a receiver makes before it acts
// on a message: a client's name (0xf0), the framing of a byte stream as the
// service reads it, descriptors and limits included (0xf1), a welcome
// against the memory it describes (0xf2), and a request's row IDs against
// a table (0xf3).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "src/node/client_name.h"
#include "src/node/messages.h"
#include "src/node/wire.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {

int FuzzNodeMessage(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  std::span<const uint8_t> p(data + 1, size - 1);
  auto same = [&p](const std::vector<uint8_t>& encoded) {
    return encoded.size() == p.size() && std::memcmp(encoded.data(), p.data(), p.size()) == 0;
  };
  switch (control) {
    case 0xf0: {
      const std::string_view name(reinterpret_cast<const char*>(p.data()), p.size());
      if (node::CheckClientName(name).ok()) {
        FUZZ_CHECK(name.size() <= node::kMaxClientNameBytes);
        for (char c : name) FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
      }
      return 0;
    }
    case 0xf1: {
      // The stream as a client sends it, read by the service's reader: every
      // message it yields is whole and within the limit.
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) return 0;
      const size_t sent = p.empty() ? 0 : size_t(std::max<ssize_t>(0, ::send(pair[0], p.data(), p.size(), 0)));
      ::shutdown(pair[0], SHUT_WR);
      node::MessageReader reader(/*max_payload=*/4096, /*keep_descriptor=*/false);
      size_t taken = 0;
      for (int i = 0; i < 1000; ++i) {
        auto progress = reader.ReadFrom(pair[1]);
        if (!progress.ok() || *progress != node::MessageReader::Progress::kMessage) break;
        node::Message m = reader.Take();
        FUZZ_CHECK(m.payload.size() <= 4096);
        FUZZ_CHECK(m.fd == -1);
        taken += sizeof(node::FrameHeader) + m.payload.size();
      }
      FUZZ_CHECK(taken <= sent);
      ::close(pair[0]);
      ::close(pair[1]);
      return 0;
    }
    case 0xf2: {
      if (p.size() < 8) return 0;
      uint64_t mapped;
      std::memcpy(&mapped, p.data(), 8);
      auto m = node::DecodeWelcome(p.subspan(8));
      if (m.ok() && node::CheckWelcome(*m, mapped).ok()) {
        for (const node::WelcomeTable& t : m->tables) {
          FUZZ_CHECK(t.geometry.row_bytes == t.record_bytes && t.record_bytes != 0);
          FUZZ_CHECK(t.index_offset + t.geometry.index_bytes <= mapped);
          FUZZ_CHECK(t.slab_offset + t.geometry.slab_bytes <= mapped);
        }
      }
      return 0;
    }
    case 0xf3: {
      if (p.size() < 8) return 0;
      uint64_t rows;
      std::memcpy(&rows, p.data(), 8);
      auto m = node::DecodeRowsRequest(p.subspan(8));
      if (!m.ok()) return 0;
      const bool distinct = (rows & 1) != 0;
      if (node::CheckRowIds(m->row_ids, rows, distinct, "t").ok()) {
        for (size_t i = 0; i < m->row_ids.size(); ++i) {
          FUZZ_CHECK(m->row_ids[i] < rows);
          if (distinct) {
            for (size_t j = i + 1; j < m->row_ids.size() && j < i + 64; ++j) FUZZ_CHECK(m->row_ids[i] != m->row_ids[j]);
          }
        }
      }
      return 0;
    }
    default:
      break;
  }
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
      // A gather's answer: its parts and its end, for a request of `rows`
      // rows of 8 bytes.
      const size_t rows = control >> 3;  // 0..31
      const uint32_t record = 8;
      GatherResult r;
      if (node::DecodeGatherDone(p, rows, &r).ok()) {
        for (size_t f : r.failed_positions) FUZZ_CHECK(f < rows);
      }
      if (auto part = node::DecodeGatherPart(p, rows, record); part.ok()) {
        // The part's rows lie inside the payload and inside the request, and
        // every failed position is one of its rows.
        FUZZ_CHECK(part->first + part->count <= rows);
        FUZZ_CHECK(part->rows >= p.data() && part->rows + size_t{part->count} * record <= p.data() + p.size());
        for (uint64_t f : part->failed) FUZZ_CHECK(f < part->count);
      }
      break;
    }
  }
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzNodeMessage)
