#include "src/iobench/read_benchmark.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "storage/file_util.h"

namespace engram::io {
namespace {

uint64_t NextRandom(uint64_t& state) {  // xorshift64*
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

// Drops the file from the page cache (cold) or reads it all once (warm).
Status PrepareCache(const std::string& path, bool cold) {
  // A regular file only: warming /dev/zero would never end, a FIFO would
  // block the open.
  ENGRAM_ASSIGN_OR_RETURN(int fd, fileutil::OpenReadOnly(path));
  if (cold) {
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  } else {
    std::vector<char> buf(1 << 20);
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
  }
  ::close(fd);
  return Status::OK();
}

// Per reader (thread or chain): only its own thread of control touches it.
struct Reader {
  BlockRead read;
  uint64_t rng = 0;
  uint64_t start_ns = 0;
  uint64_t errors = 0;
  std::vector<uint64_t> latencies_ns;
};

void RecordLast(std::atomic<uint64_t>& last_ns, uint64_t now) {
  uint64_t prev = last_ns.load();
  while (prev < now && !last_ns.compare_exchange_weak(prev, now)) {
  }
}

// Async mode: each chain resubmits from its own completion callback, so the
// engine's completion thread drives the loop the way fio's does. The callback
// captures only (context, index) so std::function stores it without a heap
// allocation per read.
struct AsyncChains {
  IoEngine* engine;
  std::vector<Reader>* state;
  uint64_t blocks;
  uint64_t deadline_ns;
  std::atomic<uint64_t>* last_ns;
  std::mutex mu;
  std::condition_variable cv;
  uint32_t active;  // guarded by mu

  void OnDone(uint32_t i) {
    Reader& r = (*state)[i];
    const uint64_t now = MonotonicNanos();
    r.latencies_ns.push_back(now - r.start_ns);
    if (!r.read.status.ok()) ++r.errors;
    if (now < deadline_ns) {
      r.read.offset = NextRandom(r.rng) % blocks * kBlockSize;
      r.start_ns = now;
      engine->SubmitBatch({&r.read, 1}, [this, i] { OnDone(i); });
      return;
    }
    RecordLast(*last_ns, now);
    std::lock_guard lock(mu);
    if (--active == 0) cv.notify_all();
  }
};

}  // namespace

Result<ReadBenchResult> RunReadBenchmark(const ReadBenchConfig& c) {
  if (c.queue_depth == 0 || c.threads == 0) return Status::InvalidArgument("read bench: depth and threads must be >= 1");
  IoOptions options;
  options.backend = c.backend;
  options.threads = c.threads;
  options.queue_depth = std::min<uint32_t>(4096, c.mode == ReadBenchMode::kAsync ? c.queue_depth : c.threads);
  options.use_direct_io = c.cold;
  options.rings = std::min(c.rings, options.queue_depth);
  ENGRAM_RETURN_IF_ERROR(PrepareCache(c.path, c.cold));
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<IoEngine> engine, CreateIoEngine(options));
  ENGRAM_ASSIGN_OR_RETURN(FileId file, engine->OpenFile(c.path));
  ENGRAM_ASSIGN_OR_RETURN(uint64_t size, engine->FileSize(file));
  const uint64_t blocks = size / kBlockSize;
  if (blocks == 0) return Status::InvalidArgument("read bench: '" + c.path + "' is smaller than one block");

  const uint32_t readers = c.mode == ReadBenchMode::kAsync ? c.queue_depth : c.threads;
  ENGRAM_ASSIGN_OR_RETURN(AlignedBuffer arena, AlignedBuffer::Allocate(size_t{readers} * kBlockSize));
  if (c.register_buffers) (void)engine->RegisterBuffer(arena.span());  // an optimization only

  std::vector<Reader> state(readers);
  for (uint32_t i = 0; i < readers; ++i) {
    state[i].rng = (c.seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull;
    if (state[i].rng == 0) state[i].rng = 1;
    state[i].read = BlockRead{file, 0, static_cast<uint32_t>(kBlockSize), arena.data() + size_t{i} * kBlockSize, Status()};
    state[i].latencies_ns.reserve(1 << 16);
  }
  const uint64_t start_ns = MonotonicNanos();
  const uint64_t deadline_ns = start_ns + static_cast<uint64_t>(c.seconds * 1e9);
  std::atomic<uint64_t> last_ns{start_ns};

  if (c.mode == ReadBenchMode::kSync) {
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < readers; ++t) {
      threads.emplace_back([&, t] {
        Reader& r = state[t];
        uint64_t now = MonotonicNanos();
        while (now < deadline_ns) {
          r.read.offset = NextRandom(r.rng) % blocks * kBlockSize;
          if (!engine->ReadBlocks({&r.read, 1}).ok()) ++r.errors;
          const uint64_t end = MonotonicNanos();
          r.latencies_ns.push_back(end - now);
          now = end;
        }
        RecordLast(last_ns, now);
      });
    }
    for (auto& t : threads) t.join();
  } else {
    AsyncChains chains{engine.get(), &state, blocks, deadline_ns, &last_ns, {}, {}, readers};
    for (uint32_t i = 0; i < readers; ++i) {
      Reader& r = state[i];
      r.read.offset = NextRandom(r.rng) % blocks * kBlockSize;
      r.start_ns = MonotonicNanos();
      engine->SubmitBatch({&r.read, 1}, [ctx = &chains, i] { ctx->OnDone(i); });
    }
    std::unique_lock lock(chains.mu);
    chains.cv.wait(lock, [&] { return chains.active == 0; });
  }

  ReadBenchResult result;
  result.engine = engine->Describe();
  engine->Shutdown();
  std::vector<uint64_t> all;
  for (Reader& r : state) {
    result.errors += r.errors;
    all.insert(all.end(), r.latencies_ns.begin(), r.latencies_ns.end());
  }
  result.reads = all.size();
  result.seconds = static_cast<double>(last_ns.load() - start_ns) / 1e9;
  if (result.seconds > 0) {
    result.iops = static_cast<double>(result.reads) / result.seconds;
    result.mb_per_s = result.iops * kBlockSize / (1024.0 * 1024.0);
  }
  auto percentile_us = [&](double q) {
    if (all.empty()) return 0.0;
    size_t k = std::min(all.size() - 1, static_cast<size_t>(q * static_cast<double>(all.size())));
    std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end());
    return static_cast<double>(all[k]) / 1000.0;
  };
  result.p50_us = percentile_us(0.5);
  result.p90_us = percentile_us(0.9);
  result.p99_us = percentile_us(0.99);
  result.p999_us = percentile_us(0.999);
  return result;
}

}  // namespace engram::io
