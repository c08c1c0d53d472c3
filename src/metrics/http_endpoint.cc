#include "src/metrics/http_endpoint.h"

#include "src/metrics/metrics_snapshot.h"
#include "storage/log.h"

#include <atomic>
#include <boost/algorithm/string/predicate.hpp>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <list>
#include <optional>
#include <thread>

namespace engram {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Result<HttpEndpointOptions> ParseListenAddress(std::string_view spec) {
  HttpEndpointOptions o;
  size_t colon = spec.rfind(':');
  if (colon == std::string_view::npos) {
    return Status::InvalidArgument("listen address '" + std::string(spec) + "' is not HOST:PORT");
  }
  std::string_view host = spec.substr(0, colon);
  std::string_view port = spec.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (!host.empty()) o.address = std::string(host);
  // "localhost" is loopback by definition (RFC 6761); mapping it here keeps
  // a resolver (and /etc/hosts) out of the decision of where /metrics is
  // served.
  if (boost::algorithm::iequals(host, "localhost")) o.address = "127.0.0.1";
  unsigned value = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || p != port.data() + port.size() || value > 65535) {
    return Status::InvalidArgument("listen address '" + std::string(spec) + "': bad port");
  }
  o.port = static_cast<uint16_t>(value);
  boost::system::error_code aec;
  asio::ip::make_address(o.address, aec);
  if (aec) return Status::InvalidArgument("listen address '" + std::string(spec) + "': bad IP address");
  return o;
}

RoutedRequest RouteHttpRequest(std::string_view method, std::string_view target) {
  // Beast parses methods case-sensitively: "GET" and "HEAD" exactly.
  RoutedRequest r;
  r.head_only = method == "HEAD";
  if (method != "GET" && !r.head_only) {
    r.route = HttpRoute::kMethodNotAllowed;
    r.head_only = false;
    return r;
  }
  const std::string_view path = target.substr(0, target.find('?'));
  if (path == "/metrics") {
    r.route = HttpRoute::kMetrics;
  } else if (path == "/healthz") {
    r.route = HttpRoute::kHealthz;
  } else {
    r.route = HttpRoute::kNotFound;
    r.head_only = false;
  }
  return r;
}

namespace {

class Session;

// Loopback, including an IPv4 address mapped into IPv6 (::ffff:127.0.0.1).
bool IsLoopback(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).is_loopback();
  }
  return a.is_loopback();
}

}  // namespace

class MetricsHttpEndpoint::Impl {
 public:
  Impl(HttpEndpointOptions options, Renderer render)
      : options_(std::move(options)), render_(std::move(render)), acceptor_(io_) {}
  ~Impl() {
    // Sessions still queued in io_ are destroyed here, while the counters
    // they touch are alive.
    boost::system::error_code ec;
    acceptor_.close(ec);
  }

  Status Bind() {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(options_.address, ec);
    if (ec) return Status::InvalidArgument("metrics endpoint: bad address " + options_.address);
    tcp::endpoint ep(addr, options_.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    // Accept() drains the queue with synchronous accepts that must not block.
    if (!ec) acceptor_.non_blocking(true, ec);
    if (ec) {
      return Status::IOError("metrics endpoint: cannot listen on " + options_.address + ":" +
                             std::to_string(options_.port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    if (!IsLoopback(addr)) {
      log::Warn("metrics endpoint: {} is not a loopback address: /metrics on port {} is reachable from other "
                "hosts (listen on 127.0.0.1 or localhost to keep it local)",
                options_.address, port_);
    }
    return Status::OK();
  }

  void Run() {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }

  void Stop() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  HttpEndpointOptions options_;
  Renderer render_;
  // Counters and the session registry are declared before io_ so they
  // outlive the sessions that the io_context destroys on shutdown.
  std::atomic<uint64_t> served_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> accept_errors_{0};
  // Touched only on the endpoint's thread (the one that runs io_): open
  // sessions; those waiting for a complete request, and those waiting for
  // the client to take an answer, each longest-waiting first (the eviction
  // candidates at the cap).
  size_t open_connections_ = 0;
  std::list<Session*> waiting_;
  std::list<Session*> writing_;
  uint16_t port_ = 0;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  // After a failed accept (EMFILE, ENFILE, ENOBUFS: the error repeats until
  // something is freed) the next one waits a moment instead of spinning.
  asio::steady_timer accept_backoff_{io_};
  bool accept_error_logged_ = false;
  std::thread thread_;

  // The store's metrics followed by the endpoint's own counters (rendered
  // here rather than by the store, which would race the endpoint's start).
  std::string RenderWithOwnCounters() {
    MetricsSnapshot own;
    own.AddCounter("engram_metrics_http_requests_total", "Requests to the metrics endpoint, by outcome.",
                   {{"outcome", "served"}}, double(served_.load()));
    own.AddCounter("engram_metrics_http_requests_total", "", {{"outcome", "rejected"}}, double(rejected_.load()));
    own.AddCounter("engram_metrics_http_connections_evicted_total",
                   "Connections closed while waiting for a complete request or for the client to read an answer, "
                   "to admit a new one at the connection cap.",
                   {},
                   double(evicted_.load()));
    own.AddCounter("engram_metrics_http_accept_errors_total",
                   "Failed accepts (descriptor or buffer exhaustion); retried every 100 ms.", {},
                   double(accept_errors_.load()));
    return render_() + own.ToPrometheusText();
  }

 private:
  void Accept();
  // Opens a session for a new connection, making room at the cap.
  void Admit(tcp::socket socket);
};

namespace {

// One client connection: read a request (with a deadline), answer, repeat
// while the client keeps the connection alive. Lives on the endpoint's
// thread only; counted in the owner's open_connections_ from construction
// until Close().
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, MetricsHttpEndpoint::Impl* owner)
      : stream_(std::move(socket)), owner_(owner) {
    ++owner_->open_connections_;
  }
  ~Session() { Close(); }

  void Start() { Read(); }

  // Since when the connection has been waiting on its client (for a request,
  // or to take an answer); meaningful while it is in waiting_ or writing_.
  std::chrono::steady_clock::time_point waiting_since() const { return waiting_since_; }

  // Closes the connection now, while it waits for a request or for its
  // client to read an answer, to make room for a new one. The pending read
  // or write completes with an error and drops the last reference.
  void Evict() {
    owner_->evicted_.fetch_add(1);
    owner_->rejected_.fetch_add(1);
    Close();
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(owner_->options_.max_header_bytes));
    parser_->body_limit(4096);
    stream_.expires_after(owner_->options_.header_timeout);
    WaitOn(owner_->waiting_);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  // Enters `list` (the owner's waiting_ or writing_) at its end.
  void WaitOn(std::list<Session*>& list) {
    StopWaiting();
    waiting_in_ = &list;
    waiting_position_ = list.insert(list.end(), this);
    waiting_since_ = std::chrono::steady_clock::now();
  }

  void StopWaiting() {
    if (waiting_in_ != nullptr) {
      waiting_in_->erase(waiting_position_);
      waiting_in_ = nullptr;
    }
  }

  void OnRead(beast::error_code ec) {
    StopWaiting();
    if (closed_) return;  // evicted while the read's completion was queued
    if (ec == http::error::end_of_stream || ec == asio::error::eof) return Close();
    if (ec == beast::error::timeout) {
      owner_->rejected_.fetch_add(1);
      return Close();
    }
    if (ec) {
      // A malformed or oversized request: say so, then close.
      owner_->rejected_.fetch_add(1);
      const http::status status =
          ec == http::error::body_limit ? http::status::payload_too_large
          : ec == http::error::header_limit || ec == http::error::buffer_overflow
              ? http::status::request_header_fields_too_large
              : http::status::bad_request;
      return Reply(status,
                   "text/plain", std::string("bad request: ") + ec.message() + "\n", /*keep_alive=*/false, 11);
    }
    const auto& req = parser_->get();
    bool keep = req.keep_alive();
    unsigned version = req.version();

    const RoutedRequest routed =
        RouteHttpRequest(std::string_view(req.method_string().data(), req.method_string().size()),
                         std::string_view(req.target().data(), req.target().size()));
    switch (routed.route) {
      case HttpRoute::kMethodNotAllowed:
        owner_->rejected_.fetch_add(1);
        return Reply(http::status::method_not_allowed, "text/plain", "only GET and HEAD\n", keep, version);
      case HttpRoute::kMetrics:
        owner_->served_.fetch_add(1);
        return Reply(http::status::ok, "text/plain; version=0.0.4; charset=utf-8", owner_->RenderWithOwnCounters(), keep, version,
                     routed.head_only);
      case HttpRoute::kHealthz:
        owner_->served_.fetch_add(1);
        return Reply(http::status::ok, "text/plain", "ok\n", keep, version, routed.head_only);
      case HttpRoute::kNotFound:
        break;
    }
    owner_->rejected_.fetch_add(1);
    return Reply(http::status::not_found, "text/plain", "not found; try /metrics or /healthz\n", keep, version);
  }

  void Reply(http::status status, const char* content_type, std::string body, bool keep_alive, unsigned version,
             bool head_only = false) {
    auto res = std::make_shared<http::response<http::string_body>>(status, version);
    res->set(http::field::server, "engram-store");
    res->set(http::field::content_type, content_type);
    res->keep_alive(keep_alive);
    if (status == http::status::method_not_allowed) res->set(http::field::allow, "GET, HEAD");
    res->body() = std::move(body);
    res->prepare_payload();
    if (head_only) res->body().clear();
    stream_.expires_after(owner_->options_.io_timeout);
    // Until the write completes the connection waits for its client to take
    // the answer: one that never reads is evictable like an idle one.
    WaitOn(owner_->writing_);
    if (head_only) {
      auto sr = std::make_shared<http::response_serializer<http::string_body>>(*res);
      http::async_write_header(stream_, *sr, [self = shared_from_this(), res, sr, keep_alive](beast::error_code ec, size_t) {
        self->OnWrite(ec, keep_alive);
      });
      return;
    }
    http::async_write(stream_, *res, [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
      self->OnWrite(ec, keep_alive);
    });
  }

  void OnWrite(beast::error_code ec, bool keep_alive) {
    StopWaiting();
    if (closed_) return;  // evicted while the write's completion was queued
    if (ec || !keep_alive) return Close();
    // Bytes past the answered request: the client sent its next request
    // before it had this answer. A run of those is bounded, so a client that
    // queues requests without reading the answers gets that many renders,
    // not one per request it can send.
    if (buffer_.size() > 0) {
      if (++pipelined_answers_ >= owner_->options_.max_pipelined_answers) return Park();
    } else {
      pipelined_answers_ = 0;
    }
    Read();
  }

  // Reads nothing more: the connection waits, evictable, until io_timeout
  // closes it.
  void Park() {
    WaitOn(owner_->waiting_);
    park_timer_.expires_after(owner_->options_.io_timeout);
    park_timer_.async_wait([self = shared_from_this()](boost::system::error_code) {
      if (self->closed_) return;
      self->owner_->rejected_.fetch_add(1);
      self->Close();
    });
  }

  void Close() {
    StopWaiting();
    if (closed_) return;
    closed_ = true;
    park_timer_.cancel();
    --owner_->open_connections_;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  asio::steady_timer park_timer_{stream_.get_executor()};
  size_t pipelined_answers_ = 0;  // answers in a row to requests sent before the previous answer
  bool closed_ = false;
  // The owner's list this session is in (waiting_ or writing_), or null.
  std::list<Session*>* waiting_in_ = nullptr;
  std::list<Session*>::iterator waiting_position_;
  std::chrono::steady_clock::time_point waiting_since_;
  beast::flat_buffer buffer_{16384};
  std::optional<http::request_parser<http::string_body>> parser_;
  MetricsHttpEndpoint::Impl* owner_;
};

}  // namespace

void MetricsHttpEndpoint::Impl::Admit(tcp::socket socket) {
  // At the cap, the connection that has waited longest on its client (for a
  // request, or to take an answer) makes room: refusing the newcomer instead
  // would let a client that holds max_connections idle or never-reading
  // sockets lock every scraper out.
  if (open_connections_ >= options_.max_connections) {
    Session* oldest = nullptr;
    for (const std::list<Session*>* list : {&waiting_, &writing_}) {
      if (!list->empty() && (oldest == nullptr || list->front()->waiting_since() < oldest->waiting_since())) {
        oldest = list->front();
      }
    }
    if (oldest != nullptr) oldest->Evict();
  }
  if (open_connections_ >= options_.max_connections) {
    // Every connection is between a request and its answer: refuse by
    // closing; the client may retry.
    rejected_.fetch_add(1);
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  std::make_shared<Session>(std::move(socket), this)->Start();
}

void MetricsHttpEndpoint::Impl::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      Admit(std::move(socket));
      // Then more of the connections waiting in the kernel's queue: one
      // accept per turn of the event loop would let a client that reconnects
      // as fast as it is closed keep a scraper's connection queued behind
      // its own while every open session takes its turn. At most a quarter
      // of the cap a turn: the newcomers of one turn must not evict each
      // other before their requests are read in the next.
      for (size_t i = 0; i < options_.max_connections / 4; ++i) {
        tcp::socket next(io_);
        boost::system::error_code accept_ec;
        acceptor_.accept(next, accept_ec);
        if (accept_ec) break;  // would_block: the queue is empty (others: the next async_accept says)
        Admit(std::move(next));
      }
      Accept();
      return;
    }
    accept_errors_.fetch_add(1);
    if (!accept_error_logged_) {
      accept_error_logged_ = true;
      log::Warn("metrics endpoint: accept failed ({}); retrying every 100 ms", ec.message());
    }
    accept_backoff_.expires_after(std::chrono::milliseconds(100));
    accept_backoff_.async_wait([this](boost::system::error_code wait_ec) {
      if (!wait_ec && acceptor_.is_open()) Accept();
    });
  });
}

MetricsHttpEndpoint::MetricsHttpEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsHttpEndpoint::~MetricsHttpEndpoint() {
  if (impl_) impl_->Stop();
}

Result<std::unique_ptr<MetricsHttpEndpoint>> MetricsHttpEndpoint::Start(const HttpEndpointOptions& options,
                                                                        Renderer render_metrics) {
  if (!render_metrics) return Status::InvalidArgument("metrics endpoint: no renderer");
  auto impl = std::make_unique<Impl>(options, std::move(render_metrics));
  ENGRAM_RETURN_IF_ERROR(impl->Bind());
  impl->Run();
  log::Info("metrics endpoint listening on http://{}:{}/metrics", options.address, impl->port_);
  return std::unique_ptr<MetricsHttpEndpoint>(new MetricsHttpEndpoint(std::move(impl)));
}

uint16_t MetricsHttpEndpoint::port() const { return impl_->port_; }
std::string MetricsHttpEndpoint::address() const { return impl_->options_.address; }
uint64_t MetricsHttpEndpoint::requests_served() const { return impl_->served_.load(); }
uint64_t MetricsHttpEndpoint::requests_rejected() const { return impl_->rejected_.load(); }
uint64_t MetricsHttpEndpoint::connections_evicted() const { return impl_->evicted_.load(); }
uint64_t MetricsHttpEndpoint::accept_errors() const { return impl_->accept_errors_.load(); }

}  // namespace engram
