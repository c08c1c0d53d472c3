// Connection floods and timed scrapes against a loopback HTTP endpoint: the
// metrics endpoint's reliability test (tests/metrics_http_test.cc) and its
// measuring tool (bench/engram-metrics-flood.cc) share them.
//
// Loopback only (127.0.0.1), and bounded: a flood runs on one thread until
// Stop() or its destructor (or kMaxFloodTime), a scrape has a deadline.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace engram::testing {

// A non-blocking socket connecting to 127.0.0.1:port (it may still be
// connecting on return), or -1.
inline int StartLoopbackConnect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

enum class FloodMode {
  kIdle,       // connect, then send nothing
  kSlowloris,  // connect, then one byte of a never-ending request header per second
  // connect, then send complete GET /metrics requests back to back for as
  // long as the socket takes them, and never read an answer
  kPipelineNeverRead,
};

// Holds `connections` sockets to 127.0.0.1:port open, reopening each one as
// soon as the server closes it, like a client that wants to keep them all.
class ConnectionFlood {
 public:
  static constexpr std::chrono::seconds kMaxFloodTime{300};

  ConnectionFlood(uint16_t port, size_t connections, FloodMode mode)
      : port_(port), mode_(mode), fds_(connections, -1), sent_(connections, 0) {
    thread_ = std::thread([this] { Run(); });
  }
  ~ConnectionFlood() { Stop(); }
  ConnectionFlood(const ConnectionFlood&) = delete;
  ConnectionFlood& operator=(const ConnectionFlood&) = delete;

  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // Connections opened so far (the first round included).
  uint64_t connects() const { return connects_.load(); }
  // Sockets currently open (connected or connecting).
  size_t open() const { return open_.load(); }

 private:
  // Non-blocking connect; the socket may still be connecting on return.
  int Open() {
    const int fd = StartLoopbackConnect(port_);
    if (fd < 0) return -1;
    connects_.fetch_add(1);
    return fd;
  }

  void Run() {
    static const std::string kPreamble = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    static const std::string kRequests = [] {
      std::string r;
      for (int i = 0; i < 16; ++i) r += "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
      return r;
    }();
    const bool pipelining = mode_ == FloodMode::kPipelineNeverRead;
    const auto end = std::chrono::steady_clock::now() + kMaxFloodTime;
    auto next_trickle = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    std::vector<pollfd> polled;
    std::vector<size_t> index;
    while (!stop_.load() && std::chrono::steady_clock::now() < end) {
      for (size_t i = 0; i < fds_.size(); ++i) {
        if (fds_[i] < 0) {
          fds_[i] = Open();
          sent_[i] = 0;
        }
      }
      if (mode_ == FloodMode::kSlowloris && std::chrono::steady_clock::now() >= next_trickle) {
        next_trickle += std::chrono::seconds(1);
        for (size_t i = 0; i < fds_.size(); ++i) {
          if (fds_[i] < 0) continue;
          const char c = sent_[i] < kPreamble.size() ? kPreamble[sent_[i]] : 'a';
          if (send(fds_[i], &c, 1, MSG_NOSIGNAL) == 1) ++sent_[i];
        }
      }
      if (pipelining) {
        // Up to 64 requests a round, as many as the socket takes now; a
        // partly sent batch goes on where it stopped (sent_).
        for (size_t i = 0; i < fds_.size(); ++i) {
          if (fds_[i] < 0) continue;
          for (int batch = 0; batch < 4; ++batch) {
            const size_t offset = sent_[i] % kRequests.size();
            const ssize_t n = send(fds_[i], kRequests.data() + offset, kRequests.size() - offset,
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n <= 0) break;
            sent_[i] += size_t(n);
          }
        }
      }
      polled.clear();
      index.clear();
      for (size_t i = 0; i < fds_.size(); ++i) {
        if (fds_[i] < 0) continue;
        // A pipelining client never reads: it notices only the server's
        // close (POLLRDHUP for a FIN, POLLHUP/POLLERR for a reset).
        polled.push_back(pollfd{fds_[i], short(pipelining ? POLLRDHUP : POLLIN), 0});
        index.push_back(i);
      }
      open_.store(polled.size());
      if (poll(polled.data(), polled.size(), pipelining ? 10 : 20) <= 0) continue;
      for (size_t k = 0; k < polled.size(); ++k) {
        if (polled[k].revents == 0) continue;
        if (pipelining) {
          close(polled[k].fd);
          fds_[index[k]] = -1;
          continue;
        }
        char buf[512];
        const ssize_t n = recv(polled[k].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) continue;
        close(polled[k].fd);  // closed by the server (or failed): reopen next round
        fds_[index[k]] = -1;
      }
    }
    for (int& fd : fds_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    open_.store(0);
  }

  const uint16_t port_;
  const FloodMode mode_;
  std::vector<int> fds_;
  std::vector<size_t> sent_;  // bytes of the slow request (or of the pipelined ones) sent on each socket
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> connects_{0};
  std::atomic<size_t> open_{0};
  std::thread thread_;
};

// GET path from 127.0.0.1:port on a fresh connection ("Connection: close"),
// everything (connect, send, the whole answer) within `deadline`. Returns
// the seconds it took, or a negative number if it did not get a complete
// "200" answer in time.
inline double TimedScrape(uint16_t port, const std::string& path, std::chrono::milliseconds deadline) {
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + deadline;
  auto remaining_ms = [&] {
    return int(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count()));
  };
  const int fd = StartLoopbackConnect(port);
  if (fd < 0) return -1;
  pollfd connecting{fd, POLLOUT, 0};
  int error = 0;
  socklen_t len = sizeof error;
  bool ok = poll(&connecting, 1, remaining_ms()) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 &&
            error == 0;
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ok = ok && send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size());
  std::string answer;
  bool closed = false;
  while (ok && !closed) {
    pollfd p{fd, POLLIN, 0};
    const int ms = remaining_ms();
    if (ms == 0 || poll(&p, 1, ms) != 1) break;
    char buf[16384];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      answer.append(buf, size_t(n));
    } else if (n == 0) {
      closed = true;
    } else if (errno != EAGAIN && errno != EINTR) {
      break;
    }
  }
  close(fd);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return closed && answer.rfind("HTTP/1.1 200", 0) == 0 ? seconds : -1;
}

struct ScrapeStats {
  size_t attempts = 0;
  size_t succeeded = 0;
  double p50_seconds = 0;  // over the successful scrapes
  double p99_seconds = 0;
  double success_rate() const { return attempts ? double(succeeded) / double(attempts) : 0; }
};

struct ScrapePlan {
  std::string path = "/metrics";
  size_t threads = 3;                    // scrapes in flight at once
  size_t scrapes_per_thread = 50;
  std::chrono::milliseconds gap{50};     // between one thread's scrapes
  std::chrono::milliseconds deadline{1000};
  // Stop early once this many scrapes have failed (the verdict is known).
  size_t give_up_after_failures = SIZE_MAX;
  std::chrono::seconds max_time{60};     // and in any case after this long
};

// Scrapes concurrently per plan; latency percentiles over the successes.
inline ScrapeStats ScrapeConcurrently(uint16_t port, const ScrapePlan& plan) {
  std::mutex mu;
  std::vector<double> latencies;
  size_t attempts = 0;
  std::atomic<size_t> failures{0};
  const auto end = std::chrono::steady_clock::now() + plan.max_time;
  std::vector<std::thread> threads;
  for (size_t t = 0; t < plan.threads; ++t) {
    threads.emplace_back([&] {
      for (size_t i = 0; i < plan.scrapes_per_thread; ++i) {
        if (failures.load() >= plan.give_up_after_failures || std::chrono::steady_clock::now() >= end) break;
        const double s = TimedScrape(port, plan.path, plan.deadline);
        {
          std::lock_guard lock(mu);
          ++attempts;
          if (s >= 0) latencies.push_back(s);
        }
        if (s < 0) failures.fetch_add(1);
        std::this_thread::sleep_for(plan.gap);
      }
    });
  }
  for (auto& t : threads) t.join();
  ScrapeStats stats;
  stats.attempts = attempts;
  stats.succeeded = latencies.size();
  std::sort(latencies.begin(), latencies.end());
  auto percentile = [&](double q) {
    return latencies.empty() ? 0.0 : latencies[std::min(latencies.size() - 1, size_t(q * double(latencies.size())))];
  };
  stats.p50_seconds = percentile(0.50);
  stats.p99_seconds = percentile(0.99);
  return stats;
}

}  // namespace engram::testing
