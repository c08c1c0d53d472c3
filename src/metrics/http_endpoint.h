// MetricsHttpEndpoint: serves GET /metrics (Prometheus text format 0.0.4) and
// GET /healthz over HTTP/1.1, on a thread of its own (Boost.Beast on Asio).
//
// Why its own thread and io_context: a scrape must never run on, or wait for,
// the store's I/O completion path, and a slow or stuck client must never stall
// anything but its own connection. Every read and write has a deadline, the
// request header size is capped, and the number of open connections is
// bounded; whatever goes wrong is answered with 4xx or a closed socket.
//
// The connection cap must not become a way to lock scrapers out: a client
// holding idle (or one-byte-per-second) connections, or connections whose
// answers it never reads, would otherwise fill it for good. So a connection
// has header_timeout to deliver a complete request and io_timeout to take
// each answer, and a new connection that arrives at the cap evicts the
// connection that has waited longest on its client: for a request, or for an
// answer the client does not read. A scraper sends its request as soon as it
// connects and reads the answer, so it is served; the connections it pushes
// out were idle or stalled. A connection reads its next request only once
// its previous answer is written, and answers at most max_pipelined_answers
// requests in a row that the client sent before reading the previous answer;
// so a client that pipelines requests and never reads the answers costs a
// bounded number of renders, then waits (evictable) until io_timeout closes
// it. Every turn of the event loop accepts up to a quarter of
// max_connections queued connections, so a scraper's connection does not
// queue behind a flood of reconnects for long. Memory stays bounded: at most
// max_connections sessions, each with at most max_header_bytes of header, a
// 4 KiB body and one answer being written.
//
// A listen address that is not loopback is served, with a warning in the log
// (spdlog): the library never writes to stderr itself; the tools' logging
// (src/common/logging.h) sends log lines to stderr.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "engram/status.h"

namespace engram {

struct HttpEndpointOptions {
  std::string address = "127.0.0.1";  // loopback by default: metrics are not for the world
  uint16_t port = 9464;               // 0 = any free port (see port())
  // From the moment a connection opens (or its previous answer is written,
  // on keep-alive) to its complete request header: a scraper needs a few
  // milliseconds, an idle or trickling client is closed.
  std::chrono::milliseconds header_timeout{1000};
  std::chrono::milliseconds io_timeout{5000};  // per write of one answer
  // Open connections at most (each holds a descriptor of the embedding
  // process, so this stays far below the usual 1024). At the cap a new
  // connection evicts the one that has waited longest for its request or
  // for its client to read an answer.
  size_t max_connections = 256;
  size_t max_header_bytes = 8192;
  // Answers in a row on one connection to requests that arrived before the
  // previous answer was written (HTTP pipelining). After that many the
  // connection reads no more requests: it waits, evictable, until io_timeout
  // closes it.
  size_t max_pipelined_answers = 16;
};

// Parses "HOST:PORT", "[V6]:PORT", "localhost:PORT" (127.0.0.1, without
// asking a resolver) or ":PORT" (loopback) into options. HOST is an IP
// address otherwise: a metrics endpoint should not depend on DNS.
Result<HttpEndpointOptions> ParseListenAddress(std::string_view spec);

// How the endpoint answers a parsed request: a pure function of its method
// and target (query string ignored), so it can be fuzzed together with the
// HTTP parser (tests/fuzz/http_request_fuzzer.cc).
enum class HttpRoute : uint8_t {
  kMetrics,           // 200, the Prometheus text
  kHealthz,           // 200, "ok"
  kMethodNotAllowed,  // 405 (anything but GET and HEAD)
  kNotFound,          // 404
};
struct RoutedRequest {
  HttpRoute route = HttpRoute::kNotFound;
  bool head_only = false;  // HEAD: headers without the body
};
RoutedRequest RouteHttpRequest(std::string_view method, std::string_view target);

class MetricsHttpEndpoint {
 public:
  using Renderer = std::function<std::string()>;

  // Binds and starts serving. `render_metrics` is called on the endpoint's
  // thread for every GET /metrics; it must be safe to call concurrently with
  // the store's work (it reads counters, it does not lock the hot path).
  static Result<std::unique_ptr<MetricsHttpEndpoint>> Start(const HttpEndpointOptions& options,
                                                            Renderer render_metrics);
  ~MetricsHttpEndpoint();  // stops accepting, closes connections, joins the thread

  MetricsHttpEndpoint(const MetricsHttpEndpoint&) = delete;
  MetricsHttpEndpoint& operator=(const MetricsHttpEndpoint&) = delete;

  uint16_t port() const;
  std::string address() const;
  // Counters about the endpoint itself (also appended to every /metrics body
  // as engram_metrics_http_requests_total and _accept_errors_total).
  uint64_t requests_served() const;
  uint64_t requests_rejected() const;  // 4xx answers and connections closed for timeout/limits
  // Connections closed while they waited for a complete request or for
  // their client to read an answer, to make room for a new one at
  // max_connections (also counted in requests_rejected).
  uint64_t connections_evicted() const;
  // Failed accepts (EMFILE, ENFILE, ENOBUFS...). The endpoint retries every
  // 100 ms while they last, so this grows by ~10 per second, not by a spin.
  uint64_t accept_errors() const;

  class Impl;

 private:
  explicit MetricsHttpEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace engram
